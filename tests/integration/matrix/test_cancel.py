"""``broker.cancel(Row, id)`` of a queued row on every stand and form (issue 21, item 1): a
queued row is settled as cancelled at once, as a drop settles it (stamped ProcessedAt with a
NULL Result, or deleted), and never claimed again; a row in work is left alone (``RUNNING``);
a finished row stays finished (``FINISHED``, or ``NOT_FOUND`` where the settlement deleted
it); an id no row has is ``NOT_FOUND``. A cancel racing the claims of a serving app leaves
every row either cancelled and never handled, or handled and finished as its handler said."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
    CancelResult,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    Result,
    RetryAfter,
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._drivers.aio import asyncio_loop
from trinbox._holders.sqlite_key import lock_path
from trinbox.errors import CancelRefused
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import SqliteStand
from .conftest import Case
from .kit import HOUR, cells
from .schema import AUDIT


@dataclass
class Job:
    n: int


class RowLockedJob(Inbox[RowLock], table="cancel_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    outcome: Annotated[int | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LeasedJob(Inbox[Lease], table="cancel_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    outcome: Annotated[int | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LockedJob(Inbox[Advisory], table="cancel_jobs", advisory_lock="cancel-{id}"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    outcome: Annotated[int | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class RowLockedPlain(Inbox[RowLock], table="cancel_plain"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


class LeasedPlain(Inbox[Lease], table="cancel_plain"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedPlain(Inbox[Advisory], table="cancel_plain", advisory_lock="plain-{id}"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


KEPT: dict[str, type[Any]] = {"row_lock": RowLockedJob, "lease": LeasedJob, "advisory": LockedJob}
"""Rows kept when they finish (ProcessedAt, a Result, a dead letter group)."""

DELETED: dict[str, type[Any]] = {
    "row_lock": RowLockedPlain,
    "lease": LeasedPlain,
    "advisory": LockedPlain,
}
"""Rows deleted when they finish."""


@asynccontextmanager
async def opened(broker: SqlBroker[Any], *rows: type[Any]) -> AsyncIterator[SqlBroker[Any]]:
    """``broker`` open with the tables of ``rows`` made, and no subscription: a caller of
    its own, as ``trinbox jobs`` is."""
    async with asyncio_loop(broker.needs_asyncio):
        await broker.open()
        try:
            for row in rows:
                await broker.create_tables(row)
            yield broker
        finally:
            await broker.aclose()


async def test_a_queued_row_is_cancelled_once_and_never_claimed(
    case: Case, clock: VirtualClock
) -> None:
    kept, deleted = KEPT[case.form], DELETED[case.form]
    async with opened(case.stand.broker(poll_interval=1), kept, deleted) as admin:
        for n in (1, 2, 3):
            await admin.publish(kept, Job(n), id=n, queue="jobs")
            await admin.publish(deleted, Job(n), id=n)
        await admin.publish(kept, Job(4), id=4, queue="jobs.dead")
        case.stand.execute("UPDATE cancel_jobs SET origin = 'jobs' WHERE id = 4")
        # Queued: settled now.
        assert await admin.cancel(kept, 1) is CancelResult.QUEUED
        assert await admin.cancel(deleted, 1) is CancelResult.QUEUED
        # Again: the kept row has finished, the deleted one is gone.
        assert await admin.cancel(kept, 1) is CancelResult.FINISHED
        assert await admin.cancel(deleted, 1) is CancelResult.NOT_FOUND
        # A dead letter (in its group) has finished for its queue, and stays as it is.
        assert await admin.cancel(kept, 4) is CancelResult.FINISHED
        assert await admin.cancel(kept, 99) is CancelResult.NOT_FOUND
        assert await admin.cancel(deleted, 99) is CancelResult.NOT_FOUND
        cancelled = await admin.wait(kept, 1)
    assert (cancelled.outcome, cancelled.result) == ("drop", None)
    rows = case.stand.rows("SELECT id, processed_at IS NULL, outcome IS NULL FROM cancel_jobs")
    assert {n: (bool(a), bool(b)) for n, a, b in rows} == {
        1: (False, True),
        2: (True, True),
        3: (True, True),
        4: (True, True),
    }
    assert sorted(r[0] for r in case.stand.rows("SELECT id FROM cancel_plain")) == [2, 3]

    broker = case.stand.broker(poll_interval=1)
    handled: list[tuple[str, int]] = []

    @subscriber(InboxQueue(kept, "jobs"))
    async def keep(job: Job) -> HandlerOutcome:
        handled.append(("kept", job.n))
        return HandlerOutcome.ack(job.n)

    @subscriber(InboxQueue(deleted, "plain"))
    async def delete(job: Job) -> None:
        handled.append(("deleted", job.n))

    app = make_app()
    app.include(broker, keep)
    app.include(broker, delete)
    async with serving(app):
        with trio.fail_after(HOUR):
            await settled(app, keep, 2)
            await settled(app, delete, 2)
    assert sorted(handled) == [("deleted", 2), ("deleted", 3), ("kept", 2), ("kept", 3)]


async def test_a_row_in_work_is_left_alone_and_finishes_as_its_handler_says(
    case: Case, clock: VirtualClock
) -> None:
    """A cancel from a broker whose process holds no handler of the row, and that writes no
    cancel requests (another process's): the row is in work, and left as it is."""
    kept, deleted = KEPT[case.form], DELETED[case.form]
    broker = case.stand.broker(poll_interval=1)
    entered = {"kept": trio.Event(), "deleted": trio.Event()}
    go = trio.Event()

    @subscriber(InboxQueue(kept, "jobs"))
    async def keep(job: Job) -> HandlerOutcome:
        entered["kept"].set()
        await go.wait()
        return HandlerOutcome.ack(job.n * 10)

    @subscriber(InboxQueue(deleted, "plain"))
    async def delete(job: Job) -> None:
        entered["deleted"].set()
        await go.wait()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(kept))
    app.on_startup(lambda: broker.create_tables(deleted))
    app.include(broker, keep)
    app.include(broker, delete)
    admin = case.stand.broker(poll_interval=1)
    async with asyncio_loop(admin.needs_asyncio), serving(app):
        await admin.open()
        await broker.publish(kept, Job(1), id=1, queue="jobs")
        await broker.publish(deleted, Job(1), id=1)
        with trio.fail_after(HOUR):
            for event in entered.values():
                await event.wait()
            # In work: the cancel changes nothing (it never waits on the handler's lock).
            assert await admin.cancel(kept, 1) is CancelResult.RUNNING
            assert await admin.cancel(deleted, 1) is CancelResult.RUNNING
            go.set()
            await settled(app, keep, 1)
            await settled(app, delete, 1)
            done = await broker.wait(kept, 1)
        # The handler's settlement stands: finished stays finished.
        assert await admin.cancel(kept, 1) is CancelResult.FINISHED
        assert await admin.cancel(deleted, 1) is CancelResult.NOT_FOUND
        await admin.aclose()
    assert (done.outcome, done.result) == ("ack", 10)


async def test_cancels_racing_the_claims_leave_each_row_cancelled_or_handled(
    case: Case, clock: VirtualClock
) -> None:
    """Every row is cancelled while queued (and never handled) or handled (its cancel found
    it in work or finished): never both, never neither. A cancel that found the handler in
    work here cancels it (its row settles as cancelled, with no result) unless the handler
    returned first."""
    kept = KEPT[case.form]
    count = 40
    broker = case.stand.broker(poll_interval=1)
    handled: list[int] = []

    @subscriber(InboxQueue(kept, "jobs").workers(4))
    async def keep(job: Job) -> HandlerOutcome:
        handled.append(job.n)
        await trio.lowlevel.checkpoint()
        return HandlerOutcome.ack(job.n)

    app = make_app()
    app.on_startup(lambda: broker.create_tables(kept))
    app.include(broker, keep)
    results: dict[int, CancelResult] = {}
    async with serving(app):
        for n in range(1, count + 1):
            await broker.publish(kept, Job(n), id=n, queue="jobs")

        async def cancel(n: int) -> None:
            results[n] = await broker.cancel(kept, n)

        with trio.fail_after(HOUR):
            async with trio.open_nursery() as nursery:
                for n in range(count, 0, -1):
                    nursery.start_soon(cancel, n)
            cancelled = {n for n, found in results.items() if found is CancelResult.QUEUED}
            await settled(app, keep, count - len(cancelled))
            outcomes = {n: (await broker.wait(kept, n)).result for n in range(1, count + 1)}
        stopped = app.statistics(keep).cancelled
    assert set(results.values()) <= {
        CancelResult.QUEUED,
        CancelResult.RUNNING,
        CancelResult.FINISHED,
    }
    assert sorted(handled) == sorted(set(range(1, count + 1)) - cancelled)
    running = {n for n, found in results.items() if found is CancelResult.RUNNING}
    assert {n: outcomes[n] for n in cancelled} == dict.fromkeys(cancelled)
    assert all(outcomes[n] == n for n in set(outcomes) - cancelled - running)
    assert all(outcomes[n] in (None, n) for n in running)
    # Each handler the cancel reached settled as cancelled, counted apart.
    assert stopped == sum(outcomes[n] is None for n in running)


async def test_a_handler_in_work_here_is_cancelled_and_its_row_settles_as_cancelled(
    case: Case, clock: VirtualClock
) -> None:
    """The handler sees ``trio.Cancelled``; the delivery settles as a drop settles it,
    counted as cancelled (not dropped, retried or released), its ``keys.Tx`` rolled back; the
    row is never handled again."""
    case.stand.script(AUDIT[case.name])
    kept = KEPT[case.form]
    broker = case.stand.broker(poll_interval=1)
    entered = trio.Event()
    seen: list[str] = []

    @subscriber(InboxQueue(kept, "jobs").transactional())
    async def keep(job: Job, tx: keys.Tx) -> HandlerOutcome:
        seen.append(f"start {job.n}")
        if job.n == 2:
            return HandlerOutcome.ack(2)
        await tx.execute("INSERT INTO audit (note) VALUES ('written')")
        entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append(f"cancelled {job.n}")
            raise
        raise AssertionError("unreachable")

    app = make_app()
    app.on_startup(lambda: broker.create_tables(kept))
    app.include(broker, keep)
    async with serving(app):
        await broker.publish(kept, Job(1), id=1, queue="jobs")
        with trio.fail_after(HOUR):
            await entered.wait()
            assert await broker.cancel(kept, 1) is CancelResult.RUNNING
            await settled(app, keep, 1)
            cancelled = await broker.wait(kept, 1)
            await broker.publish(kept, Job(2), id=2, queue="jobs")
            await settled(app, keep, 2)
        assert await broker.cancel(kept, 1) is CancelResult.FINISHED
        stats = app.statistics(keep)
    assert seen == ["start 1", "cancelled 1", "start 2"]
    assert (cancelled.outcome, cancelled.result) == ("drop", None)
    assert (stats.cancelled, stats.acked, stats.dropped, stats.retried, stats.released) == (
        1,
        1,
        0,
        0,
        0,
    )
    assert case.stand.rows("SELECT note FROM audit") == []
    attempt = case.stand.value("SELECT attempt FROM cancel_jobs WHERE id = 1")
    assert attempt == case.attempts_after(1)


@cells(forms=["lease"])
async def test_a_cancel_of_one_row_of_a_batch_in_work_is_refused(
    case: Case, clock: VirtualClock
) -> None:
    kept = KEPT[case.form]
    broker = case.stand.broker(poll_interval=1)
    entered = trio.Event()
    go = trio.Event()

    @subscriber(InboxQueue(kept, "jobs").batch(2))
    async def keep(jobs: list[Job]) -> list[HandlerOutcome]:
        entered.set()
        await go.wait()
        return [HandlerOutcome.ack(j.n) for j in jobs]

    app = make_app()
    app.on_startup(lambda: broker.create_tables(kept))
    app.include(broker, keep)
    async with serving(app):
        for n in (1, 2):
            await broker.publish(kept, Job(n), id=n, queue="jobs")
        with trio.fail_after(HOUR):
            await entered.wait()
            with pytest.raises(CancelRefused, match="batch delivery"):
                await broker.cancel(kept, 1)
            go.set()
            await settled(app, keep, 2)
            done = [(await broker.wait(kept, n)).result for n in (1, 2)]
    assert done == [1, 2]


@cells(forms=["lease", "advisory"])
async def test_a_shielded_handler_reads_the_request_and_is_cancelled_after(
    case: Case, clock: VirtualClock
) -> None:
    """``keys.CancelRequested`` turns true when the cancel reaches the call, inside a shielded
    block the cancel cannot enter; the next checkpoint outside it raises ``Cancelled``."""
    kept = KEPT[case.form]
    broker = case.stand.broker(poll_interval=1)
    entered = trio.Event()
    seen: list[object] = []

    @subscriber(InboxQueue(kept, "jobs"))
    async def keep(job: Job, requested: keys.CancelRequested) -> HandlerOutcome:
        seen.append(bool(requested))
        with trio.CancelScope(shield=True):
            entered.set()
            for _ in range(100):  # steps of work, each checked between
                await trio.sleep(1)
                if requested:
                    seen.append("finished the step")
                    break
        await trio.lowlevel.checkpoint()
        seen.append("unreachable")
        return HandlerOutcome.ack(1)

    app = make_app()
    app.on_startup(lambda: broker.create_tables(kept))
    app.include(broker, keep)
    async with serving(app):
        await broker.publish(kept, Job(1), id=1, queue="jobs")
        with trio.fail_after(HOUR):
            await entered.wait()
            assert await broker.cancel(kept, 1) is CancelResult.RUNNING
            await settled(app, keep, 1)
        stats = app.statistics(keep)
    assert seen == [False, "finished the step"]
    assert (stats.cancelled, stats.acked) == (1, 0)


@cells(forms=["advisory"], stands=["sqlite"])
async def test_sqlite_advisory_cancel_beside_another_serving_process_is_refused(
    case: Case, tmp_path: Path
) -> None:
    """The keys in work live in the serving process's memory: a cancel from another one
    cannot tell a queued row from one in work, and changes nothing."""
    kept = KEPT[case.form]
    assert isinstance(case.stand, SqliteStand)
    lock = lock_path(str(case.stand.path))
    holder = (
        "import fcntl, os, sys\n"
        f"fd = os.open({lock!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.ftruncate(fd, 0); os.pwrite(fd, b'4242\\n', 0)\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    other = subprocess.Popen(  # noqa: ASYNC220 - a process of the test's own, ended below
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "held\n"
        async with opened(case.stand.broker(poll_interval=1), kept) as admin:
            await admin.publish(kept, Job(1), id=1, queue="jobs")
            with pytest.raises(CancelRefused, match="found process 4242 serving"):
                await admin.cancel(kept, 1)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=30)
        if other.stdout is not None:
            other.stdout.close()
    assert case.stand.value("SELECT processed_at FROM cancel_jobs WHERE id = 1") is None
