"""The relay on every stand, with a real sink (an HTTP server the test starts): committed
records are sent, with their id in a header, and marked processed (or deleted); a record whose
transaction rolled back never is; a sink that fails is retried after the backoff and loses
nothing; a relay serves the names it names (whole names and prefixes, compared as written);
records written on the service's own driver are sent at the next poll; a record spent past
``max_attempts`` moves to its dead letter group, which the relay then passes over."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    App,
    Attempt,
    Backoff,
    Group,
    Headers,
    Id,
    InboxQueue,
    LockedUntil,
    OriginGroup,
    Payload,
    RetryAfter,
    SqlBroker,
)
from trinbox.outbox import ID_HEADER, Outbox, Record, relay
from trinbox.testing import settled
from trinbox.typing import Subscriber

from .http_sink import post_to, receiver
from .outbox_kit import OrderEvents, OrderPlaced, Pings, records
from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

FAST = Backoff.constant(0.05)  # a refused send is tried again at once, near enough


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        yield found


@asynccontextmanager
async def relaying(
    stand: Stand, to: Subscriber[Any, Any], *tables: type[Outbox], dead_letter: str | None = None
) -> AsyncIterator[tuple[App, SqlBroker[Any]]]:
    broker = stand.broker()
    app = make_app()
    mount = app.include(broker, to)
    if dead_letter is not None:
        mount.max_attempts(2).dead_letter(dead_letter)

    @app.on_startup
    async def create_tables() -> None:
        for table in tables or (OrderEvents,):
            await broker.create_tables(table)

    async with serving(app):
        yield app, broker


async def publish(
    broker: SqlBroker[Any], name: str, order: int, table: type[Outbox] = OrderEvents
) -> None:
    async with broker.transaction() as tx:
        await tx.publish(table, OrderPlaced(order, f"sku-{order}"), name=name)


async def test_committed_records_are_sent_with_their_id_and_marked_processed(
    stand: Stand,
) -> None:
    async with receiver() as http:
        to_http = relay(InboxQueue(OrderEvents, "webhook"))(post_to(http.url))
        async with relaying(stand, to_http) as (app, broker):
            await publish(broker, "orders.placed", 1)
            with pytest.raises(RuntimeError):
                async with broker.transaction() as tx:
                    await tx.publish(OrderEvents, OrderPlaced(2, "x"), name="orders.placed")
                    raise RuntimeError("rolled back")
            await publish(broker, "orders.shipped", 3)
            with trio.fail_after(20):
                await settled(app, to_http, 2)
            stats = app.statistics(to_http)
        assert (stats.acked, stats.retried, stats.retried_after) == (2, 0, 0)
    assert [(b["name"], json.loads(b["payload"])["order"]) for b in http.received] == [
        ("orders.placed", 1),
        ("orders.shipped", 3),
    ]
    ids = [row[0] for row in records(stand)]
    assert records(stand) == [(ids[0], "orders.placed", True), (ids[1], "orders.shipped", True)]
    for body, record_id in zip(http.received, ids, strict=True):
        assert body["headers"] == {ID_HEADER: str(record_id)}
        assert body["http_headers"][ID_HEADER] == str(record_id)
        assert body["attempt"] == 1
    assert stand.value("SELECT count(*) FROM order_outbox WHERE locked_until IS NOT NULL") == 0


async def test_without_a_processed_at_field_a_sent_record_is_deleted(stand: Stand) -> None:
    async with receiver() as http:
        to_http = relay(InboxQueue(Pings, "pings"))(post_to(http.url))
        async with relaying(stand, to_http, Pings) as (app, broker):
            for n in range(3):
                await publish(broker, "ping", n, Pings)
            with trio.fail_after(20):
                await settled(app, to_http, 3)
    assert sorted(json.loads(b["payload"])["order"] for b in http.received) == [0, 1, 2]
    assert all(b["attempt"] == 1 for b in http.received)  # no Attempt field: always 1
    assert stand.rows("SELECT id FROM ping_outbox") == []


async def test_a_failing_sink_is_retried_after_its_backoff_and_loses_nothing(
    stand: Stand,
) -> None:
    async with receiver() as http:
        http.refuse = 2  # the service behind it is down for two requests
        to_http = relay(InboxQueue(OrderEvents, "webhook").backoff(FAST))(post_to(http.url))
        async with relaying(stand, to_http) as (app, broker):
            await publish(broker, "orders.placed", 1)
            with trio.fail_after(20):
                await settled(app, to_http, 3)  # two failed sends, then the one that took
            stats = app.statistics(to_http)
    assert (http.refused, stats.retried_after, stats.acked) == (2, 2, 1)
    ((body),) = http.received
    assert body["attempt"] == 3
    assert [(name, done) for _, name, done in records(stand)] == [("orders.placed", True)]
    assert stand.value("SELECT attempt FROM order_outbox") == 4  # counted at each claim


async def test_a_sink_that_asks_for_later_waits(stand: Stand) -> None:
    seen: list[int] = []

    async def later_once(record: Record) -> Any:
        seen.append(record.attempt)
        from datetime import timedelta

        from trinbox import HandlerOutcome

        return HandlerOutcome.retry_after(timedelta(seconds=0.2)) if record.attempt == 1 else None

    to_sink = relay(InboxQueue(OrderEvents, "later"))(later_once)
    async with relaying(stand, to_sink) as (app, broker):
        await publish(broker, "orders.placed", 1)
        with trio.fail_after(20):
            await settled(app, to_sink, 2)
    assert seen == [1, 2]
    assert [done for _, _, done in records(stand)] == [True]


NAMES = [
    "orders.placed",
    "orders.shipped",
    "ordersX",  # not under the prefix "orders."
    "payments.refunded",
    "payments.captured",  # neither named nor under a prefix
    "Orders.placed",  # names compare as written, case included
    "it's 100% _x\\y",  # quotes, LIKE's wildcards and a backslash are text
    "it's 100% _x\\yz",
    "it's 100% ab\\y",
]


async def test_a_relay_serves_the_names_it_names_and_no_other(stand: Stand) -> None:
    async with receiver() as http:
        to_http = relay(
            InboxQueue(OrderEvents, "some"),
            names=["orders.*", "payments.refunded", "it's 100% _x\\*"],
        )(post_to(http.url))
        async with relaying(stand, to_http) as (app, broker):
            for n, name in enumerate(NAMES):
                await publish(broker, name, n)
            with trio.fail_after(20):
                await settled(app, to_http, 5)
                await app._subscription(to_http).wait_idle()
    assert sorted(b["name"] for b in http.received) == sorted(
        [
            "orders.placed",
            "orders.shipped",
            "payments.refunded",
            "it's 100% _x\\y",
            "it's 100% _x\\yz",
        ]
    )
    left = sorted(name for _, name, done in records(stand) if not done)
    assert left == sorted(["ordersX", "payments.captured", "Orders.placed", "it's 100% ab\\y"])


async def test_records_written_on_the_services_own_driver_are_sent_at_the_next_poll(
    stand: Stand,
) -> None:
    async with receiver() as http:
        to_http = relay(InboxQueue(OrderEvents, "webhook"))(post_to(http.url))
        async with relaying(stand, to_http) as (app, broker):
            sql, params = broker.insert_statement(OrderEvents, OrderPlaced(5, "own"), name="own")
            await broker.database.execute(sql, *params)  # wakes nothing: the poll finds it
            with trio.fail_after(20):
                await settled(app, to_http, 1)
    assert [b["name"] for b in http.received] == ["own"]


class Spendable(Outbox, table="spendable_outbox"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Tries:
    names: list[str]


async def test_a_spent_record_moves_to_its_dead_letter_group_which_the_relay_passes_over(
    stand: Stand,
) -> None:
    tries = Tries([])

    async def refuse_bad(record: Record) -> None:
        tries.names.append(record.name)
        if record.name == "bad":
            raise ConnectionError("the receiver refuses it")

    to_sink = relay(InboxQueue(Spendable, "every").backoff(FAST))(refuse_bad)
    async with relaying(stand, to_sink, Spendable, dead_letter="outbox.dead") as (app, broker):
        await publish(broker, "bad", 1, Spendable)
        with trio.fail_after(20):
            await settled(app, to_sink, 2)  # two attempts; the second moves it
        await publish(broker, "good", 2, Spendable)
        with trio.fail_after(20):
            await settled(app, to_sink, 3)
            await app._subscription(to_sink).wait_idle()
        stats = app.statistics(to_sink)
    assert tries.names == ["bad", "bad", "good"]
    assert stats.dead_lettered == 1
    assert stand.rows("SELECT name, dead_from FROM spendable_outbox") == [("outbox.dead", "bad")]


class TaggedEvents(Outbox, table="tagged_outbox"):
    """A record table with a Headers field: the record's own headers travel with it."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


async def test_a_records_own_headers_are_sent_beside_its_id(stand: Stand) -> None:
    async with receiver() as http:
        to_http = relay(InboxQueue(TaggedEvents, "webhook"))(post_to(http.url))
        async with relaying(stand, to_http, TaggedEvents) as (app, broker):
            async with broker.transaction() as tx:
                await tx.publish(
                    TaggedEvents,
                    OrderPlaced(1, "sku-1"),
                    name="orders.placed",
                    headers={"tenant": "acme", "request": "r-17"},
                )
                await tx.publish(TaggedEvents, OrderPlaced(2, "sku-2"), name="orders.placed")
            with trio.fail_after(20):
                await settled(app, to_http, 2)
    assert stand.rows("SELECT id FROM tagged_outbox") == []  # no ProcessedAt: sent, deleted
    sent = sorted(http.received, key=lambda body: json.loads(body["payload"])["order"])
    first, second = (body["headers"] for body in sent)
    assert first == {"tenant": "acme", "request": "r-17", ID_HEADER: first[ID_HEADER]}
    assert second == {ID_HEADER: second[ID_HEADER]}  # a record published without headers
    assert first[ID_HEADER] != second[ID_HEADER]
    assert sent[0]["http_headers"]["tenant"] == "acme"
