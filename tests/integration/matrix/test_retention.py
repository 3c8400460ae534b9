"""Retention on every stand and form (issue 21, item 4): ``.retain(processed=...,
dead_letters=...)`` deletes a mount's finished rows and its dead letters once older than
their age, by a loop in ``serve``'s nursery on the broker's clock (virtual time here), a
batch a statement; a row finished just now and an unfinished row are never deleted, and
the rows pruned are counted in the statistics. Dead letters are aged by their
``DeadLetteredAt`` field, which the move into the dead letter group or table writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

import trio

from trinbox import (
    Advisory,
    Attempt,
    DeadLetteredAt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Message,
    OriginGroup,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
    subscriber,
)
from trinbox._dialects.retention import RETAIN_BATCH
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, stored

EVERY = timedelta(minutes=10)
POLL = 3600.0  # a publish wakes the claim; virtual days pass in a few polls
DAY = 24 * HOUR


@dataclass
class Job:
    n: int


class RowLockedJob(Inbox[RowLock], table="kept_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class LeasedJob(Inbox[Lease], table="kept_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class LockedJob(Inbox[Advisory], table="kept_jobs", advisory_lock="kept-{id}"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class RowLockedPlainJob(Inbox[RowLock], table="kept_plain"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class LeasedPlainJob(Inbox[Lease], table="kept_plain"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class LockedPlainJob(Inbox[Advisory], table="kept_plain", advisory_lock="kept-plain-{id}"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


GROUPED: dict[str, type[Any]] = {
    "row_lock": RowLockedJob,
    "lease": LeasedJob,
    "advisory": LockedJob,
}
PLAIN: dict[str, type[Any]] = {
    "row_lock": RowLockedPlainJob,
    "lease": LeasedPlainJob,
    "advisory": LockedPlainJob,
}


def ids(case: Case, table: str) -> list[int]:
    return sorted(int(r[0]) for r in case.stand.rows(f"SELECT id FROM {table}"))


async def test_finished_rows_and_dead_letters_of_a_group_go_by_age(
    case: Case, clock: VirtualClock
) -> None:
    """1 is acked, 2 dead-lettered into the group, 3 due in ten days (unfinished): after an
    hour and a pass the finished row goes, after a day the dead letter, never 3."""
    broker = case.stand.broker(poll_interval=POLL)
    row = GROUPED[case.form]

    @subscriber(InboxQueue(row, "jobs"))
    async def work(job: Job) -> HandlerOutcome:
        return HandlerOutcome.ack() if job.n == 1 else HandlerOutcome.retry()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, work).max_attempts(1).dead_letter("jobs.dead").retain(
        processed=timedelta(hours=1), dead_letters=timedelta(days=1), every=EVERY
    )
    async with serving(app):
        await broker.publish(row, Job(1), id=1, queue="jobs")
        await broker.publish(row, Job(2), id=2, queue="jobs")
        await broker.publish(row, Job(3), id=3, queue="jobs", delay=timedelta(days=10))
        with trio.fail_after(HOUR):
            await settled(app, work, 2)
        dead_at = case.stand.value("SELECT dead_at FROM kept_jobs WHERE id = 2")
        assert dead_at is not None  # the move wrote it
        assert case.stand.value("SELECT dead_at FROM kept_jobs WHERE id = 1") is None
        await trio.sleep(2 * EVERY.total_seconds())  # passes ran: all finished only now
        assert ids(case, "kept_jobs") == [1, 2, 3]
        assert app.statistics(work).pruned_processed == 0
        await trio.sleep(HOUR)
        assert ids(case, "kept_jobs") == [2, 3]
        stats = app.statistics(work)
        assert (stats.pruned_processed, stats.pruned_dead_letters) == (1, 0)
        await trio.sleep(DAY)
        assert ids(case, "kept_jobs") == [3]
        stats = app.statistics(work)
        assert (stats.pruned_processed, stats.pruned_dead_letters) == (1, 1)
    assert case.stand.value("SELECT processed_at FROM kept_jobs WHERE id = 3") is None


async def test_a_dead_letter_table_is_pruned_by_its_dead_lettered_at(
    case: Case, clock: VirtualClock
) -> None:
    """A row that waited two days in the queue before its one failed delivery is kept a day
    in the dead letter table from its move, not from its due time."""
    broker = case.stand.broker(poll_interval=POLL, lease=6 * HOUR)  # few extensions
    row = PLAIN[case.form]
    allow = trio.Event()

    @subscriber(InboxQueue(row, "plain"))
    async def work(job: Job) -> HandlerOutcome:
        await allow.wait()
        return HandlerOutcome.retry()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row, dead_letter="kept_plain_dead"))
    app.include(broker, work).max_attempts(1).dead_letter("kept_plain_dead").retain(
        dead_letters=timedelta(days=1), every=EVERY
    )
    async with serving(app):
        await broker.publish(row, Job(1), id=1)
        await trio.sleep(2 * DAY)  # in work all along: held, not finished
        assert ids(case, "kept_plain") == [1]
        allow.set()
        with trio.fail_after(HOUR):
            await settled(app, work, 1)
        assert ids(case, "kept_plain_dead") == [1]
        await trio.sleep(HOUR)
        assert ids(case, "kept_plain_dead") == [1]
        await trio.sleep(DAY)
        assert ids(case, "kept_plain_dead") == []
        assert app.statistics(work).pruned_dead_letters == 1


async def test_a_backlog_is_pruned_a_batch_a_statement(case: Case, clock: VirtualClock) -> None:
    """Rows finished long ago, more than two batches of them: one pass deletes them all, a
    batch a statement, and the unfinished rows among them stay."""
    broker = case.stand.broker(poll_interval=POLL)
    row = GROUPED[case.form]

    @subscriber(InboxQueue(row, "jobs"))
    async def work(job: Job) -> None:
        return None

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, work).retain(processed=timedelta(hours=1), every=EVERY)
    count = 2 * RETAIN_BATCH + 7
    async with serving(app):
        # In a group no one subscribes to, marked finished a week ago by hand but for the
        # last seven.
        items = [Message(Job(n), id=n + 1) for n in range(count)]
        await broker.publish_many(row, items, queue="elsewhere")
        stamp = stored(case.name, broker.clock() - timedelta(days=7))
        case.stand.execute("UPDATE kept_jobs SET processed_at = ? WHERE id <= ?", stamp, count - 7)
        await trio.sleep(EVERY.total_seconds() * 1.5)
        assert app.statistics(work).pruned_processed == count - 7
        assert case.stand.value("SELECT count(*) FROM kept_jobs") == 7
        assert case.stand.value("SELECT count(*) FROM kept_jobs WHERE processed_at IS NULL") == 7
