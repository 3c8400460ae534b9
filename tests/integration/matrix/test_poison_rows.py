"""Poison rows (issue 12, item 5; issue 17, item 1): a handler that kills its process (a
segfault, the OOM killer, ``os._exit``) settles nothing. Where the claim counts the attempt in
a commit of its own — the lease and advisory forms, and the row lock form with
``InboxQueue.count_attempt_at_claim()`` — the runtime moves a row claimed past
``max_attempts`` to its dead letter without running the handler, so it leaves after
``max_attempts`` process deaths; in a FIFO group the group then flows. The plain row lock form
rolls the attempt back with the death, for ever. Real processes, killed by ``os._exit``: the
worker is ``python -m tests.integration.matrix.poison_process``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

import trinbox
from trinbox import (
    Attempt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Payload,
    ProcessedAt,
    RepeatableRead,
    RetryAfter,
    RowLock,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox.errors import DeclarationError
from trinbox.schema import ddl
from trinbox.testing import settled

from ..serving import make_app, serving
from ..stands import MariaStand, PostgresStand, Stand, fresh_stand
from .kit import DUE, insert_rows, native
from .poison_process import DIED, FIFO_DEAD, MAX_ATTEMPTS
from .schema import (
    EMAIL_JOBS,
    PLAIN_JOBS,
    LeasedPlain,
    RowLockedFinished,
    RowLockedPlain,
)
from .test_fifo import GROUP, TABLE, LedgerLease

ROOT = Path(trinbox.__file__).resolve().parents[1]


def _stand(name: str, tmp_path: Path) -> Iterator[Stand]:
    with fresh_stand(name, tmp_path) as found:  # type: ignore[arg-type]
        found.script(EMAIL_JOBS[found.name])
        found.script(PLAIN_JOBS[found.name])
        yield found


@pytest.fixture(params=["postgres", "mariadb"])
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    """A stand with the row lock form."""
    yield from _stand(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def any_stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    yield from _stand(request.param, tmp_path)


@dataclass
class Job:
    n: int


@dataclass
class Run:
    """What one worker process did: the attempts its handler was handed the poison row at
    (one at most: it died there), and, had it lived, its last line (statistics, entries)."""

    attempts: list[int]
    last: dict[str, Any] | None


async def run_poisoned(stand: Stand, form: str) -> Run:
    """One worker process serving until its handler kills it or its rows are gone."""
    command = [
        sys.executable,
        "-m",
        "tests.integration.matrix.poison_process",
        stand.name,
        stand.url,
        form,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with trio.fail_after(60):
        done = await trio.run_process(
            command, cwd=ROOT, env=env, check=False, capture_stdout=True, capture_stderr=True
        )
    assert done.returncode in (0, DIED), done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    attempts = [line["attempt"] for line in lines if "attempt" in line]
    if done.returncode == DIED:
        assert len(attempts) == 1, lines
        return Run(attempts, None)
    assert attempts == [], lines
    return Run([], lines[-1])


def publish_one(stand: Stand) -> None:
    insert_rows(stand, "plain_jobs", [{"tenant": "t1", "payload": json.dumps({"n": 0}).encode()}])


async def test_without_the_opt_in_a_process_death_leaves_the_attempt_uncounted(
    stand: Stand,
) -> None:
    publish_one(stand)
    for _ in range(MAX_ATTEMPTS + 1):
        assert (await run_poisoned(stand, "row_lock")).attempts == [1]
        # Today's behaviour: the death rolled the delivery back, attempt and all.
        assert stand.rows("SELECT attempt FROM plain_jobs") == [(1,)]
    assert stand.rows("SELECT id FROM plain_jobs_dead") == []


async def process_deaths_reach_the_dead_letter(stand: Stand, form: str) -> None:
    publish_one(stand)
    for deaths in range(1, MAX_ATTEMPTS + 1):
        assert (await run_poisoned(stand, form)).attempts == [deaths]
        # Each claim counted its attempt in a commit of its own: the death left it standing.
        assert stand.rows("SELECT attempt FROM plain_jobs") == [(1 + deaths,)]
    # The next claim reports the attempts spent: the row moves instead of being handed out,
    # through the runtime's dead letter step, counted in its statistics; no handler ran.
    run = await run_poisoned(stand, form)
    assert run.last == {"acked": 0, "dead_lettered": 1, "handled": []}
    assert stand.rows("SELECT id FROM plain_jobs") == []
    # That claim counted too: the column counts claims, one ahead of the deliveries.
    assert stand.rows("SELECT id, attempt, tenant FROM plain_jobs_dead") == [
        (1, MAX_ATTEMPTS + 2, "t1")
    ]


async def test_with_the_opt_in_process_deaths_reach_the_dead_letter(stand: Stand) -> None:
    await process_deaths_reach_the_dead_letter(stand, "row_lock_counted")


@pytest.mark.parametrize("form", ["lease", "advisory"])
async def test_process_deaths_reach_the_dead_letter(any_stand: Stand, form: str) -> None:
    await process_deaths_reach_the_dead_letter(any_stand, form)


async def test_a_fifo_groups_poison_head_leaves_and_the_group_flows(any_stand: Stand) -> None:
    dialect = "mysql" if any_stand.name == "mariadb" else any_stand.name
    any_stand.script(";\n".join(ddl(LedgerLease, dialect)))
    insert_rows(
        any_stand,
        TABLE,
        [
            {
                "account": GROUP,
                "priority": 0,
                "retry_after": DUE,
                "payload": json.dumps({"n": n}).encode(),
            }
            for n in range(3)
        ],
    )
    # The head (entry 0) kills each process it is handed to; nothing behind it is claimed
    # while it is in work or leased by a dead process.
    for deaths in range(1, MAX_ATTEMPTS + 1):
        assert (await run_poisoned(any_stand, "fifo_lease")).attempts == [deaths]
    run = await run_poisoned(any_stand, "fifo_lease")
    # The spent head moved to its dead letter group without its handler; the group flowed.
    assert run.last == {"acked": 2, "dead_lettered": 1, "handled": [1, 2]}
    assert any_stand.rows(f"SELECT account, attempt FROM {TABLE}") == [
        (FIFO_DEAD, MAX_ATTEMPTS + 2)
    ]


async def test_with_the_opt_in_an_ack_reports_the_first_attempt(stand: Stand) -> None:
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(RowLockedFinished, "emails").count_attempt_at_claim())
    async def send(job: Job, attempt: keys.Attempt) -> None:
        attempts.append(attempt)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(RowLockedFinished, Job(1), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert attempts == [1]
    rows = stand.rows("SELECT attempt, processed_at IS NOT NULL FROM email_jobs")
    assert [(attempt, bool(done)) for attempt, done in rows] == [(2, True)]


async def test_with_the_opt_in_a_retry_counts_once(stand: Stand) -> None:
    broker = stand.broker(poll_interval=0.05)
    attempts: list[int] = []

    @subscriber(InboxQueue(RowLockedFinished, "emails").count_attempt_at_claim())
    async def send(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        if attempt == 1:
            return HandlerOutcome.retry()
        if attempt == 2:
            return HandlerOutcome.retry_after(timedelta(0))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(RowLockedFinished, Job(1), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 3)
    assert attempts == [1, 2, 3]
    # Three claims counted three attempts: neither retry counted another.
    assert stand.rows("SELECT attempt FROM email_jobs") == [(4,)]


async def test_with_the_opt_in_retries_reach_the_dead_letter_at_the_cap(stand: Stand) -> None:
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(RowLockedPlain, "jobs").count_attempt_at_claim())
    async def work(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, work).max_attempts(3).dead_letter("plain_jobs_dead")
    async with serving(app):
        await broker.publish(RowLockedPlain, Job(1), tenant="t1")
        with trio.fail_after(10):
            await settled(app, work, 3)
    assert attempts == [1, 2, 3]
    assert stand.rows("SELECT id FROM plain_jobs") == []
    # Counted at each claim, as the lease form counts: one ahead of the deliveries.
    assert stand.rows("SELECT id, attempt FROM plain_jobs_dead") == [(1, 4)]


class UncountedPlain(Inbox[RowLock], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    payload: Annotated[bytes, Payload()]


class FifoPlain(Inbox[RowLock], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    tenant: Annotated[str, Group(fifo=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


def test_the_opt_in_needs_a_row_lock_table_with_an_attempt() -> None:
    with pytest.raises(DeclarationError, match=r"found an Inbox\[Lease\] table"):
        InboxQueue(LeasedPlain, "jobs").count_attempt_at_claim()
    with pytest.raises(DeclarationError, match="found a row lock table with no Attempt field"):
        InboxQueue(UncountedPlain, "jobs").count_attempt_at_claim()
    # A FIFO group's guard is held by the claim's transaction, which the count commits.
    with pytest.raises(DeclarationError, match=r"found Group\(fifo=True\); declare the FIFO"):
        InboxQueue(FifoPlain, "t1").count_attempt_at_claim()


class RepeatableRowLockedFinished(Inbox[RowLock, RepeatableRead], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


@pytest.mark.parametrize("row", [RowLockedFinished, RepeatableRowLockedFinished])
async def test_with_the_opt_in_four_workers_take_each_row_once(
    stand: Stand, row: type[RowLockedFinished]
) -> None:
    # Four claims at once, each taking the guard before its transaction begins: at REPEATABLE
    # READ too, a claim's snapshot is taken after its wait, and a settling worker commits
    # before it claims again (a snapshot older than the others' acks would fail its select).
    broker = stand.broker(poll_interval=0.05)
    handled: list[tuple[int, int]] = []

    @subscriber(InboxQueue(row, "emails").workers(4).count_attempt_at_claim())
    async def send(job: Job, attempt: keys.Attempt) -> None:
        handled.append((job.n, attempt))
        await trio.lowlevel.checkpoint()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for n in range(20):
            await broker.publish(row, Job(n), name="emails", customer="c1")
        with trio.fail_after(20):
            await settled(app, send, 20)
    assert sorted(handled) == [(n, 1) for n in range(20)]
    stats = app.statistics(send)
    assert (stats.acked, stats.released) == (20, 0)
    rows = stand.rows("SELECT attempt, processed_at IS NOT NULL FROM email_jobs")
    assert sorted((attempt, bool(done)) for attempt, done in rows) == [(2, True)] * 20


async def test_with_the_opt_in_a_transactional_retry_discards_the_handlers_writes(
    stand: Stand,
) -> None:
    broker = stand.broker(poll_interval=0.05)
    write = native(stand.name, "UPDATE email_jobs SET customer = ?")

    @subscriber(InboxQueue(RowLockedFinished, "emails").transactional().count_attempt_at_claim())
    async def send(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome:
        await tx.execute(write, f"attempt {attempt}")
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(RowLockedFinished, Job(1), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 2)
    rows = stand.rows("SELECT customer, attempt, processed_at IS NOT NULL FROM email_jobs")
    assert [(customer, attempt, bool(done)) for customer, attempt, done in rows] == [
        ("attempt 2", 3, True)
    ]


async def test_with_the_opt_in_a_batch_counts_each_row_once(stand: Stand) -> None:
    broker = stand.broker(poll_interval=0.05)
    batches: list[list[int]] = []
    seen: set[int] = set()

    @subscriber(InboxQueue(RowLockedFinished, "emails").batch(4).count_attempt_at_claim())
    async def send(jobs: list[Job]) -> list[HandlerOutcome]:
        batches.append([job.n for job in jobs])
        # Every row is retried once, then acked.
        outcomes = [HandlerOutcome.ack() if j.n in seen else HandlerOutcome.retry() for j in jobs]
        seen.update(job.n for job in jobs)
        return outcomes

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for n in range(8):
            await broker.publish(RowLockedFinished, Job(n), name="emails", customer="c1")
        with trio.fail_after(20):
            await settled(app, send, 16)
    assert sorted(n for batch in batches for n in batch) == sorted([*range(8), *range(8)])
    rows = stand.rows("SELECT attempt, processed_at IS NOT NULL FROM email_jobs")
    assert sorted((attempt, bool(done)) for attempt, done in rows) == [(3, True)] * 8


# The queue's guard as the count at claim names it (trinbox/_forms/rowlock.py), taken by the test.
GUARD = {
    "postgres": "SELECT 1 FROM pg_advisory_lock(hashtextextended(%s, 0))",
    "mariadb": "SELECT GET_LOCK(SHA2(CONCAT_WS('.', DATABASE(), %s), 256), 0)",
}
# Sessions of the stand's database waiting for a session lock.
GUARD_WAITERS = {
    "postgres": "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
    "WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()",
    "mariadb": "SELECT count(*) FROM information_schema.PROCESSLIST "
    "WHERE DB = DATABASE() AND STATE = 'User lock'",
}


@contextmanager
def guard_held(stand: Stand, key: str) -> Iterator[None]:
    """Hold the guard named ``key`` in a session of the test's own until the block ends."""
    assert isinstance(stand, PostgresStand | MariaStand)
    conn = stand._connect()
    try:
        cur = conn.cursor()
        cur.execute(GUARD[stand.name], (key,))
        assert [tuple(row) for row in cur.fetchall()] == [(1,)]
        yield
    finally:
        conn.close()


async def test_with_the_opt_in_a_claim_waits_for_the_guard(stand: Stand) -> None:
    # The guard keeps every other counting claim of the queue out of the gap between a
    # claim's count and its relock: a claim that does not wait for it (MariaDB took no lock
    # at GET_LOCK's timeout -1) counts rows that another claim counted already.
    broker = stand.broker(poll_interval=0.05)
    handled: list[int] = []

    @subscriber(InboxQueue(RowLockedFinished, "emails").count_attempt_at_claim())
    async def send(job: Job) -> None:
        handled.append(job.n)

    app = make_app()
    app.include(broker, send)
    key = f"trinbox-count:{spec_of(RowLockedFinished).qualified_name}:emails"
    async with serving(app):
        with guard_held(stand, key):
            await broker.publish(RowLockedFinished, Job(1), name="emails", customer="c1")
            with trio.fail_after(10):
                # A poll: a session waiting for a lock signals nothing a test could await.
                while stand.value(GUARD_WAITERS[stand.name]) == 0:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            # The claim waits before it selects: nothing handled, nothing counted.
            assert handled == []
            assert stand.rows("SELECT attempt FROM email_jobs") == [(1,)]
        # The guard let go, the claim goes on.
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert handled == [1]
    assert stand.rows("SELECT attempt FROM email_jobs") == [(2,)]
