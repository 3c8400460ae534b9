"""SQLite's transaction modes in transactional mode, lease and advisory forms
(docs/reference.md#transactional-mode, docs/reference.md#scenarios-isolation).

SQLite has one writer: a delivery's transaction holds the write lock from its first write until
it settles, or from BEGIN when the table opens its transactions IMMEDIATE. What transactional
mode does on every database is in tests/integration/matrix/test_transactional.py.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import HandlerOutcome, Inbox, InboxQueue, keys, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .harness import Db
from .tables2 import (
    IMMEDIATE_FORMS,
    JOBS,
    ImmediateLeasedJob,
    ImmediateLockedJob,
    LeasedJob,
    LockedJob,
    insert_jobs,
)


@dataclass
class Job:
    n: int


def audit(db: Db) -> list[object]:
    return [note for (note,) in db.rows("SELECT note FROM audit ORDER BY id")]


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
        # The handler writes nothing: only the isolation level can hold the write lock now.
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
            await settled(app, handle, 1)
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
                await settled(app, handle, 2)
    # A second BEGIN IMMEDIATE would wait on the first and fail the claim, spending attempts.
    assert sorted(seen) == [(1, 1), (2, 1)]
    assert most_in_work == 1
    assert sorted(map(str, audit(db))) == ["job 1", "job 2"]
    assert [r.getMessage() for r in caplog.records] == [
        f"subscription 'jobs' ({handle!r}): jobs ({row.__qualname__}) takes SQLite's write "
        f"lock when its transaction begins, so one transactional delivery is in work at a "
        f"time; workers(2) serves as workers(1)"
    ]
