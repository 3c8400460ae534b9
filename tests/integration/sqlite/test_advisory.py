"""The advisory form on SQLite (REFERENCE.md §3.4, §10.2 forms/advisory/*, seed 000): the
process keeps the keys in work per database file, and a subscription has one delivery in work
at a time."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
    Closed,
    FailurePolicy,
    Group,
    HandlerFailed,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    OnFailure,
    Payload,
    RetryAfter,
    SchemaError,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._drivers._base import Connection, Pool, Record
from trinbox._forms._base import Ack, FormContext
from trinbox._forms.advisory import AdvisoryForm, KeyRegistry
from trinbox.testing import TrioClock, VirtualClock

from .harness import Db, make_app, serving
from .tables import EMAIL_JOBS, LockedEmail, ticking


@dataclass
class Email:
    to: str


def keys_in_work(db: Db) -> set[str]:
    """The keys the process registry holds for ``db``'s file."""
    return set(KeyRegistry.keys("sqlite:" + os.path.realpath(db.path)))


class Work:
    """What a handler saw: the order of its messages and how many were in work at once."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.in_work = 0
        self.most = 0
        self.started: list[float] = []
        self.ended: list[float] = []

    async def run(self, email: Email, seconds: float) -> None:
        self.order.append(email.to)
        self.started.append(trio.current_time())
        self.in_work += 1
        self.most = max(self.most, self.in_work)
        try:
            await trio.sleep(seconds)
        finally:
            self.in_work -= 1
            self.ended.append(trio.current_time())


async def serve_customers(db: Db, customers: Sequence[str], *, workers: int) -> Work:
    """Publish one row per customer (in order), serve them with ``workers`` workers and a
    handler that works one second each, and return what the handler saw."""
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.5)
    work = Work()

    @subscriber(InboxQueue(LockedEmail, "emails").workers(workers))
    async def send(email: Email) -> None:
        await work.run(email, 1.0)

    app = make_app()
    app.include(broker, send)
    async with ticking(), serving(app):
        for n, customer in enumerate(customers):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(len(customers))
    return work


# -- keys ------------------------------------------------------------------------------------


async def test_ack_frees_its_key(db: Db, clock: VirtualClock) -> None:
    # Two rows of one customer share a key: one after the other, never together.
    work = await serve_customers(db, ["c1", "c1"], workers=2)
    assert work.order == ["0@x", "1@x"]
    assert work.most == 1
    assert work.started[1] >= work.ended[0]
    assert keys_in_work(db) == set()
    assert db.rows("SELECT * FROM email_jobs") == []


async def test_rows_with_different_keys_are_each_delivered(db: Db, clock: VirtualClock) -> None:
    work = await serve_customers(db, ["c1", "c2"], workers=1)
    assert work.order == ["0@x", "1@x"]
    assert keys_in_work(db) == set()
    assert db.rows("SELECT * FROM email_jobs") == []


async def test_one_delivery_in_work_at_a_time_even_with_workers(
    db: Db, clock: VirtualClock
) -> None:
    # Different keys and three workers: SQLite's claim reads the first due row alone, and
    # takes nothing while it is in work; each next row waits up to a poll interval (0.5 s).
    work = await serve_customers(db, ["c1", "c2", "c3"], workers=3)
    assert work.order == ["0@x", "1@x", "2@x"]
    assert work.most == 1
    for before, after in zip(work.ended, work.started[1:], strict=False):
        assert before <= after
    assert keys_in_work(db) == set()


async def test_the_registry_keeps_keys_per_database_file(db: Db, tmp_path: Path) -> None:
    other = Db(tmp_path / "other.db")
    db.script(EMAIL_JOBS)
    other.script(EMAIL_JOBS)
    here, there = db.broker(), other.broker()
    both_in_work = [trio.Event(), trio.Event()]

    # Each handler holds its key ("email_jobs-c1" in both files) until the other one runs.
    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send_here(email: Email) -> None:
        both_in_work[0].set()
        await both_in_work[1].wait()

    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send_there(email: Email) -> None:
        both_in_work[1].set()
        await both_in_work[0].wait()

    app = make_app()
    app.include(here, send_here)
    app.include(there, send_there)
    async with serving(app):
        await here.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        await there.publish(LockedEmail, Email("b@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send_here).wait_finished(1)
            await app.subscription(send_there).wait_finished(1)
    assert db.rows("SELECT * FROM email_jobs") == []
    assert other.rows("SELECT * FROM email_jobs") == []
    assert keys_in_work(db) == keys_in_work(other) == set()


async def test_two_brokers_on_one_file_pass_over_each_others_key(
    db: Db, tmp_path: Path, clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    # The second broker names the same file another way; the registry knows it is one file.
    (tmp_path / "sub").mkdir()
    first = db.broker(poll_interval=0.25)
    second = SqlBroker.sqlite(
        f"sqlite:///{tmp_path}/sub/../{db.path.name}", poll_interval=0.25, clock=TrioClock()
    )
    in_work = trio.Event()
    finish = trio.Event()
    seen: list[str] = []

    @subscriber(InboxQueue(LockedEmail, "a"))
    async def send_a(email: Email) -> None:
        seen.append(email.to)
        in_work.set()
        await finish.wait()

    # Group b's row has the same key (customer c1) as group a's.
    @subscriber(InboxQueue(LockedEmail, "b"))
    async def send_b(email: Email) -> None:
        seen.append(email.to)

    app = make_app()
    app.include(first, send_a)
    app.include(second, send_b)
    async with ticking(), serving(app):
        await first.publish(LockedEmail, Email("a@x"), name="a", customer="c1")
        with trio.fail_after(60):
            await in_work.wait()
        await second.publish(LockedEmail, Email("b@x"), name="b", customer="c1")
        # Eight claims of group b pass over its row while group a's holds the key.
        await trio.sleep(2)
        assert seen == ["a@x"]
        assert db.rows("SELECT name, attempt FROM email_jobs ORDER BY job_id") == [
            ("a", 2),
            ("b", 1),
        ]
        finish.set()
        with trio.fail_after(60):
            await app.subscription(send_b).wait_finished(1)
    assert seen == ["a@x", "b@x"]
    assert db.rows("SELECT * FROM email_jobs") == []
    assert keys_in_work(db) == set()


# -- retry -----------------------------------------------------------------------------------


async def test_retry_returns_the_row_at_once_with_its_attempt_counted(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    in_work = trio.Event()
    finish = trio.Event()
    attempts: list[int] = []

    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        in_work.set()
        await finish.wait()
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await in_work.wait()
        # The take counted the attempt and committed; the key is held in the process.
        assert db.rows("SELECT attempt FROM email_jobs") == [(2,)]
        assert keys_in_work(db) == {"email_jobs-c1"}
        app.shutdown()
        finish.set()
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    # The retry ran no statement: the attempt stays counted once, and the key is free.
    assert app.report is not None
    assert app.report.locks_released == 0
    assert db.rows("SELECT attempt FROM email_jobs") == [(2,)]
    assert keys_in_work(db) == set()
    assert attempts == [1]

    # A new app on the file takes the row at its first claim.
    again = await take_one(db)
    assert again == [2]
    assert db.rows("SELECT * FROM email_jobs") == []


async def take_one(db: Db) -> list[int]:
    """Serve ``db`` with a fresh app whose poll interval is an hour, ack the first row it
    takes, and return the attempts the handler saw."""
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    return attempts


# -- shutdown and cancellation -------------------------------------------------------------------


async def test_shutdown_releases_the_key_of_a_handler_in_work(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    in_work = trio.Event()
    never = trio.Event()

    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send(email: Email) -> None:
        in_work.set()
        await never.wait()

    app = make_app(grace=0)
    app.include(broker, send)
    async with serving(app):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await in_work.wait()
        assert keys_in_work(db) == {"email_jobs-c1"}
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (1, 0)
    assert keys_in_work(db) == set()
    # The row is back, its attempt counted, and a new app takes it at once.
    assert db.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]
    assert await take_one(db) == [2]
    assert db.rows("SELECT * FROM email_jobs") == []


async def test_a_handler_that_raises_leaves_no_key(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    # The default policy retries: the row returns at once with its attempt counted.
    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        if attempt == 1:
            raise RuntimeError("smtp down")

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(2)
    assert attempts == [1, 2]
    assert keys_in_work(db) == set()
    assert db.rows("SELECT * FROM email_jobs") == []


async def test_a_fail_fast_handler_leaves_no_key(db: Db) -> None:
    db.script(EMAIL_JOBS)
    publisher = db.broker()
    await publisher.open()
    try:
        await publisher.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
    finally:
        await publisher.aclose()
    broker = db.broker(poll_interval=3600)

    queue = InboxQueue(LockedEmail, "emails").on_failure(OnFailure(handler=FailurePolicy.FAIL_FAST))

    @subscriber(queue)
    async def send(email: Email) -> None:
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, send)
    failed = r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$"
    with trio.fail_after(10), pytest.raises(HandlerFailed, match=failed):
        await app.serve()
    # The dropped delivery let its key go before the shutdown: nothing left to release.
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (0, 0)
    assert keys_in_work(db) == set()
    assert db.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]
    assert await take_one(db) == [2]


async def test_a_settlement_after_shutdown_released_its_key_is_closed(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    try:
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        spec = spec_of(LockedEmail)
        form = AdvisoryForm(
            FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=broker.dialect.statements(spec),
                pool=broker.pool,
                clock=broker.clock,
                group="emails",
            )
        )
        (delivery,) = await form.claim(1)
        assert keys_in_work(db) == {"email_jobs-c1"}
        assert await form.shutdown() == (1, 0)
        assert keys_in_work(db) == set()
        closed = (
            r"^email_jobs \(LockedEmail\): shutdown released the key of row 1 and its row is "
            r"back in the queue; the settlement had no effect$"
        )
        with pytest.raises(Closed, match=closed):
            await form.settle(delivery, Ack())
        assert form.in_work == 0
    finally:
        await broker.aclose()
    assert db.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]


class GatedConnection:
    """A connection whose ``gate.at``-th take waits for ever (until cancelled)."""

    def __init__(self, inner: Connection, gate: Gate) -> None:
        self.inner = inner
        self._gate = gate

    @property
    def in_transaction(self) -> bool:
        return self.inner.in_transaction

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return await self.inner.execute(sql, params)

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        if sql.startswith("UPDATE"):
            await self._gate.take()
        return await self.inner.fetch(sql, params)

    async def begin(self, sql: str) -> None:
        await self.inner.begin(sql)

    async def commit(self) -> None:
        await self.inner.commit()

    async def rollback(self) -> None:
        await self.inner.rollback()

    async def prepare(self, sql: str) -> None:
        await self.inner.prepare(sql)


class Gate:
    def __init__(self, at: int) -> None:
        self.at = at
        self.takes = 0
        self.reached = trio.Event()

    async def take(self) -> None:
        self.takes += 1
        if self.takes == self.at:
            self.reached.set()
            await trio.sleep_forever()


class GatedPool:
    """The broker's pool, lending gated connections."""

    def __init__(self, inner: Pool, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate

    @property
    def max_size(self) -> int:
        return self.inner.max_size

    @property
    def identity(self) -> str:
        return self.inner.identity

    async def acquire(self) -> Connection:
        return GatedConnection(await self.inner.acquire(), self.gate)

    async def try_acquire(self) -> Connection | None:
        conn = await self.inner.try_acquire()
        return None if conn is None else GatedConnection(conn, self.gate)

    async def release(self, conn: Connection) -> None:
        assert isinstance(conn, GatedConnection)
        await self.inner.release(conn.inner)

    async def discard(self, conn: Connection) -> None:
        assert isinstance(conn, GatedConnection)
        await self.inner.discard(conn.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_claim_cancelled_midway_leaves_no_key(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    try:
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        await broker.publish(LockedEmail, Email("b@x"), name="emails", customer="c2")
        spec = spec_of(LockedEmail)
        gate = Gate(at=2)
        ctx = FormContext(
            spec=spec,
            dialect=broker.dialect,
            statements=broker.dialect.statements(spec),
            pool=GatedPool(broker.pool, gate),
            clock=broker.clock,
            group="emails",
        )
        form = AdvisoryForm(ctx)
        claimed: list[object] = []
        async with trio.open_nursery() as nursery:

            async def claim() -> None:
                claimed.append(await form.claim(2))

            nursery.start_soon(claim)
            with trio.fail_after(10):
                await gate.reached.wait()
            # Midway: the first row is taken, the second key registered, its take waiting.
            assert keys_in_work(db) == {"email_jobs-c1", "email_jobs-c2"}
            nursery.cancel_scope.cancel()
        assert claimed == []
        assert keys_in_work(db) == set()
        assert form.in_work == 0
        # The first take counted its attempt; both rows are claimable again.
        assert db.rows("SELECT attempt FROM email_jobs ORDER BY job_id") == [(2,), (1,)]
        again = AdvisoryForm(ctx)
        taken = await again.claim(2)
        assert [(d.id, d.attempt, d.key) for d in taken] == [
            (1, 2, "email_jobs-c1"),
            (2, 1, "email_jobs-c2"),
        ]
        for delivery in taken:
            await again.settle(delivery, Ack())
        assert keys_in_work(db) == set()
    finally:
        await broker.aclose()
    assert db.rows("SELECT * FROM email_jobs") == []


# -- schema ------------------------------------------------------------------------------------


class RegionEmail(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{region}"):
    """A key on a field whose column the table lacks."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    region: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


async def test_a_key_naming_a_missing_column_stops_serve(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()

    @subscriber(InboxQueue(RegionEmail, "emails"))
    async def send(email: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, send)
    candidates = broker.dialect.statements(spec_of(RegionEmail)).claim[0]
    assert candidates.event == "candidates"
    expected = (
        f"subscription 'emails' ({send!r}): every statement of a subscription prepares "
        f"against the database, found candidates failing on email_jobs (RegionEmail): no such "
        f"column: region (while running: {candidates.sql}); create the table and columns it "
        f"names"
    )
    with (
        trio.fail_after(10),
        pytest.raises(SchemaError, match=f"^{re.escape(expected)}$") as caught,
    ):
        await app.serve()
    assert caught.value.table == "email_jobs"
    assert caught.value.statement == candidates.sql
    assert "`region`" in candidates.sql
    assert keys_in_work(db) == set()
