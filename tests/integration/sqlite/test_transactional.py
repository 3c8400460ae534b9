"""Transactional mode on SQLite, lease and advisory forms (REFERENCE.md §6.4, §10.2
transactional/*).

SQLite has one writer: a delivery's transaction holds the write lock from its first write until
it settles, so these subscriptions run one worker, and a handler that writes through the pool
does so before it writes through its transaction.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
import trio

from trinbox import (
    FailurePolicy,
    HandlerOutcome,
    Inbox,
    InboxQueue,
    IntegrityError,
    OnFailure,
    keys,
    subscriber,
)
from trinbox.testing import VirtualClock

from .harness import Db, make_app, serving
from .tables2 import (
    IMMEDIATE_FORMS,
    JOB_FORMS,
    JOBS,
    ImmediateLeasedJob,
    ImmediateLockedJob,
    LeasedJob,
    LockedJob,
    NextJob,
    insert_jobs,
)


@dataclass
class Job:
    n: int


def audit(db: Db) -> list[object]:
    return [note for (note,) in db.rows("SELECT note FROM audit ORDER BY id")]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_ack_commits_the_handlers_writes_with_the_settlement(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)
    seen_inside: list[object] = []

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await tx.execute("INSERT INTO audit (note) VALUES (?)", f"job {job.n}")
        seen_inside.append(await tx.fetchval("SELECT count(*) FROM audit"))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(1)
    assert seen_inside == [1]
    assert audit(db) == ["job 1"]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_retry_discards_the_writes_and_counts_the_attempt(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        await tx.execute("INSERT INTO audit (note) VALUES (?)", f"attempt {attempt}")
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(2)
    assert attempts == [1, 2]
    assert audit(db) == ["attempt 2"]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_retry_after_discards_the_writes_and_writes_retry_after(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)
    before: list[datetime] = []

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        before.append(broker.clock())
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        return HandlerOutcome.retry_after(timedelta(hours=1))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(1)
        after = broker.clock()
    assert audit(db) == []
    [(attempt, locked_until, retry_after)] = db.rows(
        "SELECT attempt, locked_until, retry_after FROM jobs"
    )
    assert (attempt, locked_until) == (2, None)
    due = datetime.fromisoformat(str(retry_after)).replace(tzinfo=after.tzinfo)
    assert before[0] + timedelta(hours=1) <= due <= after + timedelta(hours=1)


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_a_task_written_through_tx_commits_only_with_the_ack(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        await tx.publish(NextJob, Job(10 * attempt))
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(2)
    # The retried delivery's task is gone with its transaction; the acked one committed.
    payloads = [p for (p,) in db.rows("SELECT payload FROM next_jobs")]
    assert all(isinstance(p, bytes) for p in payloads)
    assert [json.loads(p) for p in payloads if isinstance(p, bytes)] == [{"n": 20}]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_pool_writes_commit_on_their_own_whatever_the_outcome(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}', b'{"n": 2}'])
    broker = db.broker(poll_interval=3600)

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx, pool: keys.Pool) -> HandlerOutcome:
        # The pool writes first: once the transaction writes it holds SQLite's write lock.
        await pool.execute("INSERT INTO audit (note) VALUES (?)", f"pool {job.n}")
        await tx.execute("INSERT INTO audit (note) VALUES (?)", f"tx {job.n}")
        if job.n == 1:
            return HandlerOutcome.drop()
        raise RuntimeError("boom")  # the default failure policy retries

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(2)
    assert sorted(map(str, audit(db))) == ["pool 1", "pool 2"]
    # Job 1 was dropped (finished); job 2 failed and is back with its attempt counted.
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(2, 2, None)]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_failed_settlement_rolls_back_the_handlers_writes(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    db.script("INSERT INTO refs (job_id) VALUES (1);")  # the ack's DELETE fails
    broker = db.broker(poll_interval=1, lease=2)
    attempts: list[int] = []
    seen_before: list[list[object]] = []

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(
        job: Job, tx: keys.Tx, attempt: keys.Attempt, pool: keys.Pool
    ) -> HandlerOutcome:
        attempts.append(attempt)
        if attempt > 1:
            seen_before.append(audit(db))
            await pool.execute("DELETE FROM refs")
        await tx.execute("INSERT INTO audit (note) VALUES (?)", f"attempt {attempt}")
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        sub = app.subscription(handle)
        with trio.fail_after(60):
            await sub.wait_finished(2)
        errors = list(sub.settle_errors)
    # The first ack failed: its audit row rolled back with it and the row came back.
    assert attempts == [1, 2]
    assert seen_before == [[]]
    assert [type(e) for e in errors] == [IntegrityError]
    assert audit(db) == ["attempt 2"]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_handler_exception_never_commits_its_writes_even_when_skipped(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)
    wrote = trio.Event()

    queue = (
        InboxQueue(row, "jobs").transactional().on_failure(OnFailure(handler=FailurePolicy.SKIP))
    )

    @subscriber(queue)
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        wrote.set()
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(1)
    assert wrote.is_set()
    assert audit(db) == []
    assert db.rows("SELECT * FROM jobs") == []  # SKIP finished the row


# -- SQLite modes (REFERENCE.md §10.2 isolation/sqlite_modes) ------------------------------------


def write_from_outside(path: object) -> str:
    """Try one write on a connection of its own, waiting at most 0.2 s for the write lock."""
    conn = sqlite3.connect(str(path), timeout=0.2, isolation_level=None)
    try:
        conn.execute("INSERT INTO audit (note) VALUES ('outside')")
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        conn.close()
    return "free"


@pytest.mark.parametrize(
    ("row", "outside"),
    [
        pytest.param(ImmediateLeasedJob, "database is locked", id="lease-immediate"),
        pytest.param(ImmediateLockedJob, "database is locked", id="advisory-immediate"),
        pytest.param(LeasedJob, "free", id="lease-default"),
        pytest.param(LockedJob, "free", id="advisory-default"),
    ],
)
async def test_the_tables_sqlite_mode_decides_when_the_write_lock_is_taken(
    db: Db, row: type[Inbox[Any, Any]], outside: str
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=3600)
    in_work = trio.Event()
    probed = trio.Event()

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        # The handler writes nothing: only the opening can hold the write lock now.
        in_work.set()
        await probed.wait()
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await in_work.wait()
            found = await trio.to_thread.run_sync(write_from_outside, db.path)
            probed.set()
            await app.subscription(handle).wait_finished(1)
    assert found == outside
    assert audit(db) == ([] if outside != "free" else ["outside"])
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", IMMEDIATE_FORMS)
async def test_a_transaction_that_locks_at_begin_keeps_one_delivery_in_work(
    db: Db, row: type[Inbox[Any, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}', b'{"n": 2}'])
    broker = db.broker(poll_interval=0.05)
    seen: list[tuple[int, int]] = []
    in_work = 0
    most_in_work = 0

    @subscriber(InboxQueue(row, "jobs").transactional().workers(2))
    async def handle(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        nonlocal in_work, most_in_work
        in_work += 1
        most_in_work = max(most_in_work, in_work)
        await tx.execute("INSERT INTO audit (note) VALUES (?)", f"job {job.n}")
        await trio.sleep(0.2)
        seen.append((job.n, attempt))
        in_work -= 1
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    with caplog.at_level(logging.WARNING, logger="trinbox"):
        async with serving(app):
            with trio.fail_after(10):
                await app.subscription(handle).wait_finished(2)
    # A second BEGIN IMMEDIATE would wait on the first and fail the claim, spending attempts.
    assert sorted(seen) == [(1, 1), (2, 1)]
    assert most_in_work == 1
    assert sorted(map(str, audit(db))) == ["job 1", "job 2"]
    assert [r.getMessage() for r in caplog.records] == [
        f"subscription 'jobs' ({handle!r}): jobs ({row.__qualname__}) takes SQLite's write "
        f"lock when its transaction begins, so one transactional delivery is in work at a "
        f"time; workers(2) serves as workers(1)"
    ]
