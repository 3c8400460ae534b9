"""The service writes outbox records in its own transaction, on every stand: ``tx.publish``
in ``broker.transaction()`` (the record commits with the business write, or neither does),
and ``insert_statement`` run on the service's own driver inside its own transaction; the
record table is the one ``create_tables`` (``trinbox schema``) makes."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from trinbox import SqlBroker

from .outbox_kit import ORDERS, OrderEvents, OrderPlaced, placed, records
from .serving import make_app, serving
from .stands import STANDS, MariaStand, SqliteStand, Stand, StandName, fresh_stand


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        found.script(ORDERS[name])
        yield found


@asynccontextmanager
async def open_broker(stand: Stand) -> AsyncIterator[SqlBroker[Any]]:
    broker = stand.broker()
    app = make_app()
    app.add_broker(broker)
    app.on_startup(lambda: broker.create_tables(OrderEvents))
    async with serving(app):
        yield broker


async def test_a_record_commits_with_the_business_write(stand: Stand) -> None:
    async with open_broker(stand) as broker:
        async with broker.transaction() as tx:
            await tx.execute(
                "INSERT INTO orders (id, sku) VALUES (:id, :sku)", {"id": 7, "sku": "a"}
            )
            await tx.publish(OrderEvents, OrderPlaced(7, "a"), name="orders.placed")
        with pytest.raises(RuntimeError, match="payment declined"):
            async with broker.transaction() as tx:
                await tx.execute(
                    "INSERT INTO orders (id, sku) VALUES (:id, :sku)", {"id": 8, "sku": "b"}
                )
                await tx.publish(OrderEvents, OrderPlaced(8, "b"), name="orders.placed")
                raise RuntimeError("payment declined")
    assert stand.rows("SELECT id FROM orders") == [(7,)]
    assert records(stand) == [(1, "orders.placed", False)]
    ((payload, attempt),) = stand.rows("SELECT payload, attempt FROM order_outbox")
    assert placed(bytes(payload)) == {"order": 7, "sku": "a"}
    assert attempt == 1


def own_transaction(stand: Stand, statements: list[tuple[str, Any]]) -> None:
    """Run ``statements`` in one transaction of the stand's own driver, committed."""
    if isinstance(stand, SqliteStand):
        with sqlite3.connect(stand.path) as lite:
            for sql, params in statements:
                lite.execute(sql, params)
        return
    if isinstance(stand, MariaStand):
        maria = pymysql.connect(**{**stand._args, "autocommit": False})  # type: ignore[arg-type]
        try:
            with maria.cursor() as cur:
                for sql, params in statements:
                    cur.execute(sql, params)
            maria.commit()
        finally:
            maria.close()
        return
    with psycopg.connect(stand.url) as pg:
        for sql, params in statements:
            pg.execute(sql, params)


async def test_insert_statement_writes_a_record_on_the_services_own_driver(stand: Stand) -> None:
    async with open_broker(stand) as broker:
        sql, params = broker.insert_statement(
            OrderEvents,
            OrderPlaced(9, "c"),
            name="orders.placed",
            paramstyle="qmark" if stand.name == "sqlite" else "format",
        )
        mark = "?" if stand.name == "sqlite" else "%s"
        own_transaction(
            stand,
            [(f"INSERT INTO orders (id, sku) VALUES ({mark}, {mark})", (9, "c")), (sql, params)],
        )
    assert records(stand) == [(1, "orders.placed", False)]
    (payload,) = stand.rows("SELECT payload FROM order_outbox")[0]
    assert placed(bytes(payload)) == {"order": 9, "sku": "c"}
    # The due time the database filled (RetryAfter(generated=True)): the record is due.
    assert stand.value("SELECT count(*) FROM order_outbox WHERE retry_after IS NOT NULL") == 1
