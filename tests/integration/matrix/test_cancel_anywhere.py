"""Cancel ``App.serve`` at each of its checkpoints, on every stand and form
(docs/design.md#trio-structure: "cancelling the scope around it is a graceful shutdown"; "after
shutdown no lock is held, no connection is open, no transaction is open").

The way Trio tests itself: one trial runs uncancelled and counts the task steps of ``serve``
and of every task under it, from its start until every row is settled (M). Then each trial N
serves a fresh app on the same database, reset to the same rows, and cancels the scope around
``serve`` as its N-th step begins. After each cancel:

(a) ``serve`` returns within ``SERVE_BOUND`` (the drop release bound is 5 s), never hangs;
(b) nothing of the app is left on the server: no session (PostgreSQL, MariaDB), no advisory
    lock (pg_locks, IS_USED_LOCK); on SQLite the write lock is free and the advisory key
    registry holds no key for the file;
(c) every row not acked is claimable again (due, no lease running, no row lock), and no row is
    gone that no handler acked.

A cancel can deadlock ``serve`` inside a shielded scope, where no Trio timeout reaches it, so
each trial runs ``trio.run`` in a daemon thread of its own and a thread still alive
``SERVE_BOUND`` after its cancel is a hang. Every trial of a cell runs; the cell fails once,
with a summary of the checkpoints covered, the hangs and the leaks.

Every step of the trio-asyncio loop's task runs one asyncio callback, so the steps of startup
also cut the pools' connects at each point on the asyncio side (issue 17, item 4): the second
test cancels at each of them, several times over, and also fails on anything asyncio reports
out of band ("Future exception was never retrieved": work nobody awaited) and on a connection
closed only by the garbage collector.

Real servers and real time (no VirtualClock): each trial's broker gets a ``TrioClock`` built
inside its own ``trio.run``, so the broker's "now" follows that run's clock (which starts at a
random offset: leases are compared with the "now" of the trial that wrote them).
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox._drivers.mysql import MySqlPool
from trinbox._drivers.postgres import PgPool
from trinbox._drivers.sqlite import SqlitePool
from trinbox._holders.sqlite_key import KeyRegistry
from trinbox.testing import settled
from trinbox.typing import Subscriber

from ..serving import make_app
from ..stands import SqliteStand, Stand
from .conftest import Case
from .kit import as_utc, cells, insert_emails, sessions, sessions_after_close
from .schema import EMAIL_JOBS

ROWS = 4
RETRIED = frozenset({1, 3})  # these rows retry once, then ack: six deliveries in all
DELIVERIES = ROWS + len(RETRIED)
POLL = 0.05  # a claim that ran dry waits this long: retried rows come back soon
SERVE_BOUND = 10.0  # seconds from the cancel to serve's return (drop release bound: 5 s)
REACH_BOUND = 30.0  # seconds for a trial to reach its checkpoint: startup and six deliveries
# Trials per cell: every checkpoint (0, the default: M is about 85 and 150 on SQLite and 320 to
# 480 on the servers, a trial takes about 0.05 s, a hang SERVE_BOUND), or with
# TRINBOX_CANCEL_TRIALS=K every k-th one from N = 1, k the smallest stride that fits K trials.
TRIALS = int(os.environ.get("TRINBOX_CANCEL_TRIALS", "0"))
# Trials per startup checkpoint: a connect's steps on the asyncio side follow the server's
# answers, so the same step N lands in a different place of it from one trial to the next.
STARTUP_REPEATS = 3


@dataclass
class Job:
    n: int


@dataclass(eq=False)
class Trial:
    """One run of ``serve``: cancelled at step ``cancel_at``, or (``None``) once the rows are
    settled. Written by the trial's thread, read by the test's once the thread is over."""

    cancel_at: int | None
    transactional: bool = False  # the queue's mode
    steps: int = 0
    connecting: set[int] = field(default_factory=set)  # the steps run while a pool connects
    started_at: int | None = None  # the step count when serve had started
    settled_at: int | None = None  # the step count when every delivery had settled
    seen: set[int] = field(default_factory=set)  # rows a handler started on
    acked: set[int] = field(default_factory=set)  # rows a handler returned ack for
    cancelled_at: float | None = None  # time.monotonic() of the cancel
    cancelled_in: str = ""  # the task about to step when the cancel came
    returned_at: float | None = None  # ... and of serve's return
    now: datetime | None = None  # the broker's clock as serve returned
    error: BaseException | None = None
    # Set by the trial's thread once the cancel is made, or the run is over.
    fired: threading.Event = field(default_factory=threading.Event)

    def cancel(self, scope: trio.CancelScope) -> None:
        self.cancelled_at = time.monotonic()
        self.cancelled_in = trio.lowlevel.current_task().name
        scope.cancel()
        self.fired.set()


def _under(task: trio.lowlevel.Task, root: trio.lowlevel.Task) -> bool:
    """Whether ``task`` is ``root`` or runs in a nursery below it."""
    while task is not root:
        nursery = task.parent_nursery
        if nursery is None:
            return False
        task = nursery.parent_task
    return True


# Connects in flight (the asyncio pools' ``_connect``), counted by ``_watch_connects``.
_connects_in_flight = 0


def _watch_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count the asyncio pools' connects in flight, so a trial knows its steps that run while
    one connects. Adds no checkpoint: a trial's steps are the same with and without it."""

    def watched(connect: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def counted(pool: Any) -> Any:
            global _connects_in_flight
            _connects_in_flight += 1
            try:
                return await connect(pool)
            finally:
                _connects_in_flight -= 1

        return counted

    for pool in (PgPool, MySqlPool):
        monkeypatch.setattr(pool, "_connect", watched(pool._connect))


class Checkpoints(trio.abc.Instrument):
    """Counts the steps of ``serve``'s task and of every task under it (the trio-asyncio loop,
    the pools, the subscriptions, the handlers); cancels the trial's scope as step
    ``cancel_at`` begins.

    Cancelling from ``before_task_step`` is what the task about to step would do as its first
    act: Trio runs the hook in that task's context (its test_instrument_call_trio_context
    asserts in_trio_task there), and ``cancel()`` only moves blocked tasks in the scope onto
    the run queue, which the loop allows at any point of a batch. The stepping task meets the
    cancel at its next checkpoint (at once, if it is resuming from a bare schedule point).
    """

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self.root: trio.lowlevel.Task | None = None
        self.scope: trio.CancelScope | None = None

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.root is None or not _under(task, self.root):
            return
        trial = self.trial
        trial.steps += 1
        if _connects_in_flight:
            trial.connecting.add(trial.steps)
        if trial.steps == trial.cancel_at and self.scope is not None:
            trial.cancel(self.scope)


def _handler(case: Case, trial: Trial) -> Subscriber[Any, Any]:
    async def handle(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
        trial.seen.add(job.n)
        await trio.lowlevel.checkpoint()  # a cancel may land in the middle of the work
        if job.n in RETRIED and attempt == 1:
            return HandlerOutcome.retry()
        trial.acked.add(job.n)
        return HandlerOutcome.ack()

    queue = InboxQueue(case.email, "emails").workers(2)
    if trial.transactional:
        return subscriber(queue.transactional())(handle)
    return subscriber(queue)(handle)


async def _serve(case: Case, trial: Trial, counter: Checkpoints) -> None:
    """The trial's ``trio.run``: serve a fresh app under a cancel scope until the cancel."""
    broker = case.stand.broker(poll_interval=POLL)  # its TrioClock reads this run's clock
    app = make_app()
    handle = _handler(case, trial)
    app.include(broker, handle)

    async def counted(*, task_status: trio.TaskStatus[None]) -> None:
        counter.root = trio.lowlevel.current_task()  # steps from the next one on are serve's
        await app.serve(task_status=task_status)

    with trio.CancelScope() as scope:
        counter.scope = scope
        async with trio.open_nursery() as nursery:
            await nursery.start(counted)
            trial.started_at = trial.steps
            await settled(app, handle, DELIVERIES)
            trial.settled_at = trial.steps
            if trial.cancel_at is None:
                trial.cancel(scope)
            await trio.sleep_forever()  # until the cancel at step N
    trial.returned_at = time.monotonic()
    trial.now = broker.clock()


def _run_trial(
    case: Case, cancel_at: int | None, *, transactional: bool = False
) -> tuple[Trial, bool]:
    """Run one trial in a daemon thread; the trial, and whether it hung."""
    trial = Trial(cancel_at, transactional)

    def thread_main() -> None:
        try:
            counter = Checkpoints(trial)
            trio.run(_serve, case, trial, counter, instruments=[counter])
        except BaseException as exc:  # reported by the test's thread
            trial.error = exc
        finally:
            trial.fired.set()

    thread = threading.Thread(target=thread_main, name=f"cancel-at-{cancel_at}", daemon=True)
    thread.start()
    trial.fired.wait(REACH_BOUND)
    thread.join(SERVE_BOUND)
    return trial, thread.is_alive()


# -- what a trial left behind ------------------------------------------------------------------


def _reset(stand: Stand) -> None:
    """The initial rows: due, unleased, each with its own customer (its advisory key)."""
    stand.execute("DELETE FROM email_jobs")
    insert_emails(stand, [json.dumps({"n": n}).encode() for n in range(ROWS)])


def _server_leftovers(stand: Stand) -> list[str]:
    problems = []
    left = sessions_after_close(stand)
    if left:
        problems.append(f"{left} sessions of the app still open")
    if stand.name == "postgres":
        locks = stand.value(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        if locks:
            problems.append(f"{locks} advisory locks held")
    else:
        # GET_LOCK names are server-wide: the database, a dot and the key (email_jobs-{customer}).
        database = stand.url.rsplit("/", 1)[1].lower()
        held = [
            n
            for n in range(ROWS)
            if stand.value("SELECT IS_USED_LOCK(?)", f"{database}.email_jobs-c{n}") is not None
        ]
        if held:
            problems.append(f"GET_LOCK held for rows {held}")
    return problems


def _write_lock_error(stand: SqliteStand) -> str | None:
    """Why ``BEGIN IMMEDIATE`` fails on the file within a second (``None``: it succeeds). No
    connection of the app is open by then (none is left in the process); the second covers
    SQLite's own hand-over of the file as its last connection closes."""
    conn = sqlite3.connect(stand.path, timeout=1.0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return None
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        conn.close()


def _sqlite_leftovers(stand: SqliteStand) -> list[str]:
    problems = []
    error = _write_lock_error(stand)
    if error is not None:
        problems.append(f"the write lock is held (BEGIN IMMEDIATE: {error})")
    # The registry names a file as the driver's pool does.
    keys_left = KeyRegistry.keys(SqlitePool(str(stand.path)).identity)
    if keys_left:
        problems.append(f"advisory keys left in the registry: {sorted(keys_left)}")
    return problems


def _row_leftovers(stand: Stand, trial: Trial) -> list[str]:
    """(c): rows not acked are all there, due, unleased and not row-locked."""
    select = "SELECT customer, attempt, locked_until, retry_after FROM email_jobs"
    rows = {int(c[1:]): (a, lu, ra) for c, a, lu, ra in stand.rows(select)}
    # The stand's own claim: SKIP LOCKED leaves out a row some transaction still locks.
    unlocked = set(rows)
    if stand.name != "sqlite":
        skip_locked = "SELECT customer FROM email_jobs FOR UPDATE SKIP LOCKED"
        unlocked = {int(c[1:]) for (c,) in stand.rows(skip_locked)}
    problems = []
    lost = set(range(ROWS)) - rows.keys() - trial.acked
    if lost:
        problems.append(f"rows {sorted(lost)} are gone, and no handler acked them")
    now = trial.now
    for n, (attempt, locked_until, retry_after) in sorted(rows.items()):
        why = []
        if n not in unlocked:
            why.append("row-locked")
        if now is not None and locked_until is not None and as_utc(locked_until) > now:
            why.append(f"leased until {as_utc(locked_until)} (now {now})")
        if now is not None and as_utc(retry_after) > now:
            why.append(f"due only at {as_utc(retry_after)}")
        if why:
            seen = "a handler saw it" if n in trial.seen else "no handler saw it"
            problems.append(f"row {n} not claimable: {', '.join(why)}; attempt {attempt}, {seen}")
    return problems


def _leftovers(stand: Stand, trial: Trial) -> list[str]:
    if isinstance(stand, SqliteStand):
        return _sqlite_leftovers(stand) + _row_leftovers(stand, trial)
    return _server_leftovers(stand) + _row_leftovers(stand, trial)


def _clean_up(case: Case, tmp_path: Path, failures: int) -> Case:
    """After a failed trial, what it left must not fail the next one: end its sessions on a
    server (they free their locks), move SQLite to a new file (a stuck thread may hold it)."""
    stand = case.stand
    if isinstance(stand, SqliteStand):
        fresh = SqliteStand(tmp_path / f"queue-{failures}.db")
        fresh.script(EMAIL_JOBS["sqlite"])
        return Case(fresh, case.form)
    if stand.name == "postgres":
        stand.rows(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    else:
        for (session,) in stand.rows(
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        ):
            try:
                stand.execute(f"KILL CONNECTION {int(session)}")
            except Exception:
                pass  # it ended on its own meanwhile
    deadline = time.monotonic() + 5
    while sessions(stand) and time.monotonic() < deadline:
        time.sleep(0.02)  # the server ends killed sessions shortly
    return case


# -- the test ----------------------------------------------------------------------------------


def _checkpoints(m: int) -> list[int]:
    stride = 1 if TRIALS <= 0 or m <= TRIALS else math.ceil(m / TRIALS)
    return list(range(1, m + 1, stride))


def _check(case: Case, trial: Trial, hung: bool) -> list[str]:
    """What went wrong in a trial (nothing: an empty list)."""
    if hung:
        if trial.cancelled_at is None:
            reached = f"never reached its checkpoint within {REACH_BOUND:.0f} s"
            return [f"{reached} (stuck at step {trial.steps})"]
        return [f"hung: serve had not returned {SERVE_BOUND:.0f} s after the cancel"]
    problems = []
    if trial.error is not None:
        problems.append(f"serve raised {trial.error!r}")
    elif trial.cancelled_at is None:
        problems.append(f"serve ended before step {trial.cancel_at} (at step {trial.steps})")
    return problems + _leftovers(case.stand, trial)


def test_cancelling_serve_at_any_checkpoint_leaves_nothing_behind(
    case: Case, tmp_path: Path
) -> None:
    started = time.monotonic()
    _reset(case.stand)
    baseline, hung = _run_trial(case, None)
    problems = _check(case, baseline, hung)
    assert not problems, f"{case.name}-{case.form}, uncancelled: {problems}"
    assert baseline.settled_at is not None
    assert baseline.seen == set(range(ROWS)) == baseline.acked
    m = baseline.settled_at

    covered = _checkpoints(m)
    hangs: dict[int, str] = {}  # N: the task that was about to step when the cancel came
    leaks: dict[int, list[str]] = {}
    slowest = 0.0
    for n in covered:
        _reset(case.stand)
        trial, hung = _run_trial(case, n)
        found = _check(case, trial, hung)
        if trial.cancelled_at is not None and trial.returned_at is not None:
            slowest = max(slowest, trial.returned_at - trial.cancelled_at)
        if hung:
            hangs[n] = trial.cancelled_in
        elif found:
            leaks[n] = [f"cancelled as {trial.cancelled_in} stepped", *found]
        if found:
            case = _clean_up(case, tmp_path, len(hangs) + len(leaks))

    stride = covered[1] - covered[0] if len(covered) > 1 else 1
    summary = (
        f"{case.name}-{case.form}: M = {m} checkpoints from serve's start to the rows settled; "
        f"{len(covered)} trials (N = 1..{m} every {stride}); {len(hangs)} hangs, "
        f"{len(leaks)} leaks; slowest return {slowest:.2f} s; {time.monotonic() - started:.1f} s"
    )
    print(summary)
    if hangs or leaks:
        lines = [summary]
        if hangs:
            tasks = ", ".join(sorted(set(hangs.values())))
            lines.append(f"hangs at N = {list(hangs)}, cancelled as these stepped: {tasks}")
        lines += [f"N = {n}: {'; '.join(found)}" for n, found in leaks.items()]
        pytest.fail("\n".join(lines))


def _out_of_band(
    caplog: pytest.LogCaptureFixture, caught: list[warnings.WarningMessage]
) -> list[str]:
    """What asyncio reported outside any await during a trial (trinbox logs it under
    trinbox.drivers.asyncio), and resources the garbage collector had to close."""
    found = [
        f"logged {r.name}: {r.getMessage()} ({r.exc_info[1]!r})" if r.exc_info else r.getMessage()
        for r in caplog.records
        if r.name in ("asyncio", "trinbox.drivers.asyncio")
    ]
    return found + [f"{w.category.__name__}: {w.message}" for w in caught]


@cells(stands=["postgres", "mariadb"], forms=["row_lock"])
def test_cancelling_serve_while_it_connects_leaves_no_session_and_nothing_unawaited(
    case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING)
    _watch_connects(monkeypatch)
    _reset(case.stand)
    baseline, hung = _run_trial(case, None, transactional=True)
    assert not _check(case, baseline, hung), _check(case, baseline, hung)
    assert baseline.started_at is not None
    during = sorted(n for n in baseline.connecting if n <= baseline.started_at)
    assert during, "no step of startup ran while a pool connected"
    started = time.monotonic()
    leaks: dict[tuple[int, int], list[str]] = {}
    for repeat in range(STARTUP_REPEATS):
        for n in during:
            _reset(case.stand)
            caplog.clear()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ResourceWarning)
                trial, hung = _run_trial(case, n, transactional=True)
                # A future nobody awaited, a socket nobody closed, report as they are freed:
                # the young generations now, every generation once a round (a full pass is
                # slow).
                gc.collect(1 if n < during[-1] else 2)
            found = _check(case, trial, hung) + _out_of_band(caplog, caught)
            if found:
                leaks[(repeat, n)] = [f"cancelled as {trial.cancelled_in} stepped", *found]
                case = _clean_up(case, tmp_path, len(leaks))
    summary = (
        f"{case.name}: {len(during)} steps of startup ({baseline.started_at}) run while a pool "
        f"connects, each cancelled at {STARTUP_REPEATS} times; {len(leaks)} leaks; "
        f"{time.monotonic() - started:.1f} s"
    )
    print(summary)
    assert not leaks, f"{summary}: " + "; ".join(
        f"N = {n} (round {r}): {found}" for (r, n), found in leaks.items()
    )
