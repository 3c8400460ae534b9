"""Batch publish on every stand and form, in tables ``create_tables`` makes: ``publish_many`` and
``tx.publish_many`` write one row per item, chunk by chunk, and return what each item's
publish would, in the items' order (ids read back; a held key's holder, ``duplicate``); rows
carry their own headers and delays; a failure anywhere leaves none of the batch; each
(table, group) is woken once; the server's limits cut the chunks (SQLite's parameters,
MySQL's max_allowed_packet)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Message,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
    SqlBroker,
    Unique,
    subscriber,
)
from trinbox.errors import DeclarationError, Duplicate, IntegrityError
from trinbox.events import Events, PublishEvent, PublishStart
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import as_utc, cells

TABLE = "many_jobs"


class ManyLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    headers: Annotated[dict[str, str], Headers()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class ManyLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    headers: Annotated[dict[str, str], Headers()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class ManyAdvisory(Inbox[Advisory], table=TABLE, advisory_lock="many-{id}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    headers: Annotated[dict[str, str], Headers()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


MANY: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": ManyLock,
    "lease": ManyLease,
    "advisory": ManyAdvisory,
}


# Ids the publish gives: a second row of one id fails at the database, not before.
class GivenIds(Inbox[Lease], table="many_given"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]


@dataclass
class Job:
    n: int


def _payloads(case: Case) -> list[tuple[int, int]]:
    """(id, n) of every row, by id."""
    rows = case.stand.rows(f"SELECT id, payload FROM {TABLE} ORDER BY id")
    return [(int(i), json.loads(bytes(p))["n"]) for i, p in rows]


def _json(value: object) -> object:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _app(broker: SqlBroker[Any], *rows: type[Inbox[Any, Any]]) -> Any:
    app = make_app()
    app.add_broker(broker)

    @app.on_startup
    async def create() -> None:
        for row in rows:
            await broker.create_tables(row)

    return app


async def test_ids_come_back_in_the_order_given_across_chunks(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker()
    later = timedelta(hours=2)
    items: list[object] = [Job(n) for n in range(7)]
    items[2] = Message(Job(2), delay=later, headers={"h": "two"})
    items[5] = Message(Job(5), queue="other", headers={"shared": "mine"})
    async with serving(_app(broker, row)):
        before = broker.clock()
        found = await broker.publish_many(
            row, items, queue="jobs", headers={"shared": "yes"}, chunk=3
        )
        # One more batch: ids keep rising, in order, after a batch of one chunk.
        more = await broker.publish_many(row, [Job(7), Job(8)], queue="jobs")
    ids = [p.id for p in found + more]
    assert all(isinstance(i, int) for i in ids)
    assert not any(p.duplicate for p in found + more)
    assert [p.key for p in found] == [None] * 7
    assert _payloads(case) == list(zip(ids, range(9), strict=True))
    rows = case.stand.rows(f"SELECT id, queue, headers, retry_after FROM {TABLE} ORDER BY id")
    by_n = dict(enumerate(rows))
    assert [r[1] for r in rows] == ["jobs"] * 5 + ["other"] + ["jobs"] * 3
    assert _json(by_n[0][2]) == {"shared": "yes"}
    assert _json(by_n[2][2]) == {"h": "two", "shared": "yes"}
    assert _json(by_n[5][2]) == {"shared": "mine"}
    assert by_n[7][2] is None
    due = {n: as_utc(r[3]) for n, r in by_n.items()}
    assert due[2] - before >= later - timedelta(seconds=1)
    assert all(due[n] - before < timedelta(minutes=5) for n in due if n != 2)


async def test_duplicates_under_unique_return_the_holder(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker()
    async with serving(_app(broker, row)):
        first = await broker.publish(row, Job(0), queue="jobs", unique="a")
        found = await broker.publish_many(
            row,
            [
                Message(Job(1), unique="a"),  # held before the batch
                Message(Job(2), unique="b"),
                Message(Job(3), unique="b"),  # held by the row just before it
                Job(4),
                Message(Job(5), unique="c"),
                Message(Job(6), unique="a"),
            ],
            queue="jobs",
            chunk=2,
        )
        with pytest.raises(Duplicate) as raised:
            await broker.publish_many(
                row,
                [Message(Job(7), unique="d"), Job(8), Message(Job(9), unique="c")],
                queue="jobs",
                chunk=2,
                on_duplicate="raise",
            )
    got = [(p.duplicate, p.key) for p in found]
    assert got == [
        (True, "a"),
        (False, "b"),
        (True, "b"),
        (False, None),
        (False, "c"),
        (True, "a"),
    ]
    assert found[0].id == found[5].id == first.id
    assert found[2].id == found[1].id
    assert (raised.value.id, raised.value.key) == (found[4].id, "c")
    # The refused batch wrote nothing: not the keyless row, not the key of its first chunk.
    written = [first.id, found[1].id, found[3].id, found[4].id]
    assert _payloads(case) == list(zip(written, [0, 2, 4, 5], strict=True))


async def test_a_failure_anywhere_leaves_none_of_the_batch(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker()
    async with serving(_app(broker, row, GivenIds)):
        await broker.publish(row, Job(0), queue="jobs", unique="held")
        # In a transaction of the caller's: its third chunk finds a held key.
        with pytest.raises(Duplicate):
            async with broker.transaction() as tx:
                await tx.publish(row, Job(1), queue="jobs")
                await tx.publish_many(
                    row,
                    [Job(2), Job(3), Job(4), Job(5), Message(Job(6), unique="held")],
                    queue="jobs",
                    chunk=2,
                    on_duplicate="raise",
                )
        # On its own connection: the database refuses a row of the last chunk.
        with pytest.raises(IntegrityError):
            await broker.publish_many(
                GivenIds, [Message(Job(n), id=n) for n in (1, 2, 3, 1)], chunk=2
            )
        # Refused before anything is written: the row's rule names the item.
        with pytest.raises(DeclarationError) as refused:
            await broker.publish_many(row, [Job(7), object()], queue="jobs")
        assert "the batch's item 1 (counting from 0)" in "\n".join(refused.value.__notes__)
        assert await broker.publish_many(row, [], queue="jobs") == []
    assert [n for _, n in _payloads(case)] == [0]
    assert case.stand.value("SELECT COUNT(*) FROM many_given") == 0


async def test_each_group_is_woken_once(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker(poll_interval=3600)
    seen: list[int] = []

    @subscriber(InboxQueue(row, "a"))
    async def a(job: Job) -> None:
        seen.append(job.n)

    @subscriber(InboxQueue(row, "b"))
    async def b(job: Job) -> None:
        seen.append(job.n)

    app = _app(broker, row)
    app.include(broker, a)
    app.include(broker, b)
    async with serving(app):
        broker.wakes.counts.clear()
        items = [Message(Job(n), queue="ab"[n % 2]) for n in range(6)]
        await broker.publish_many(row, items, chunk=2)
        assert broker.wakes.counts == {(TABLE, "a"): 1, (TABLE, "b"): 1}
        async with broker.transaction() as tx:
            await tx.publish_many(row, [Job(6), Job(7)], queue="a", chunk=1)
            await tx.publish_many(row, [Job(8)], queue="a")
            assert broker.wakes.counts[(TABLE, "a")] == 1  # not before the commit
        assert broker.wakes.counts == {(TABLE, "a"): 2, (TABLE, "b"): 1}
        # An hour's poll: only the wakes hand the rows over.
        with trio.fail_after(10):
            await settled(app, a, 6)
            await settled(app, b, 3)
    assert sorted(seen) == list(range(9))


@cells(stands=("sqlite",), forms=("lease",))
async def test_sqlite_cuts_chunks_at_the_librarys_parameters(case: Case) -> None:
    import sqlite3

    row = MANY[case.form]
    broker = case.stand.broker()
    limit = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    count = limit // 6 + 10  # past the limit in one statement: 7 parameters a row
    async with serving(_app(broker, row)):
        found = await broker.publish_many(
            row, [Job(n) for n in range(count)], queue="jobs", chunk=10 * count
        )
    assert [p.id for p in found] == list(range(1, count + 1))
    assert case.stand.value(f"SELECT COUNT(*) FROM {TABLE}") == count


@cells(stands=("mariadb",), forms=("lease",))
async def test_mysql_cuts_chunks_at_max_allowed_packet(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker()
    packet = int(case.stand.value("SELECT @@max_allowed_packet"))
    size = packet // 8  # nine rows are past the packet in one statement (escaped, more)
    async with serving(_app(broker, row)):
        found = await broker.publish_many(
            row, [Message(b"x" * size, queue="jobs") for _ in range(9)], chunk=100
        )
    assert [p.id for p in found] == list(range(1, 10))
    assert case.stand.value(f"SELECT COUNT(*) FROM {TABLE} WHERE LENGTH(payload) > 0") == 9


class _Seen(Events):
    """A hook that gives every publish a header and keeps what it is told."""

    def __init__(self) -> None:
        self.starts: list[PublishStart] = []
        self.ends: list[PublishEvent] = []

    def publishing(self, event: PublishStart) -> Mapping[str, str] | None:
        self.starts.append(event)
        return {"trace": "t1", "shared": "hook's"}

    def published(self, event: PublishEvent) -> None:
        self.ends.append(event)


async def test_event_hooks_see_one_publish_of_the_batchs_rows(case: Case) -> None:
    row = MANY[case.form]
    broker = case.stand.broker()
    seen = _Seen()
    app = _app(broker, row)
    app.add_events(seen)
    async with serving(app):
        items = [Job(0), Message(Job(1), headers={"trace": "own"})]
        await broker.publish_many(row, items, queue="jobs", headers={"shared": "call's"})
        await broker.publish_many(row, [Message(Job(2), queue="x"), Job(3)], queue="jobs")
    assert [(e.rows, e.group, e.transactional) for e in seen.starts] == [
        (2, "jobs", False),
        (2, None, False),
    ]
    assert [(e.rows, e.group, e.error) for e in seen.ends] == [(2, "jobs", None), (2, None, None)]
    found = [_json(h) for (h,) in case.stand.rows(f"SELECT headers FROM {TABLE} ORDER BY id")]
    assert found[:2] == [
        {"trace": "t1", "shared": "call's"},
        {"trace": "own", "shared": "call's"},
    ]
