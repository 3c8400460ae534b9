"""The advisory lock form on every stand (docs/reference.md#advisory-form,
docs/reference.md#scenarios-advisory): each row is held by a lock on its key; on PostgreSQL and
MariaDB the lock lives in the session a delivery keeps, with no transaction open, and goes when the
delivery settles, drops, or the broker shuts down; on SQLite the process keeps the keys in work."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import pytest
import trio

from trinbox import (
    Advisory,
    App,
    Attempt,
    FailurePolicy,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    OnFailure,
    Payload,
    RetryAfter,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._drivers._base import Connection, Op, Pool, Record, Result, stops
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, FormContext
from trinbox._holders.sqlite_key import KeyRegistry
from trinbox.errors import Closed, HandlerFailed, SchemaError
from trinbox.testing import VirtualClock, idle, settled

from ..serving import make_app, serving
from ..stands import (
    SERVER_STANDS,
    STANDS,
    MariaStand,
    PostgresStand,
    SqliteStand,
    Stand,
    fresh_stand,
)
from .conftest import Case
from .kit import ClaimWatch
from .schema import EMAIL_JOBS, LockedEmail, LockedPlain


def _cells(stands: Sequence[str]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "case",
        [(stand, "advisory") for stand in stands],
        ids=[f"{stand}-advisory" for stand in stands],
        indirect=True,
    )


# The advisory form on every stand, and on the servers whose sessions hold the locks.
ADVISORY = _cells(STANDS)
ON_SERVERS = _cells(SERVER_STANDS)
ON_MARIADB = _cells(["mariadb"])


@dataclass
class Email:
    to: str


# -- what the database shows ---------------------------------------------------------------------


def _database(stand: Stand) -> str:
    return urlsplit(stand.url).path.lstrip("/")


def lock_name(stand: Stand, key: str) -> str:
    """MariaDB's GET_LOCK name of a key: the database, a dot and the key, or the SHA-256 of
    that past 64 characters."""
    name = f"{_database(stand).lower()}.{key}"
    return name if 1 <= len(name) <= 64 else hashlib.sha256(name.encode()).hexdigest()


_PG_LOCK = (
    "FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(?, 0)"
)


def holder(stand: Stand, key: str) -> int | None:
    """The server session holding ``key``'s lock (PostgreSQL pid, MariaDB connection id); on
    SQLite 0 while the process keeps the key in work."""
    if isinstance(stand, SqliteStand):
        return 0 if key in KeyRegistry.keys("sqlite:" + os.path.realpath(stand.path)) else None
    if isinstance(stand, PostgresStand):
        found = stand.value(f"SELECT l.pid {_PG_LOCK}", key)
    else:
        found = stand.value("SELECT IS_USED_LOCK(?)", lock_name(stand, key))
    return None if found is None else int(found)


def held(stand: Stand, *keys: str) -> set[str]:
    """Which of ``keys`` a session (or the SQLite process) holds."""
    return {key for key in keys if holder(stand, key) is not None}


def advisory_locks(stand: PostgresStand) -> int:
    """Every advisory lock of the stand's database, whatever its key."""
    return int(
        stand.value(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    )


def session_alive(stand: Stand, session: int) -> bool:
    if isinstance(stand, PostgresStand):
        return bool(stand.value("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", session))
    return bool(
        stand.value("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", session)
    )


async def session_ends(stand: Stand, session: int) -> None:
    """Wait until the server has ended ``session`` (a closed connection's backend exits a
    moment after the close)."""
    with trio.fail_after(5):
        while session_alive(stand, session):  # noqa: ASYNC110 - the server has no event to await
            await trio.sleep(0.02)


# -- serving helpers ---------------------------------------------------------------------------


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


async def serve_customers(case: Case, customers: Sequence[str], *, workers: int) -> Work:
    """Publish one row per customer (in order), serve them with ``workers`` workers and a
    handler that works one second each, and return what the handler saw."""
    broker = case.stand.broker(poll_interval=0.5)
    work = Work()

    @subscriber(InboxQueue(LockedEmail, "emails").workers(workers))
    async def send(email: Email) -> None:
        await work.run(email, 1.0)

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n, customer in enumerate(customers):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)

    async with serving(app):
        with trio.fail_after(60):
            await settled(app, send, len(customers))
    return work


async def take_one(stand: Stand, row: type[Inbox[Any, Any]] = LockedEmail) -> list[int]:
    """Serve ``stand`` with a fresh app whose poll interval is an hour, ack the first row it
    takes (its first claim, at once), and return the attempts the handler saw."""
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []
    name = "emails" if row is LockedEmail else "jobs"

    @subscriber(InboxQueue(row, name))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 1)
    return attempts


def insert_plain(stand: Stand, *tenants: str) -> None:
    """Due plain_jobs rows, one per tenant, written by hand (before any broker serves)."""
    for n, tenant in enumerate(tenants):
        stand.execute(
            "INSERT INTO plain_jobs (tenant, payload) VALUES (?, ?)",
            tenant,
            f'{{"to":"{n}@x"}}'.encode(),
        )


@contextmanager
def holding_row(stand: Stand, sql: str) -> Iterator[None]:
    """Hold the rows ``sql`` locks (``FOR UPDATE``) in a transaction of the test's own for
    the block."""
    if isinstance(stand, PostgresStand):
        conn = stand._connect()
        try:
            conn.execute("BEGIN")
            conn.execute(sql)
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    assert isinstance(stand, MariaStand)
    maria = stand._connect()
    try:
        with maria.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute(sql)
            yield
            cur.execute("ROLLBACK")
    finally:
        maria.close()


# -- keys ------------------------------------------------------------------------------------


@ADVISORY
async def test_ack_frees_its_key(case: Case, clock: VirtualClock) -> None:
    # Two rows of one customer share a key: one after the other, never together.
    work = await serve_customers(case, ["c1", "c1"], workers=2)
    assert work.order == ["0@x", "1@x"]
    assert work.most == 1
    assert work.started[1] >= work.ended[0]
    assert held(case.stand, "email_jobs-c1") == set()
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@ADVISORY
async def test_rows_with_different_keys_are_each_delivered(case: Case, clock: VirtualClock) -> None:
    work = await serve_customers(case, ["c1", "c2"], workers=1)
    assert work.order == ["0@x", "1@x"]
    assert held(case.stand, "email_jobs-c1", "email_jobs-c2") == set()
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@ADVISORY
async def test_two_databases_lock_equal_keys_apart(case: Case, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    with fresh_stand(case.name, tmp_path / "other") as other:
        other.script(EMAIL_JOBS[case.name])
        here, there = case.stand.broker(), other.broker()
        both_in_work = [trio.Event(), trio.Event()]

        # Each handler holds its key ("email_jobs-c1" in both databases) until the other one
        # runs: one database's lock would keep the other's row out of work for ever.
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
                await settled(app, send_here, 1)
                await settled(app, send_there, 1)
        assert case.stand.rows("SELECT * FROM email_jobs") == []
        assert other.rows("SELECT * FROM email_jobs") == []
        assert held(case.stand, "email_jobs-c1") == held(other, "email_jobs-c1") == set()


async def pass_over_each_others_key(
    stand: Stand, first: SqlBroker[Any], second: SqlBroker[Any]
) -> None:
    """Two brokers on one database: group b's row shares the key of group a's row in work, so
    b's claims pass over it until a's settles. (tests/integration/sqlite runs it with a second
    broker that names the file another way.)"""
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
    async with serving(app):
        await first.publish(LockedEmail, Email("a@x"), name="a", customer="c1")
        with trio.fail_after(60):
            await in_work.wait()
        await second.publish(LockedEmail, Email("b@x"), name="b", customer="c1")
        # Eight claims of group b pass over its row while group a's holds the key.
        await trio.sleep(2)
        assert seen == ["a@x"]
        assert stand.rows("SELECT name, attempt FROM email_jobs ORDER BY job_id") == [
            ("a", 2),
            ("b", 1),
        ]
        finish.set()
        with trio.fail_after(60):
            await settled(app, send_b, 1)
    assert seen == ["a@x", "b@x"]
    assert stand.rows("SELECT * FROM email_jobs") == []
    assert held(stand, "email_jobs-c1") == set()


@ADVISORY
async def test_two_brokers_on_one_database_pass_over_each_others_key(
    case: Case, clock: VirtualClock
) -> None:
    stand = case.stand
    await pass_over_each_others_key(
        stand, stand.broker(poll_interval=0.25), stand.broker(poll_interval=0.25)
    )


@ADVISORY
async def test_two_brokers_never_share_a_row_nor_hold_one_key_together(
    case: Case, clock: VirtualClock
) -> None:
    tenants = [f"t{n % 4}" for n in range(40)]
    insert_plain(case.stand, *tenants)
    in_work: dict[str, int] = {}
    together: list[str] = []
    delivered: list[str] = []
    all_in = trio.Event()

    def app_on(broker: SqlBroker[Any]) -> tuple[App, Any, list[str]]:
        mine: list[str] = []

        @subscriber(InboxQueue(LockedPlain, "jobs").workers(4))
        async def work(job: Email) -> None:
            tenant = tenants[int(job.to.split("@")[0])]
            if in_work.get(tenant):
                together.append(tenant)
            in_work[tenant] = in_work.get(tenant, 0) + 1
            delivered.append(job.to)
            mine.append(job.to)
            if len(delivered) == len(tenants):
                all_in.set()
            try:
                await trio.sleep(0.05)
            finally:
                in_work[tenant] -= 1

        app = make_app()
        app.include(broker, work)
        return app, work, mine

    apps = [app_on(case.stand.broker(poll_interval=0.05)) for _ in range(2)]
    async with serving(apps[0][0]), serving(apps[1][0]):
        with trio.fail_after(120):
            await all_in.wait()
            for app, work, mine in apps:
                await settled(app, work, len(mine))
    assert together == []
    assert sorted(delivered) == sorted(f"{n}@x" for n in range(40))
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
    assert held(case.stand, "plain_jobs-t0", "plain_jobs-t1", "plain_jobs-t2", "plain_jobs-t3") == (
        set()
    )


# -- in work ---------------------------------------------------------------------------------


@ON_SERVERS
async def test_a_handler_in_work_holds_one_lock_on_its_session_and_no_transaction(
    case: Case,
) -> None:
    stand = case.stand
    insert_plain(stand, "t1")
    broker = stand.broker(poll_interval=3600)
    in_work = trio.Event()
    finish = trio.Event()

    @subscriber(InboxQueue(LockedPlain, "jobs"))
    async def work(job: Email) -> None:
        in_work.set()
        await finish.wait()

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(10):
            await in_work.wait()
        session = holder(stand, "plain_jobs-t1")
        assert session is not None
        if isinstance(stand, PostgresStand):
            # One advisory lock in the database, on a session with no transaction open.
            assert advisory_locks(stand) == 1
            assert stand.rows(
                "SELECT state, xact_start FROM pg_stat_activity WHERE pid = ?", session
            ) == [("idle", None)]
        else:
            assert stand.value("SELECT IS_USED_LOCK(CONCAT(DATABASE(), '.plain_jobs-t1'))") == (
                session
            )
        # The take committed: no transaction holds the row, which another connection locks
        # without waiting.
        assert stand.rows("SELECT id FROM plain_jobs WHERE id = 1 FOR UPDATE NOWAIT") == [(1,)]
        assert stand.rows("SELECT attempt FROM plain_jobs") == [(2,)]
        finish.set()
        with trio.fail_after(10):
            await settled(app, work, 1)
        # The ack freed the key and returned the session to the pool, open.
        assert held(stand, "plain_jobs-t1") == set()
        if isinstance(stand, PostgresStand):
            assert advisory_locks(stand) == 0
        assert session_alive(stand, session)
    assert stand.rows("SELECT * FROM plain_jobs") == []


class LongKeyed(
    Inbox[Advisory],
    table="plain_jobs",
    advisory_lock="a-key-long-enough-to-pass-64-characters-{id}",
):
    """A key whose lock name, past the database's name, comes to 64 characters or more."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


@ON_MARIADB
async def test_a_key_longer_than_64_characters_is_locked_by_its_sha256(case: Case) -> None:
    stand = case.stand
    prefix = "a-key-long-enough-to-pass-64-characters-"
    named = f"{_database(stand).lower()}.{prefix}"
    digits = 64 - len(named)
    short_id, long_id = 10 ** (digits - 1), 10**digits
    exact, longer = f"{named}{short_id}", f"{named}{long_id}"
    assert (len(exact), len(longer)) == (64, 65)
    exact_hash = stand.value("SELECT SHA2(?, 256)", exact)
    longer_hash = stand.value("SELECT SHA2(?, 256)", longer)
    for row_id in (short_id, long_id):
        stand.execute("INSERT INTO plain_jobs (id, payload) VALUES (?, ?)", row_id, b'{"to":"x"}')
    broker = stand.broker(poll_interval=3600)
    both = trio.Event()
    finish = trio.Event()
    started: list[int] = []

    @subscriber(InboxQueue(LongKeyed, "jobs").workers(2))
    async def work(job: Email) -> None:
        started.append(1)
        if len(started) == 2:
            both.set()
        await finish.wait()

    def used(name: object) -> bool:
        return stand.value("SELECT IS_USED_LOCK(?)", name) is not None

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(10):
            await both.wait()
        # A name of 64 characters is the lock's own; a longer one is locked by its hash.
        assert used(exact)
        assert not used(exact_hash)
        assert used(longer_hash)
        assert not used(longer)
        finish.set()
        with trio.fail_after(10):
            await settled(app, work, 2)
        for name in (exact, exact_hash, longer_hash):
            assert not used(name)
    assert stand.rows("SELECT * FROM plain_jobs") == []


# -- retry -----------------------------------------------------------------------------------


@ADVISORY
async def test_retry_returns_the_row_at_once_with_its_attempt_counted(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
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
        # The take counted the attempt and committed; the key is held.
        assert case.stand.rows("SELECT attempt FROM email_jobs") == [(2,)]
        assert held(case.stand, "email_jobs-c1") == {"email_jobs-c1"}
        app.shutdown()
        finish.set()
        with trio.fail_after(10):
            await settled(app, send, 1)
    # The retry ran no statement: the attempt stays counted once, and the key is free.
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (0, 0)
    assert case.stand.rows("SELECT attempt FROM email_jobs") == [(2,)]
    assert held(case.stand, "email_jobs-c1") == set()
    assert attempts == [1]
    # A new app takes the row at its first claim.
    assert await take_one(case.stand) == [2]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@ADVISORY
async def test_a_handler_that_raises_leaves_no_key(
    case: Case,
    clock: VirtualClock,  # the backoff between attempts passes in virtual time
) -> None:
    broker = case.stand.broker(poll_interval=3600)
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
            await settled(app, send, 2)
    assert attempts == [1, 2]
    assert held(case.stand, "email_jobs-c1") == set()
    assert case.stand.rows("SELECT * FROM email_jobs") == []


# -- drops, shutdown and cancellation -------------------------------------------------------------


@ADVISORY
async def test_a_dropped_delivery_closes_its_session_and_its_row_returns_at_once(
    case: Case,
) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    sessions: list[int | None] = []
    ended: list[bool] = []
    queue = InboxQueue(LockedEmail, "emails").on_failure(OnFailure(handler=FailurePolicy.FAIL_FAST))

    @subscriber(queue)
    async def send(email: Email) -> None:
        sessions.append(holder(stand, "email_jobs-c1"))
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")

    @app.on_shutdown
    async def look() -> None:
        # Before the pool closes: the dropped delivery's session was closed, not returned.
        (session,) = sessions
        assert session is not None
        if not isinstance(stand, SqliteStand):
            await session_ends(stand, session)
        ended.append(True)

    failed = r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$"
    with trio.fail_after(10), pytest.raises(HandlerFailed, match=failed):
        await app.serve()
    assert ended == [True]
    # The drop let its key go before the shutdown began: nothing left to release or close.
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (0, 0)
    assert held(stand, "email_jobs-c1") == set()
    assert stand.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]
    # A new broker takes the row at once, its attempt counted by the dropped delivery's take.
    assert await take_one(stand) == [2]


@ADVISORY
async def test_shutdown_releases_the_key_of_a_handler_in_work(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
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
        assert held(case.stand, "email_jobs-c1") == {"email_jobs-c1"}
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (1, 0)
    assert held(case.stand, "email_jobs-c1") == set()
    # The row is back, its attempt counted, and a new app takes it at once.
    assert case.stand.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]
    assert await take_one(case.stand) == [2]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@asynccontextmanager
async def advisory_form(
    stand: Stand, gate: Gate | None = None
) -> AsyncIterator[tuple[SqlBroker[Any], FormContext]]:
    """An open broker on ``stand`` and the context a subscription to group "emails" of
    LockedEmail gives its form; with ``gate``, its pool lends gated connections."""
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            spec = spec_of(LockedEmail)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=build_plan(broker.dialect, spec),
                pool=broker.pool if gate is None else GatedPool(broker.pool, gate),
                clock=broker.clock,
                group="emails",
            )
            yield broker, ctx
        finally:
            await broker.aclose()


@ADVISORY
async def test_a_settlement_after_shutdown_released_its_key_is_closed(case: Case) -> None:
    async with advisory_form(case.stand) as (broker, ctx):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        form = make_form(ctx)
        (delivery,) = await form.claim(1)
        assert held(case.stand, "email_jobs-c1") == {"email_jobs-c1"}
        assert await form.shutdown() == (1, 0)
        assert held(case.stand, "email_jobs-c1") == set()
        closed = (
            r"^email_jobs \(LockedEmail\): shutdown released the key of row 1 and its row is "
            r"back in the queue; the settlement had no effect$"
        )
        with pytest.raises(Closed, match=closed):
            await form.settle(delivery, Ack())
        assert form.in_work == 0
    assert case.stand.rows("SELECT name, attempt FROM email_jobs") == [("emails", 2)]


class GatedConnection:
    """A connection whose ``gate.at``-th take waits for ever (until cancelled); the gate logs
    every statement it runs."""

    def __init__(self, inner: Connection, gate: Gate) -> None:
        self.inner = inner
        self._gate = gate

    @property
    def in_transaction(self) -> bool:
        return self.inner.in_transaction

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        self._gate.log.append((self.inner, sql))
        # MariaDB's take counts the attempt with an UPDATE of its own.
        if sql.startswith("UPDATE"):
            await self._gate.take(self.inner)
        return await self.inner.execute(sql, params)

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        self._gate.log.append((self.inner, sql))
        if sql.startswith("UPDATE"):
            await self._gate.take(self.inner)
        return await self.inner.fetch(sql, params)

    async def begin(self, sql: str) -> None:
        await self.inner.begin(sql)

    async def commit(self) -> None:
        await self.inner.commit()

    async def rollback(self) -> None:
        await self.inner.rollback()

    async def prepare(self, sql: str) -> None:
        await self.inner.prepare(sql)

    async def script(self, ops: Sequence[Op], *, until_empty: bool = False) -> list[Result]:
        """Step by step, so that the gate sees each statement of a script."""
        results: list[Result] = []
        for op in ops:
            result: Result = None
            if op.kind == "fetch":
                result = await self.fetch(op.sql, op.params)
            elif op.kind == "execute":
                result = await self.execute(op.sql, op.params)
            elif op.kind == "begin":
                await self.begin(op.sql)
            else:
                await self.commit()
            results.append(result)
            if until_empty and stops(result):
                break
        return results


class Gate:
    def __init__(self, at: int) -> None:
        self.at = at
        self.takes = 0
        self.reached = trio.Event()
        self.cut: Connection | None = None  # the connection whose take waits
        self.log: list[tuple[Connection, str]] = []  # statements run, and discards

    async def take(self, conn: Connection) -> None:
        self.takes += 1
        if self.takes == self.at:
            self.cut = conn
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
    def spare(self) -> int:
        return self.inner.spare

    @property
    def identity(self) -> str:
        return self.inner.identity

    async def acquire(self, holder: str = "caller") -> Connection:
        return GatedConnection(await self.inner.acquire(holder), self.gate)

    async def try_acquire(self, holder: str = "caller") -> Connection | None:
        conn = await self.inner.try_acquire(holder)
        return None if conn is None else GatedConnection(conn, self.gate)

    async def give_back(self, conn: Connection) -> None:
        assert isinstance(conn, GatedConnection)
        await self.inner.give_back(conn.inner)

    async def close(self, conn: Connection) -> None:
        assert isinstance(conn, GatedConnection)
        self.gate.log.append((conn.inner, "discard"))
        await self.inner.close(conn.inner)

    def abandon(self, conn: Connection) -> None:
        assert isinstance(conn, GatedConnection)
        self.gate.log.append((conn.inner, "abandon"))
        self.inner.abandon(conn.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()


@ON_SERVERS
async def test_a_claim_cancelled_midway_leaves_no_key(case: Case) -> None:
    # Statement by statement, each key on a session of its own. SQLite claims in one call on
    # a connection's thread: tests/integration/sqlite/test_advisory.py cuts that call midway.
    stand = case.stand
    keys_ = ("email_jobs-c1", "email_jobs-c2")
    gate = Gate(at=2)
    async with advisory_form(stand, gate) as (broker, ctx):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        await broker.publish(LockedEmail, Email("b@x"), name="emails", customer="c2")
        form = make_form(ctx)
        claimed: list[object] = []
        async with trio.open_nursery() as nursery:

            async def claim() -> None:
                claimed.append(await form.claim(2))

            nursery.start_soon(claim)
            with trio.fail_after(10):
                await gate.reached.wait()
            # Midway: the first row is taken, the second key locked, its take waiting.
            assert held(stand, *keys_) == set(keys_)
            nursery.cancel_scope.cancel()
        assert claimed == []
        # Every session that held a key let it go before the claim gave up: the one whose
        # take was cut unlocked its key before it closed.
        assert held(stand, *keys_) == set()
        unlock = ctx.statements.unlock
        assert unlock is not None
        ran = [sql for conn, sql in gate.log if conn is gate.cut]
        assert ran[-2:] == [unlock.sql, "discard"]
        assert form.in_work == 0
        # The first take counted its attempt; both rows are claimable again.
        assert stand.rows("SELECT attempt FROM email_jobs ORDER BY job_id") == [(2,), (1,)]
        again = make_form(ctx)
        taken = await again.claim(2)
        # A delivery's key is the lock's name as the database renders it.
        rendered = [
            lock_name(stand, key) if isinstance(stand, MariaStand) else key for key in keys_
        ]
        assert [(d.id, d.attempt, d.key) for d in taken] == [
            (1, 2, rendered[0]),
            (2, 1, rendered[1]),
        ]
        for delivery in taken:
            await again.settle(delivery, Ack())
        assert held(stand, *keys_) == set()
    assert stand.rows("SELECT * FROM email_jobs") == []


@ON_SERVERS
async def test_a_claim_cancelled_by_shutdown_in_its_take_leaves_no_lock(case: Case) -> None:
    stand = case.stand
    insert_plain(stand, "t1")
    broker = stand.broker(poll_interval=3600)

    @subscriber(InboxQueue(LockedPlain, "jobs"))
    async def work(job: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, work)
    # The test holds the row: the claim locks its key, and its take waits on the row.
    with holding_row(stand, "SELECT id FROM plain_jobs WHERE id = 1 FOR UPDATE"):
        async with serving(app):
            with trio.fail_after(10):
                while not held(stand, "plain_jobs-t1"):  # noqa: ASYNC110 - watching the server
                    await trio.sleep(0.02)
            # Shutdown cuts the claim short in its take.
        assert app.report is not None
        assert (app.report.locks_released, app.report.connections_closed) == (0, 1)
        assert held(stand, "plain_jobs-t1") == set()
    # The take never ran: the attempt is uncounted, and the row waits for the next claim.
    assert stand.rows("SELECT attempt FROM plain_jobs") == [(1,)]
    assert await take_one(stand, LockedPlain) == [1]


@ON_SERVERS
async def test_an_unconfirmed_unlock_at_shutdown_closes_the_session(case: Case) -> None:
    stand = case.stand
    insert_plain(stand, "t1")
    broker = stand.broker(poll_interval=3600)
    in_work = trio.Event()
    sessions: list[int] = []
    if isinstance(stand, PostgresStand):
        whoami = "SELECT pg_backend_pid()"
        unlock = "SELECT pg_advisory_unlock(hashtextextended('plain_jobs-t1', 0))"
    else:
        whoami = "SELECT CONNECTION_ID()"
        unlock = "SELECT RELEASE_LOCK(CONCAT(LOWER(DATABASE()), '.plain_jobs-t1'))"

    # The handler's transaction lives on the key's session: through it, the handler lets the
    # key go behind the form's back, so the form's own unlock finds nothing to release.
    @subscriber(InboxQueue(LockedPlain, "jobs").transactional())
    async def work(job: Email, tx: keys.Tx) -> None:
        sessions.append(int(str(await tx.fetchval(whoami))))
        assert await tx.fetchval(unlock) in (True, 1)
        in_work.set()
        await trio.sleep_forever()

    app = make_app(grace=0)
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(10):
            await in_work.wait()
        assert held(stand, "plain_jobs-t1") == set()
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (0, 1)
    (session,) = sessions
    await session_ends(stand, session)
    assert stand.rows("SELECT attempt FROM plain_jobs") == [(2,)]
    assert await take_one(stand, LockedPlain) == [2]


def lock_waits(stand: Stand) -> int:
    """Statements of the stand's database waiting for a row lock."""
    if isinstance(stand, PostgresStand):
        return int(
            stand.value(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
    return int(
        stand.value(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
            "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
            "WHERE p.DB = DATABASE() AND t.trx_state = 'LOCK WAIT'"
        )
    )


@ON_SERVERS
async def test_shutdown_waits_for_a_settlement_in_flight(case: Case) -> None:
    stand = case.stand
    insert_plain(stand, "t1")
    broker = stand.broker(poll_interval=3600)
    in_work = trio.Event()
    go = trio.Event()

    @subscriber(InboxQueue(LockedPlain, "jobs"))
    async def work(job: Email) -> None:
        in_work.set()
        await go.wait()

    app = make_app(grace=0)
    app.include(broker, work)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        with trio.fail_after(10):
            await in_work.wait()
        # The test holds the row: the ack's delete waits on it.
        with holding_row(stand, "SELECT id FROM plain_jobs WHERE id = 1 FOR UPDATE"):
            go.set()
            with trio.fail_after(10):
                # MariaDB refreshes INNODB_TRX only when it was not read for 0.1 s.
                while not lock_waits(stand):  # noqa: ASYNC110 - watching the server
                    await trio.sleep(0.15)
            app.shutdown()
            # Shutdown leaves the session to the settlement, and cannot end before it does.
            await trio.sleep(0.5)
            assert app.report is None
            assert held(stand, "plain_jobs-t1") == {"plain_jobs-t1"}
        # The row let go, the ack deletes it, releases its own lock, and shutdown ends.
    assert app.report is not None
    assert (app.report.locks_released, app.report.connections_closed) == (0, 0)
    assert app.statistics(work).settle_errors == ()
    assert held(stand, "plain_jobs-t1") == set()
    assert stand.rows("SELECT * FROM plain_jobs") == []


# -- sessions ----------------------------------------------------------------------------------


@ON_SERVERS
async def test_a_batch_larger_than_the_pool_shrinks_and_the_pool_keeps_one(case: Case) -> None:
    insert_plain(case.stand, "t1", "t2", "t3", "t4")
    broker = case.stand.broker(poll_interval=0.05, pool_size=2)
    sizes: list[int] = []
    lent: list[object] = []

    @subscriber(InboxQueue(LockedPlain, "jobs").batch(4))
    async def work(jobs: list[Email], pool: keys.Pool) -> None:
        sizes.append(len(jobs))
        # The delivery holds one connection of two; the pool lends the other at once.
        with trio.fail_after(5):
            lent.append(await pool.fetchval("SELECT 1"))

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, work, 4)
    # Each claim took what the pool spared beside the connection it keeps: one row.
    assert sizes == [1, 1, 1, 1]
    assert lent == [1, 1, 1, 1]
    assert case.stand.rows("SELECT * FROM plain_jobs") == []


# -- schema ------------------------------------------------------------------------------------


class RegionEmail(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{region}"):
    """A key on a field whose column the table lacks."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    region: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


@ADVISORY
async def test_a_key_naming_a_missing_column_stops_serve(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(RegionEmail, "emails"))
    async def send(email: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, send)
    candidates = build_plan(broker.dialect, spec_of(RegionEmail)).claim[0]
    assert candidates.event == "candidates"
    # The database's own words for the missing column.
    cause = {
        "sqlite": "no such column: region",
        "postgres": 'UndefinedColumnError: column "region" does not exist',
        "mariadb": "OperationalError: Unknown column 'region' in 'SELECT'",
    }[case.name]
    expected = (
        f"subscription 'emails' ({send!r}): every statement of a subscription prepares "
        f"against the database, found candidates failing on email_jobs (RegionEmail): {cause} "
        f"(while running: {candidates.sql}); add the column it names, or name the field's "
        f"column with Column(..)"
    )
    with (
        trio.fail_after(10),
        pytest.raises(SchemaError, match=f"^{re.escape(expected)}$") as caught,
    ):
        await app.serve()
    assert caught.value.table == "email_jobs"
    assert caught.value.statement == candidates.sql
    assert held(case.stand, "email_jobs-") == set()


# -- the settling worker's next claim ------------------------------------------------------------


@ON_SERVERS
async def test_a_settling_worker_unlocks_and_reads_its_next_candidates_in_one_round_trip(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = case.stand.broker(poll_interval=3600)
    watch = ClaimWatch(monkeypatch)
    handled: list[tuple[str, set[str]]] = []
    keys = [f"email_jobs-c{n}" for n in range(5)]

    @subscriber(InboxQueue(LockedEmail, "emails"))
    async def send(email: Email) -> None:
        # The row's key is locked, and no other.
        handled.append((email.to, held(case.stand, *keys)))

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n in range(5):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=f"c{n}")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 5)
            await idle(app, send)
        assert held(case.stand, *keys) == set()
    # The claim loop claimed the first row; each settlement unlocked its key and read the next
    # candidates on the same session, which then locked the next row.
    assert handled == [(f"{n}@x", {f"email_jobs-c{n}"}) for n in range(5)]
    assert watch.count == 1
    assert case.stand.rows("SELECT * FROM email_jobs") == []
