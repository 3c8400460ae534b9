"""The lease keeper's schedule (issue 17, items 2 and 3): rounds by deadline, one every third of
the lease counted from the start of the last, so a round that waited does not push the next
ones back; a round that fails, a database error or any other exception, is logged and tried
again within a second, so two failed rounds in a row lose no lease."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import trio

from trinbox import InboxQueue, SqlBroker, keys, subscriber
from trinbox._bounds import EXTEND_ERROR_WAIT
from trinbox.errors import DatabaseError
from trinbox.events import Events, LeaseEvent
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import MariaStand, PostgresStand, SqliteStand, Stand
from .conftest import Case
from .kit import cells

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Job:
    n: int


class Rounds(Events):
    """When the keeper moved a lease (the event hook, called in its round) and when a round
    failed (its warning), in Trio's time."""

    def __init__(self) -> None:
        self.extended: list[float] = []
        self.failed: list[float] = []
        self.errors: list[BaseException | None] = []
        self.failure = trio.Event()

    def lease_extended(self, event: LeaseEvent) -> None:
        assert event.extended
        self.extended.append(trio.current_time())

    @contextmanager
    def watching_failures(self) -> Iterator[None]:
        rounds = self

        class Failed(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage().startswith("a lease extension round failed"):
                    rounds.failed.append(trio.current_time())
                    rounds.errors.append(record.exc_info[1] if record.exc_info else None)
                    rounds.failure.set()

        handler = Failed(logging.WARNING)
        log = logging.getLogger("trinbox.settle")
        log.addHandler(handler)
        try:
            yield
        finally:
            log.removeHandler(handler)


def broker_on(stand: Stand, clock: Any, **options: Any) -> SqlBroker[Any]:
    if stand.name == "sqlite":
        return SqlBroker.sqlite(stand.url, clock=clock, **options)
    if stand.name == "postgres":
        return SqlBroker.postgres(stand.url, clock=clock, **options)
    return SqlBroker.mysql(stand.url, clock=clock, **options)


class KeeperFails:
    """A broker clock (Trio's clock from 2030) that raises in the lease keeper's next
    ``times`` rounds: a hostile clock, the keeper's one call that is not a database's."""

    def __init__(self, times: int) -> None:
        self.times = times

    def __call__(self) -> datetime:
        if self.times and trio.lowlevel.current_task().name.endswith("LeaseForm.keep"):
            self.times -= 1
            raise RuntimeError("the clock failed")
        return T0 + timedelta(seconds=trio.current_time())


# -- rounds by deadline --------------------------------------------------------------------------


@cells(forms=["lease"])
async def test_rounds_come_every_third_of_the_lease_from_the_start_of_the_last(
    case: Case, clock: VirtualClock
) -> None:
    # A lease of 3 s: a round every second. The first one waits 0.4 s for a connection
    # (the test holds both of the pool's); the next ones still come at 2 s and 3 s.
    broker = broker_on(case.stand, KeeperFails(0), lease=3, pool_size=2, poll_interval=3600)
    rounds = Rounds()
    in_work = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        in_work.set()
        await trio.sleep(3.5)

    app = make_app()
    app.add_events(rounds)
    app.include(broker, handle)
    async with serving(app):
        start = trio.current_time()
        await broker.publish(case.email, Job(1), name="emails", customer="c")
        with trio.fail_after(1):
            await in_work.wait()
        async with broker.database.connection(), broker.database.connection():
            await trio.sleep_until(start + 1.4)
        with trio.fail_after(10):
            await settled(app, handle, 1)
        assert app.statistics(handle).settle_errors == ()
    assert [round(t - start, 6) for t in rounds.extended] == [1.4, 2.0, 3.0]


# -- failed rounds -------------------------------------------------------------------------------


@cells(forms=["lease"])
async def test_a_round_that_raises_any_exception_is_logged_and_tried_again_within_a_second(
    case: Case, clock: VirtualClock
) -> None:
    # A lease of 6 s: rounds at 2 s and then every 2 s. The keeper's first two rounds fail (a
    # RuntimeError, not a database error); it tries again at 3 s and 4 s, and the handler,
    # at work for 7 s, never loses its lease: the second worker, which claims every half
    # second, never takes the row.
    broker = broker_on(case.stand, KeeperFails(2), lease=6, poll_interval=0.5)
    rounds = Rounds()
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").workers(2))
    async def handle(job: Job, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        await trio.sleep(7)

    app = make_app()
    app.add_events(rounds)
    app.include(broker, handle)
    with rounds.watching_failures():
        async with serving(app):
            start = trio.current_time()
            await broker.publish(case.email, Job(1), name="emails", customer="c")
            with trio.fail_after(20):
                await settled(app, handle, 1)
            stats = app.statistics(handle)
    assert attempts == [1]
    assert (stats.acked, stats.settle_errors, stats.leases_lost) == (1, (), 0)
    assert [round(t - start, 6) for t in rounds.failed] == [2.0, 3.0]
    assert [repr(e) for e in rounds.errors] == ["RuntimeError('the clock failed')"] * 2
    # Tried again a second after each failure; then every two seconds from that round.
    assert EXTEND_ERROR_WAIT == 1
    assert [round(t - start, 6) for t in rounds.extended] == [4.0, 6.0]
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0


def kill_the_session_waiting_on_a_lock(stand: Stand) -> None:
    """End, from the server's side, the session of the stand's database that waits for a row
    lock (the keeper's round): polls the server, which the app's statement waits on, for up
    to ten seconds of real time."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if isinstance(stand, PostgresStand):
            found = stand.rows(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
            if found:
                assert stand.value("SELECT pg_terminate_backend(?, 5000)", found[0][0])
                return
        else:
            # MariaDB may wait for the lock while it plans the statement (state
            # "Statistics"), before its transaction shows as waiting: find the statement.
            found = stand.rows(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
                "AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE '%FOR UPDATE'"
            )
            if found:
                stand.execute(f"KILL CONNECTION {int(found[0][0])}")
                return
        time.sleep(0.02)
    raise AssertionError("no session of the app waited on the row lock")


@contextmanager
def row_locked(stand: Stand) -> Iterator[None]:
    """Hold the lock of every row of email_jobs (SQLite: the database's write lock) from
    another connection, for the block."""
    if isinstance(stand, SqliteStand):
        lite = sqlite3.connect(stand.path, isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")
            yield
        finally:
            lite.close()  # rolls back
        return
    if isinstance(stand, MariaStand):
        maria = stand._connect()  # autocommit: the transaction is begun by hand
        try:
            with maria.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT job_id FROM email_jobs FOR UPDATE")
            yield
        finally:
            maria.close()  # rolls back
        return
    assert isinstance(stand, PostgresStand)
    with stand._connect() as pg:  # autocommit: the transaction is begun by hand
        pg.execute("BEGIN")
        pg.execute("SELECT job_id FROM email_jobs FOR UPDATE")
        yield
        pg.execute("ROLLBACK")


@cells(forms=["lease"])
async def test_a_round_the_database_fails_is_tried_again_within_a_second(
    case: Case, clock: VirtualClock
) -> None:
    # The first round (at 2 s, a lease of 6 s) waits on a row lock another connection holds,
    # and fails: its session is killed from the server's side (SQLite: the write lock is
    # held past the busy timeout). The lock let go, the round is tried again a second later.
    broker = broker_on(case.stand, KeeperFails(0), lease=6, poll_interval=3600)
    rounds = Rounds()
    in_work = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        in_work.set()
        await trio.sleep(4.5)

    app = make_app()
    app.add_events(rounds)
    app.include(broker, handle)
    with rounds.watching_failures():
        async with serving(app):
            start = trio.current_time()
            await broker.publish(case.email, Job(1), name="emails", customer="c")
            with trio.fail_after(1):
                await in_work.wait()
            with row_locked(case.stand):
                if case.name == "sqlite":
                    with trio.fail_after(3):  # virtual time: the round comes at 2 s
                        await rounds.failure.wait()
                else:
                    # Runs while the round waits on the lock (virtual time stands still
                    # while a database call is in flight).
                    await trio.to_thread.run_sync(kill_the_session_waiting_on_a_lock, case.stand)
                    with trio.fail_after(3):
                        await rounds.failure.wait()
            with trio.fail_after(10):
                await settled(app, handle, 1)
            stats = app.statistics(handle)
    assert (stats.acked, stats.settle_errors, stats.leases_lost) == (1, (), 0)
    assert [round(t - start, 6) for t in rounds.failed] == [2.0]
    assert all(isinstance(e, DatabaseError) for e in rounds.errors), rounds.errors
    assert [round(t - start, 6) for t in rounds.extended] == [3.0]
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
