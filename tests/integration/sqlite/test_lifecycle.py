"""Serving an app on SQLite: startup, hooks, startup refusals and shutdown (DESIGN.md §2,
REFERENCE.md §9.3, §10.2 outcomes.rs and conformance lifecycle/shutdown)."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import trinbox._drivers.sqlite as sqlite_driver
from trinbox import (
    AlreadySubscribed,
    App,
    Closed,
    Inbox,
    InboxQueue,
    SchemaError,
    ShutdownReport,
    Subscriber,
    UnsupportedForm,
    keys,
    subscriber,
)
from trinbox._drivers.sqlite import SqlitePool
from trinbox.testing import VirtualClock

from .harness import Db, make_app, serving
from .tables2 import (
    GROUPED_JOBS,
    JOB_FORMS,
    JOBS,
    LeasedGrouped,
    LeasedJob,
    LockedJob,
    RowLockedJob,
    insert_jobs,
)

HOUR = 3600.0


@dataclass
class Job:
    n: int


def where(handler: Subscriber[Any, Any]) -> str:
    """How messages name a subscription."""
    return f"subscription {handler.queue.name!r} ({handler!r})"


class RawConnections:
    """Records every sqlite3 connection the driver opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[sqlite3.Connection] = []
        connect = sqlite_driver._connect

        def recording(path: str, busy_timeout: float) -> sqlite3.Connection:
            raw = connect(path, busy_timeout)
            self.opened.append(raw)
            return raw

        monkeypatch.setattr(sqlite_driver, "_connect", recording)

    def still_open(self) -> int:
        count = 0
        for raw in self.opened:
            try:
                raw.execute("SELECT 1")
            except sqlite3.ProgrammingError:
                continue
            count += 1
        return count


def run_in_trio(app: App) -> ShutdownReport:
    return trio.run(app.serve)


# -- serving --------------------------------------------------------------------------------


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_serve_in_a_nursery_reports_started_and_stops_on_shutdown(
    db: Db, row: type[Inbox[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR)
    got: list[int] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        got.append(job.n)

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            # Started means every subscription is open and serving.
            assert [s.subscriber for s in app.subscriptions] == [handle]
            await broker.publish(row, Job(1))
            await app.subscription(handle).wait_finished(1)
            app.shutdown()
    assert got == [1]
    assert app.report == ShutdownReport(locks_released=0, connections_closed=0)
    assert raws.opened
    assert raws.still_open() == 0


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_serve_called_directly_returns_its_report(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR)
    handled = trio.Event()

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        handled.set()

    app = make_app()
    app.include(broker, handle)

    async def stop_when_handled() -> None:
        await handled.wait()
        app.shutdown()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_when_handled)
            report = await app.serve()
    assert report == ShutdownReport(locks_released=0, connections_closed=0)
    assert app.report is report
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_trio_run_serves_the_app(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR)
    app = make_app()
    got: list[int] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        got.append(job.n)
        app.shutdown()

    app.include(broker, handle)
    # trio.run(app.serve), in a thread of its own beside this test's run.
    with trio.fail_after(10):
        report = await trio.to_thread.run_sync(run_in_trio, app)
    assert report == ShutdownReport(locks_released=0, connections_closed=0)
    assert got == [1]
    assert db.rows("SELECT * FROM jobs") == []


async def test_hooks_run_around_the_subscriptions(db: Db) -> None:
    broker = db.broker(poll_interval=HOUR)
    events: list[object] = []

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def handle(job: Job) -> None:
        events.append(("handled", job.n))

    app = make_app()
    app.include(broker, handle)

    @app.on_startup
    async def create_schema() -> None:
        # The subscription's startup check needs the table: the hook runs before it.
        events.append("startup")
        db.script(JOBS)

    @app.on_shutdown
    async def report_back() -> None:
        sub = app.subscription(handle)
        events.append(("shutdown", sub.finished, sub.in_work, db.rows("SELECT * FROM jobs")))

    with trio.fail_after(10):
        async with serving(app):
            await broker.publish(LeasedJob, Job(1))
            await app.subscription(handle).wait_finished(1)
    assert events == ["startup", ("handled", 1), ("shutdown", 1, 0, [])]


# -- refused at include or at startup ---------------------------------------------------------


async def test_second_subscription_to_one_group_is_refused_at_serve(db: Db) -> None:
    db.script(GROUPED_JOBS)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(LeasedGrouped, "a"))
    async def first(job: Job) -> None:
        pass

    @subscriber(InboxQueue(LeasedGrouped, "a"))
    async def second(job: Job) -> None:
        pass

    @subscriber(InboxQueue(LeasedGrouped, "b"))
    async def other_group(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, first)
    app.include(broker, other_group)
    app.include(broker, second)
    expected = (
        f"{where(second)}: one queue has one subscription per process, found a second "
        f"subscription to group 'a' of grouped_jobs (LeasedGrouped); scale one subscription "
        f"with .workers(n)"
    )
    with trio.fail_after(10), pytest.raises(AlreadySubscribed, match=f"^{re.escape(expected)}$"):
        await app.serve()


@pytest.mark.parametrize("second_row", JOB_FORMS)
async def test_second_subscription_to_a_groupless_table_is_refused_whatever_its_name(
    db: Db, second_row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def first(job: Job) -> None:
        pass

    @subscriber(InboxQueue(second_row, "other-name"))
    async def second(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, first)
    app.include(broker, second)
    expected = (
        f"{where(second)}: one queue has one subscription per process, found a second "
        f"subscription to jobs ({second_row.__qualname__}); scale one subscription with "
        f".workers(n)"
    )
    with trio.fail_after(10), pytest.raises(AlreadySubscribed, match=f"^{re.escape(expected)}$"):
        await app.serve()
    with pytest.raises(Closed):
        broker.pool  # noqa: B018 - the failed serve closed the pool


async def test_row_lock_table_on_sqlite_is_refused_at_include(db: Db) -> None:
    broker = db.broker()

    @subscriber(InboxQueue(RowLockedJob, "jobs"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    expected = (
        "jobs (RowLockedJob): SQLite cannot serve the RowLock form (it serves Lease or "
        "Advisory); SQLite has no row locks; declare Inbox[Lease] with a LockedUntil field, "
        "or Inbox[Advisory] with advisory_lock="
    )
    with pytest.raises(UnsupportedForm, match=f"^{re.escape(expected)}$"):
        app.include(broker, handle)  # type: ignore[arg-type]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_missing_table_stops_serve_with_a_schema_error(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    # The first statement checked is the claim (the advisory form's candidate select).
    first = broker.dialect.statements(row.__inbox_spec__).claim[0]
    claim = first.sql
    assert first.event == ("claim" if row is LeasedJob else "candidates")
    expected = (
        f"{where(handle)}: every statement of a subscription prepares against the database, "
        f"found {first.event} failing on jobs ({row.__qualname__}): no such table: jobs (while "
        f"running: {claim}); create the table and columns it names"
    )
    with trio.fail_after(10), pytest.raises(SchemaError, match=f"^{re.escape(expected)}$") as err:
        await app.serve()
    assert err.value.table == "jobs"
    assert err.value.statement == claim


# -- shutdown -------------------------------------------------------------------------------


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_cancelling_serve_lets_a_handler_finish_within_grace(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    started = trio.Event()
    finished: list[float] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        started.set()
        await trio.sleep(2)
        finished.append(trio.current_time())

    app = make_app(grace=5.0)
    app.include(broker, handle)
    with trio.fail_after(HOUR):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            await started.wait()
            cancelled_at = trio.current_time()
            nursery.cancel_scope.cancel()
    # The handler ran to its end inside the grace period and its ack settled the row.
    assert len(finished) == 1
    assert finished[0] - cancelled_at == pytest.approx(2.0, abs=0.5)
    assert trio.current_time() - cancelled_at < 5.0
    assert app.report == ShutdownReport(locks_released=0, connections_closed=0)
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_cancelling_serve_cancels_a_handler_past_grace_and_releases_its_row(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    started = trio.Event()
    cancelled: list[float] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        started.set()
        try:
            await trio.sleep(HOUR)
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise

    app = make_app(grace=5.0)
    app.include(broker, handle)
    with trio.fail_after(HOUR / 2):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            pool = broker.pool
            await started.wait()
            cancelled_at = trio.current_time()
            nursery.cancel_scope.cancel()
    assert len(cancelled) == 1
    assert cancelled[0] - cancelled_at == pytest.approx(5.0, abs=0.5)
    assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
    # The row is back in the queue at once, its attempt counted.
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(1, 2, None)]
    # No connection stays open, and the broker refuses to publish.
    assert isinstance(pool, SqlitePool)
    assert pool._idle == []
    assert raws.opened
    assert raws.still_open() == 0
    with pytest.raises(Closed, match=r"^the broker is shut down; publish before shutdown$"):
        await broker.publish(row, Job(2))


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_shutdown_rolls_back_a_transactional_handler_past_grace(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    wrote = trio.Event()

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx) -> None:
        await tx.execute("INSERT INTO audit (note) VALUES ('in work')")
        wrote.set()
        await trio.sleep_forever()

    app = make_app(grace=1.0)
    app.include(broker, handle)
    with trio.fail_after(HOUR / 2):
        async with serving(app):
            await wrote.wait()
    assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
    # The handler's transaction rolled back, its row is back, and no connection is open.
    assert db.rows("SELECT note FROM audit") == []
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(1, 2, None)]
    assert raws.still_open() == 0


async def test_a_released_row_is_claimed_by_the_next_serve(db: Db) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    attempts: list[int] = []
    first_run = trio.Event()

    @subscriber(InboxQueue(LockedJob, "jobs"))
    async def handle(job: Job) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            first_run.set()
            await trio.sleep_forever()

    app = make_app(grace=0.1)
    app.include(db.broker(poll_interval=HOUR), handle)
    with trio.fail_after(10):
        async with serving(app):
            await first_run.wait()
        assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
        # The key was released: a new app on a new broker claims the row at once.
        again = make_app()
        again.include(db.broker(poll_interval=HOUR), handle)
        async with serving(again):
            await again.subscription(handle).wait_finished(1)
    assert attempts == [1, 2]
    assert db.rows("SELECT * FROM jobs") == []
