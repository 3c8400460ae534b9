"""Failed claims and failing handlers on SQLite, lease and advisory forms (REFERENCE.md §3.1,
§5.1, §10.2 failures.rs)."""

from __future__ import annotations

import logging
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import (
    DatabaseError,
    FailurePolicy,
    HandlerFailed,
    HandlerOutcome,
    Inbox,
    InboxQueue,
    OnFailure,
    Subscriber,
    keys,
    subscriber,
)
from trinbox.testing import VirtualClock

from .harness import Db, make_app, serving
from .tables2 import JOB_FORMS, JOBS, ClaimWatch, insert_jobs

HOUR = 3600.0
FAIL_FAST = OnFailure(handler=FailurePolicy.FAIL_FAST)


@dataclass
class Job:
    n: int


def where(handler: Subscriber[Any, Any]) -> str:
    """How messages name a subscription."""
    return f"subscription {handler.queue.name!r} ({handler!r})"


def rename(db: Db, old: str, new: str) -> None:
    conn = sqlite3.connect(db.path)
    try:
        conn.execute(f"ALTER TABLE {old} RENAME TO {new}")
    finally:
        conn.close()


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_failed_claim_waits_one_second_not_the_poll_interval(
    db: Db,
    row: type[Inbox[Any, Any]],
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    watch = ClaimWatch(monkeypatch)

    async def move_the_table(n: int) -> None:
        # After the startup checks: the first claim finds no table, the second finds it back.
        if n == 1:
            rename(db, "jobs", "jobs_gone")
        elif n == 2:
            rename(db, "jobs_gone", "jobs")

    watch.before = move_the_table
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    handled: list[float] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        handled.append(trio.current_time())

    app = make_app()
    app.include(broker, handle)
    with caplog.at_level(logging.WARNING, logger="trinbox"):
        async with serving(app):
            with trio.fail_after(HOUR / 2):
                await app.subscription(handle).wait_finished(1)
    assert [type(e) for e in watch.failed] == [DatabaseError]
    assert str(watch.failed[0]).startswith("no such table: ")
    gap = watch.times[1] - watch.times[0]
    assert 1.0 <= gap < 1.5
    assert len(handled) == 1
    assert handled[0] < 1.5
    failures = [r for r in caplog.records if "claim failed" in r.getMessage()]
    assert [r.getMessage() for r in failures] == [
        f"{where(handle)}: a claim failed; next claim in 1 s"
    ]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_handler_exception_under_fail_fast_stops_serve_and_returns_the_row(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR)
    boom = RuntimeError("boom")

    @subscriber(InboxQueue(row, "jobs").on_failure(FAIL_FAST))
    async def handle(job: Job) -> None:
        raise boom

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        with pytest.raises(
            HandlerFailed,
            match=r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$",
        ) as failed:
            await app.serve()
    assert failed.value.__cause__ is boom
    # The delivery was dropped: the row is back at once, its attempt counted.
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(1, 2, None)]


@pytest.mark.parametrize("row", JOB_FORMS)
@pytest.mark.parametrize("returned", ["ack", [HandlerOutcome.ack()], 0])
async def test_a_result_that_is_not_an_outcome_is_a_handler_failure(
    db: Db, row: type[Inbox[Any, Any]], returned: object
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "jobs").on_failure(FAIL_FAST))
    async def handle(job: Job) -> Any:
        return returned

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        with pytest.raises(HandlerFailed) as failed:
            await app.serve()
    cause = failed.value.__cause__
    assert isinstance(cause, TypeError)
    found = type(returned).__name__
    assert re.fullmatch(
        re.escape(f"{where(handle)}: a handler returns a HandlerOutcome or None, found {found}"),
        str(cause),
    )
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(1, 2, None)]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_a_result_that_is_not_an_outcome_follows_the_failure_policy(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    broker = db.broker(poll_interval=HOUR)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "jobs"))  # the default policy retries
    async def handle(job: Job, attempt: keys.Attempt) -> Any:
        attempts.append(attempt)
        return "ack" if attempt == 1 else None

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(2)
    assert attempts == [1, 2]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_a_batch_result_of_the_wrong_length_is_a_handler_failure(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}', b'{"n": 2}'])
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "jobs").batch(4).on_failure(FAIL_FAST))
    async def handle(jobs: list[Job]) -> list[HandlerOutcome]:
        return [HandlerOutcome.ack()]

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        with pytest.raises(HandlerFailed) as failed:
            await app.serve()
    cause = failed.value.__cause__
    assert isinstance(cause, TypeError)
    assert re.fullmatch(
        re.escape(
            f"{where(handle)}: a batch handler returns one outcome per row, found 1 for 2 rows"
        ),
        str(cause),
    )
    # Neither row was settled: both are back, attempts counted.
    assert db.rows("SELECT id, attempt, locked_until FROM jobs ORDER BY id") == [
        (1, 2, None),
        (2, 2, None),
    ]
