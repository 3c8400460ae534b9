"""The ``Priority()`` role on every stand and form: rows published with mixed priorities are
handled smaller first, then by due time, then by id; a retried row keeps its priority; the
table ``broker.create_tables`` makes holds the priority in its claim index."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    App,
    Attempt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    Priority,
    RetryAfter,
    RowLock,
    SqlBroker,
    subscriber,
)
from trinbox.errors import SchemaError
from trinbox.testing import settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from ..stands import STANDS, Stand, StandName, fresh_stand
from .conftest import Case

TABLE = "ranked_jobs"


class RankedLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class RankedLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


# Each row its own key: the key never holds one row back behind another.
class RankedKeyed(Inbox[Advisory], table=TABLE, advisory_lock="ranked_jobs-{id}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


RANKED: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": RankedLock,
    "lease": RankedLease,
    "advisory": RankedKeyed,
}

# Due an hour ago, and a second apart: every row is due when the app starts.
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


@dataclass
class Job:
    name: str


async def _serve_in_order(
    case: Case, rows: list[tuple[str, dict[str, Any]]], retry_first: set[str]
) -> list[str]:
    """Publish ``rows`` (a name and its columns) in one transaction, so the first claim sees
    them all, and handle them with one worker; the rows named in ``retry_first`` are retried
    with ``retry_after(0)`` at their first delivery. Returns the names in handling order."""
    row = RANKED[case.form]
    broker = case.stand.broker(poll_interval=3600)
    handled: list[str] = []

    @subscriber(InboxQueue(row, "ranked").workers(1))
    async def work(job: Job) -> HandlerOutcome:
        handled.append(job.name)
        if job.name in retry_first and handled.count(job.name) == 1:
            return HandlerOutcome.retry_after(timedelta(0))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, work)
    app.on_startup(lambda: broker.create_tables(row))
    async with serving(app):
        async with broker.transaction() as tx:
            for name, columns in rows:
                await tx.publish(row, Job(name), queue="ranked", **columns)
        with trio.fail_after(20):
            await settled(app, work, len(rows) + len(retry_first))
    return handled


async def test_rows_are_handled_by_priority_then_due_time_then_id(case: Case) -> None:
    second = timedelta(seconds=1)
    rows: list[tuple[str, dict[str, Any]]] = [
        ("a", {"priority": 1, "retry_after": T0 + 2 * second}),
        ("b", {"priority": 1, "retry_after": T0 + second}),
        ("c", {"priority": 1, "retry_after": T0 + second}),  # b's tie: the id decides
        ("d", {"priority": 0, "retry_after": T0 + 3 * second}),
        ("e", {"retry_after": T0 + 3 * second}),  # no priority given: 0, after d by id
        ("f", {"priority": -2, "retry_after": T0 + 5 * second}),
        ("g", {"priority": 7, "retry_after": T0}),
    ]
    handled = await _serve_in_order(case, rows, retry_first=set())
    assert handled == ["f", "d", "e", "b", "c", "a", "g"]
    assert case.stand.rows(f"SELECT priority FROM {TABLE}") == []  # every row acked, deleted


async def test_a_retried_row_keeps_its_priority(case: Case) -> None:
    # y is retried at once: due now, after z's due time, it still comes before x and z, which
    # it would not with the priority written back to 0 (z's is 0 and z is due earlier).
    rows: list[tuple[str, dict[str, Any]]] = [
        ("z", {"priority": 0, "retry_after": T0}),
        ("x", {"priority": -3, "retry_after": T0}),
        ("y", {"priority": -5, "retry_after": T0}),
    ]
    handled = await _serve_in_order(case, rows, retry_first={"y"})
    assert handled == ["y", "y", "x", "z"]


async def test_the_claim_index_holds_the_priority(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
    row = RANKED[case.form]

    @subscriber(InboxQueue(row, "ranked"))
    async def work(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, work)
    app.on_startup(lambda: broker.create_tables(row))
    async with serving(app):
        await broker.publish(row, Job("one"), queue="ranked", priority=3)
        with trio.fail_after(20):
            await settled(app, work, 1)
    stand = case.stand
    if stand.name == "postgres":
        query = (
            "SELECT a.attname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true "
            "JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            f"WHERE c.relname = '{TABLE}_claim' ORDER BY k.n"
        )
    elif stand.name == "mariadb":
        query = (
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "
            f"DATABASE() AND TABLE_NAME = '{TABLE}' AND INDEX_NAME = '{TABLE}_claim' "
            "ORDER BY SEQ_IN_INDEX"
        )
    else:
        query = f"SELECT name FROM pragma_index_info('{TABLE}_claim') ORDER BY seqno"
    assert [r[0] for r in stand.rows(query)] == ["queue", "priority", "retry_after", "id"]


# -- the startup check of the column's type ---------------------------------------------------


class TypedRanked(Inbox[Lease], table="typed_ranked"):
    id: Annotated[int, Id(generated=True)]
    priority: Annotated[int, Priority()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


# The table by hand, its priority column of the given type.
TYPED_DDL: dict[StandName, str] = {
    "sqlite": (
        "CREATE TABLE typed_ranked (id INTEGER PRIMARY KEY, priority {type}, "
        "locked_until TEXT, payload BLOB) STRICT"
    ),
    "postgres": (
        "CREATE TABLE typed_ranked (id BIGSERIAL PRIMARY KEY, priority {type}, "
        "locked_until TIMESTAMPTZ, payload BYTEA)"
    ),
    "mariadb": (
        "CREATE TABLE typed_ranked (id BIGINT AUTO_INCREMENT PRIMARY KEY, priority {type}, "
        "locked_until DATETIME, payload LONGBLOB) ENGINE=InnoDB"
    ),
}
INTEGERS: dict[StandName, str] = {"sqlite": "INT", "postgres": "SMALLINT", "mariadb": "TINYINT"}


def _typed_app(stand: Stand) -> tuple[App, SqlBroker[Any], Subscriber[Any, Any], list[str]]:
    broker = stand.broker(poll_interval=3600)
    handled: list[str] = []

    @subscriber(InboxQueue(TypedRanked, "typed").workers(1))
    async def work(job: Job) -> None:
        handled.append(job.name)

    app = make_app()
    app.include(broker, work)
    return app, broker, work, handled


@pytest.mark.parametrize("stand_name", STANDS)
async def test_the_startup_check_takes_any_integer_priority(
    stand_name: StandName, tmp_path: Path
) -> None:
    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(TYPED_DDL[stand_name].format(type=INTEGERS[stand_name] + " NOT NULL"))
        app, broker, work, handled = _typed_app(stand)
        async with serving(app):
            async with broker.transaction() as tx:
                await tx.publish(TypedRanked, Job("later"), priority=2)
                await tx.publish(TypedRanked, Job("first"), priority=-1)
            with trio.fail_after(20):
                await settled(app, work, 2)
    assert handled == ["first", "later"]


@pytest.mark.parametrize("stand_name", STANDS)
async def test_the_startup_check_refuses_a_priority_that_is_not_an_integer(
    stand_name: StandName, tmp_path: Path
) -> None:
    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(TYPED_DDL[stand_name].format(type="TEXT NOT NULL"))
        app, _broker, _work, _handled = _typed_app(stand)
        with trio.fail_after(20), pytest.raises(SchemaError) as caught:
            await app.serve()
    message = str(caught.value)
    assert (
        "the Priority column of typed_ranked (TypedRanked) orders the claim by an integer, "
        in message
    )
    assert "found column 'priority' of type " in message
