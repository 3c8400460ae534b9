"""Transactional mode on every stand and form (docs/reference.md#transactional-mode,
docs/reference.md#scenarios-transactional, isolation/repeatable_read).

On SQLite a delivery's transaction holds the single write lock from its first write until it
settles, so these subscriptions run one worker, and a handler that writes through the pool does
so before it writes through its transaction.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
import trio

from trinbox import FailurePolicy, HandlerOutcome, Inbox, InboxQueue, OnFailure, keys, subscriber
from trinbox.errors import IntegrityError, UnsupportedIsolation
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import HOUR, as_utc, cells, insert_emails, native
from .schema import (
    AUDIT,
    EMAIL_REFS,
    NEXT_JOBS,
    NextJob,
    RepeatableLeasedEmail,
    SerializableLeasedEmail,
)


@dataclass
class Job:
    n: int


def audit(stand: Stand) -> list[object]:
    return [note for (note,) in stand.rows("SELECT note FROM audit ORDER BY id")]


def with_audit(case: Case, *payloads: bytes) -> None:
    """The audit table, and one due email_jobs row per payload."""
    case.stand.script(AUDIT[case.name])
    insert_emails(case.stand, list(payloads))


async def test_ack_commits_the_handlers_writes_with_the_settlement(case: Case) -> None:
    with_audit(case, b'{"n": 1}')
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")
    seen_inside: list[object] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await tx.execute(insert, f"job {job.n}")
        seen_inside.append(await tx.fetchval("SELECT count(*) FROM audit"))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert seen_inside == [1]
    assert audit(case.stand) == ["job 1"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_retry_discards_the_writes_and_counts_the_attempt(case: Case) -> None:
    with_audit(case, b'{"n": 1}')
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        await tx.execute(insert, f"attempt {attempt}")
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 2)
    assert attempts == [1, 2]
    assert audit(case.stand) == ["attempt 2"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_retry_after_discards_the_writes_and_writes_retry_after(case: Case) -> None:
    with_audit(case, b'{"n": 1}')
    broker = case.stand.broker(poll_interval=HOUR)
    before: list[datetime] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        before.append(broker.clock())
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        return HandlerOutcome.retry_after(timedelta(hours=1))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
        after = broker.clock()
    assert audit(case.stand) == []
    [(attempt, locked_until, retry_after)] = case.stand.rows(
        "SELECT attempt, locked_until, retry_after FROM email_jobs"
    )
    # Every form counts the delayed delivery: at the claim, or when the delay settles.
    assert (attempt, locked_until) == (2, None)
    due = as_utc(retry_after)
    assert before[0] + timedelta(hours=1) <= due <= after + timedelta(hours=1)


async def test_a_task_written_through_tx_commits_only_with_the_ack(case: Case) -> None:
    case.stand.script(NEXT_JOBS[case.name])
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        await tx.publish(NextJob, Job(10 * attempt))
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 2)
    # The retried delivery's task is gone with its transaction; the acked one committed.
    payloads = [bytes(p) for (p,) in case.stand.rows("SELECT payload FROM next_jobs")]
    assert [json.loads(p) for p in payloads] == [{"n": 20}]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_pool_writes_commit_on_their_own_whatever_the_outcome(
    case: Case,
    clock: VirtualClock,  # the backoff between attempts passes in virtual time
) -> None:
    with_audit(case, b'{"n": 1}', b'{"n": 2}')
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(
        job: Job, tx: keys.Tx, pool: keys.Pool, attempt: keys.Attempt
    ) -> HandlerOutcome:
        # The pool writes first: on SQLite, once the transaction writes it holds the lock.
        await pool.execute(insert, f"pool {job.n}/{attempt}")
        await tx.execute(insert, f"tx {job.n}/{attempt}")
        if job.n == 1:
            return HandlerOutcome.drop()
        if attempt == 1:
            raise RuntimeError("boom")  # the default failure policy retries
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 3)
    # The drop and the failure discarded their transactions' writes; the pool's stand.
    assert sorted(map(str, audit(case.stand))) == ["pool 1/1", "pool 2/1", "pool 2/2", "tx 2/2"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_failed_settlement_rolls_back_the_handlers_writes(
    case: Case, clock: VirtualClock
) -> None:
    stand = case.stand
    with_audit(case, b'{"n": 1}')
    stand.script(EMAIL_REFS[case.name])
    stand.execute("INSERT INTO email_refs (job_id) VALUES (1)")  # the ack's DELETE fails
    broker = stand.broker(poll_interval=1, lease=2)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")
    attempts: list[int] = []
    seen_before: list[list[object]] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(
        job: Job, tx: keys.Tx, attempt: keys.Attempt, pool: keys.Pool
    ) -> HandlerOutcome:
        attempts.append(attempt)
        if len(attempts) > 1:
            seen_before.append(audit(stand))
            await pool.execute("DELETE FROM email_refs")
        await tx.execute(insert, f"delivery {len(attempts)}")
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(60):
            await settled(app, handle, 2)
        errors = list(app.statistics(handle).settle_errors)
    # The first ack failed: its audit row rolled back with it and the row came back (the
    # row lock form counted nothing: the whole claim rolled back).
    assert attempts == [1, 1] if case.form == "row_lock" else [1, 2]
    assert seen_before == [[]]
    assert [type(e) for e in errors] == [IntegrityError]
    assert audit(stand) == ["delivery 2"]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_handler_exception_never_commits_its_writes_even_when_skipped(case: Case) -> None:
    with_audit(case, b'{"n": 1}')
    broker = case.stand.broker(poll_interval=HOUR)
    wrote = trio.Event()
    skip = OnFailure(handler=FailurePolicy.SKIP)

    @subscriber(InboxQueue(case.email, "emails").transactional().on_failure(skip))
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        wrote.set()
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert wrote.is_set()
    assert audit(case.stand) == []
    assert case.stand.rows("SELECT * FROM email_jobs") == []  # SKIP finished the row


@cells(forms=["lease"], stands=["postgres"])
@pytest.mark.parametrize("row", [RepeatableLeasedEmail, SerializableLeasedEmail])
async def test_transactional_lease_table_above_read_committed_is_refused_on_postgres(
    case: Case, row: type[Inbox[Any, Any]]
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> None:
        pass

    app = make_app()
    level = row.__inbox_spec__.isolation.__name__
    expected = (
        f"{handle!r}: PostgreSQL runs a transactional lease handler at ReadCommitted (or "
        f"Default) only, found email_jobs ({row.__qualname__}) at {level} (the handler must "
        f"see the lease extensions committed after its transaction began); declare "
        f"Inbox[Lease, ReadCommitted], or drop .transactional()"
    )
    # Refused where it is mounted (mypy refuses the mount too: tests/typing/check_matrix.py).
    with pytest.raises(UnsupportedIsolation, match=f"^{re.escape(expected)}$"):
        app.include(broker, handle)
    assert app.mounts == ()


@cells(forms=["lease"], stands=["mariadb"])
@pytest.mark.parametrize("row", [RepeatableLeasedEmail, SerializableLeasedEmail])
async def test_transactional_lease_table_above_read_committed_serves_on_mariadb(
    case: Case, row: type[Inbox[Any, Any]]
) -> None:
    with_audit(case, b'{"n": 1}')
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert audit(case.stand) == ["written"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []
