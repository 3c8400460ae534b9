"""Serving an app on every stand and form: startup, hooks, startup refusals and shutdown
(docs/design.md#trio-structure, docs/reference.md#opening-a-subscription,
docs/reference.md#scenarios-lifecycle, docs/reference.md#scenarios-databases).

What only SQLite has (the sqlite3 connections the driver opens and closes, the row lock form
refused at include) is in tests/integration/sqlite/test_lifecycle.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import trio

from trinbox import (
    AlreadySubscribed,
    App,
    Closed,
    DatabaseError,
    InboxQueue,
    SchemaError,
    ServerTooOld,
    ShutdownReport,
    keys,
    subscriber,
)
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import HOUR, cells, insert_emails, sessions_after_close, where
from .schema import AUDIT, NEXT_JOBS, NextJob

NOTHING = ShutdownReport(locks_released=0, connections_closed=0)


@dataclass
class Job:
    n: int


def run_in_trio(app: App) -> ShutdownReport:
    return trio.run(app.serve)


def no_sessions_left(stand: Stand) -> None:
    """On a server, every session of the app has ended (SQLite: see the SQLite tests)."""
    if stand.name != "sqlite":
        assert sessions_after_close(stand) == 0


def returned(case: Case, deliveries: int) -> int:
    """The attempt column after ``deliveries`` deliveries released unsettled."""
    return 1 if case.form == "row_lock" else 1 + deliveries


# -- serving --------------------------------------------------------------------------------


async def test_serve_in_a_nursery_reports_started_and_stops_on_shutdown(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    got: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        got.append(job.n)

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            # Started means every subscription is open and serving.
            assert [(s.subscriber, s.serving) for s in app.statistics()] == [
                (handle.handler.__qualname__, True)
            ]
            await broker.publish(case.email, Job(1), name="emails", customer="c")
            await settled(app, handle, 1)
            app.shutdown()
    assert got == [1]
    assert app.report == NOTHING
    no_sessions_left(case.stand)


async def test_serve_called_directly_returns_its_report(case: Case) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    handled = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
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
    assert report == NOTHING
    assert app.report is report
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_a_shutdown_before_serve_began_is_kept_and_serve_stops_at_once(
    case: Case, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    got: list[int] = []
    hooks: list[str] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        got.append(job.n)

    app = make_app()
    app.include(broker, handle)
    app.on_startup(lambda: _note(hooks, "startup"))
    app.on_shutdown(lambda: _note(hooks, "shutdown"))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.serve)
            app.shutdown()  # serve has not begun: it runs only once this task waits
    # Serve started up, claimed nothing, and shut down.
    assert app.report == NOTHING
    assert hooks == ["startup", "shutdown"]
    assert got == []
    assert app.statistics(handle).claims == 0
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 1
    # The request was spent by that serve: the next one serves.
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == [1]


async def _note(hooks: list[str], hook: str) -> None:
    hooks.append(hook)


async def test_a_second_serve_while_serving_is_refused_and_the_first_goes_on(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    got: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        got.append(job.n)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with pytest.raises(RuntimeError, match=r"^test: an app serves once at a time, found"):
            await app.serve()
        await broker.publish(case.email, Job(1), name="emails", customer="c")
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == [1]
    assert app.report == NOTHING
    no_sessions_left(case.stand)


async def test_trio_run_serves_the_app(case: Case) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    app = make_app()
    got: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        got.append(job.n)
        app.shutdown()

    app.include(broker, handle)
    # trio.run(app.serve), in a thread of its own beside this test's run.
    with trio.fail_after(10):
        report = await trio.to_thread.run_sync(run_in_trio, app)
    assert report == NOTHING
    assert got == [1]
    assert case.stand.rows("SELECT * FROM email_jobs") == []
    no_sessions_left(case.stand)


async def test_hooks_run_around_the_subscriptions(case: Case) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=HOUR)
    events: list[object] = []

    @subscriber(InboxQueue(NextJob, "next"))
    async def handle(job: Job) -> None:
        events.append(("handled", job.n))

    app = make_app()
    app.include(broker, handle)

    @app.on_startup
    async def create_schema() -> None:
        # The subscription's startup check needs the table: the hook runs before it.
        events.append("startup")
        stand.script(NEXT_JOBS[stand.name])

    @app.on_shutdown
    async def report_back() -> None:
        stats = app.statistics(handle)
        events.append(
            ("shutdown", stats.finished, stats.in_work, stand.rows("SELECT * FROM next_jobs"))
        )

    with trio.fail_after(10):
        async with serving(app):
            await broker.publish(NextJob, Job(1))
            await settled(app, handle, 1)
    assert events == ["startup", ("handled", 1), ("shutdown", 1, 0, [])]


# -- refused at startup ---------------------------------------------------------------------


async def test_second_subscription_to_one_group_is_refused_at_serve(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "a"))
    async def first(job: Job) -> None:
        pass

    @subscriber(InboxQueue(case.email, "a"))
    async def second(job: Job) -> None:
        pass

    @subscriber(InboxQueue(case.email, "b"))
    async def other_group(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, first)
    app.include(broker, other_group)
    app.include(broker, second)
    expected = (
        f"{where(second)}: one queue has one subscription per process, found a second "
        f"subscription to group 'a' of email_jobs ({case.email.__qualname__}); scale one "
        f"subscription with .workers(n)"
    )
    with trio.fail_after(10), pytest.raises(AlreadySubscribed, match=f"^{re.escape(expected)}$"):
        await app.serve()
    no_sessions_left(case.stand)


async def test_second_subscription_to_a_groupless_table_is_refused_whatever_its_name(
    case: Case,
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.plain, "plain"))
    async def first(job: Job) -> None:
        pass

    @subscriber(InboxQueue(case.plain, "other-name"))
    async def second(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, first)
    app.include(broker, second)
    expected = (
        f"{where(second)}: one queue has one subscription per process, found a second "
        f"subscription to plain_jobs ({case.plain.__qualname__}); scale one subscription with "
        f".workers(n)"
    )
    with trio.fail_after(10), pytest.raises(AlreadySubscribed, match=f"^{re.escape(expected)}$"):
        await app.serve()
    with pytest.raises(Closed):
        broker.pool  # noqa: B018 - the failed serve closed the pool


@pytest.mark.parametrize("missing", ["table", "column"])
async def test_missing_table_or_column_stops_serve_with_a_schema_error(
    case: Case, missing: str
) -> None:
    stand = case.stand
    if missing == "table":
        stand.script("DROP TABLE email_jobs")
    else:
        stand.script("ALTER TABLE email_jobs DROP COLUMN customer")
    broker = stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    # The first statement checked is the claim (the advisory form's candidate select), which
    # reads the customer column in every form (the advisory key names it).
    first = build_plan(broker.dialect, case.email.__inbox_spec__).claim[0]
    assert first.event == ("candidates" if case.form == "advisory" else "claim")
    database = stand.url.rsplit("/", 1)[1]
    refused = {
        ("sqlite", "table"): "no such table: email_jobs",
        ("sqlite", "column"): "no such column: customer",
        ("postgres", "table"): 'UndefinedTableError: relation "email_jobs" does not exist',
        ("postgres", "column"): 'UndefinedColumnError: column "customer" does not exist',
        ("mariadb", "table"): f"ProgrammingError: Table '{database}.email_jobs' doesn't exist",
        ("mariadb", "column"): "OperationalError: Unknown column 'customer' in 'SELECT'",
    }[(stand.name, missing)]
    # The advice follows what the database says is missing.
    advice = {
        "table": "create the table it names",
        "column": "add the column it names, or name the field's column with Column(..)",
    }[missing]
    expected = (
        f"{where(handle)}: every statement of a subscription prepares against the database, "
        f"found {first.event} failing on email_jobs ({case.email.__qualname__}): {refused} "
        f"(while running: {first.sql}); {advice}"
    )
    with trio.fail_after(10), pytest.raises(SchemaError, match=f"^{re.escape(expected)}$") as err:
        await app.serve()
    assert err.value.table == "email_jobs"
    assert err.value.statement == first.sql
    no_sessions_left(stand)


@cells(stands=["mariadb"], forms=["lease"])
@pytest.mark.parametrize(
    ("version", "required"),
    [("10.5.9-MariaDB", "MariaDB 10.6.0"), ("8.0.0", "MySQL 8.0.1")],
)
async def test_server_older_than_the_floor_stops_serve(
    case: Case, monkeypatch: pytest.MonkeyPatch, version: str, required: str
) -> None:
    # The version is read on the server at startup: make the server answer an old one.
    monkeypatch.setattr(MySqlDialect, "version_query", f"SELECT '{version}'")
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    expected = (
        f"{where(handle)} on email_jobs (LeasedEmail): trinbox needs MySQL 8.0.1+ or MariaDB "
        f"10.6+ (FOR UPDATE SKIP LOCKED), found server version {version!r}; upgrade the server "
        f"to {required} or later"
    )
    with trio.fail_after(10), pytest.raises(ServerTooOld, match=f"^{re.escape(expected)}$") as err:
        await app.serve()
    assert (err.value.server, err.value.required) == (version, required)
    no_sessions_left(case.stand)


@cells(stands=["mariadb"], forms=["lease"])
async def test_failing_version_query_stops_serve(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "SELECT VERSION_OF_NOTHING()"
    monkeypatch.setattr(MySqlDialect, "version_query", query)
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    database = case.stand.url.rsplit("/", 1)[1]
    expected = (
        f"OperationalError: FUNCTION {database}.VERSION_OF_NOTHING does not exist (while "
        f"running: {query})"
    )
    with trio.fail_after(10), pytest.raises(DatabaseError, match=f"^{re.escape(expected)}$") as err:
        await app.serve()
    assert err.value.statement == query
    no_sessions_left(case.stand)


# -- shutdown -------------------------------------------------------------------------------


async def test_cancelling_serve_lets_a_handler_finish_within_grace(
    case: Case, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR, lease=8 * HOUR)
    started = trio.Event()
    finished: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
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
    assert app.report == NOTHING
    assert case.stand.rows("SELECT * FROM email_jobs") == []
    no_sessions_left(case.stand)


async def test_cancelling_serve_cancels_a_handler_past_grace_and_releases_its_row(
    case: Case, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR, lease=8 * HOUR)
    started = trio.Event()
    cancelled: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
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
            await started.wait()
            cancelled_at = trio.current_time()
            nursery.cancel_scope.cancel()
    assert len(cancelled) == 1
    assert cancelled[0] - cancelled_at == pytest.approx(5.0, abs=0.5)
    assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
    # The row is back in the queue at once.
    assert case.stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs") == [
        (1, returned(case, 1), None)
    ]
    # No session stays open, and the broker refuses to publish.
    no_sessions_left(case.stand)
    with pytest.raises(Closed, match=r"^the broker is shut down; publish before shutdown$"):
        await broker.publish(case.email, Job(2), name="emails")


async def test_shutdown_rolls_back_a_transactional_handler_past_grace(
    case: Case, clock: VirtualClock
) -> None:
    stand = case.stand
    stand.script(AUDIT[stand.name])
    insert_emails(stand, [b'{"n": 1}'])
    broker = stand.broker(poll_interval=HOUR, lease=8 * HOUR)
    wrote = trio.Event()

    @subscriber(InboxQueue(case.email, "emails").transactional())
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
    # The handler's transaction rolled back, its row is back, and no session is open.
    assert stand.rows("SELECT note FROM audit") == []
    assert stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs") == [
        (1, returned(case, 1), None)
    ]
    no_sessions_left(stand)


async def test_a_released_row_is_claimed_by_the_next_serve_at_once(case: Case) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    attempts: list[int] = []
    first_run = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        if len(attempts) == 1:
            first_run.set()
            await trio.sleep_forever()

    app = make_app(grace=0.1)
    app.include(case.stand.broker(poll_interval=HOUR), handle)
    with trio.fail_after(10):
        async with serving(app):
            await first_run.wait()
        assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
        # The row was released: a new app on a new broker claims it at once.
        again = make_app()
        again.include(case.stand.broker(poll_interval=HOUR), handle)
        async with serving(again):
            await settled(again, handle, 1)
    # The row lock form's rollback counted nothing; the others counted the first claim.
    assert attempts == ([1, 1] if case.form == "row_lock" else [1, 2])
    assert case.stand.rows("SELECT * FROM email_jobs") == []
