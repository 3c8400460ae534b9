"""Every way a handler ends leaves its row claimable again, and ``serve`` raises what went wrong
as itself (issue 8, items 2, 5 and 9): a return, an exception, ``KeyboardInterrupt`` and
``SystemExit``, a cancel that leaves the handler's own nursery as an exception group, a
``Cancelled`` re-raised outside the scope that caught it; a cancel of ``serve`` from outside is
the graceful shutdown ``app.shutdown()`` is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.lowlevel

from trinbox import App, HandlerOutcome, InboxQueue, subscriber
from trinbox._engine.claim_state import ClaimState
from trinbox._engine.steps import StepRules
from trinbox._holders._base import Delivery, Step
from trinbox.errors import SchemaError
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells, insert_emails


@dataclass
class Job:
    n: int


def add_rows(case: Case, count: int) -> None:
    insert_emails(case.stand, [json.dumps({"n": n}).encode() for n in range(count)])


def app_on(case: Case, handler: Any, *, grace: float = 5.0) -> App:
    app = make_app(grace=grace)
    # A lease of an hour: a lease left behind never ends within a test, even in virtual time.
    app.include(case.stand.broker(lease=HOUR), handler)
    return app


async def delivered_again(case: Case, count: int) -> list[int]:
    """A new app in this process takes every row again, at once: nothing held them."""
    seen: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").workers(2))
    async def again(job: Job) -> HandlerOutcome:
        seen.append(job.n)
        return HandlerOutcome.ack()

    app = app_on(case, again)
    with trio.fail_after(10):
        async with serving(app):
            await settled(app, again, count)
    return sorted(seen)


def rows_left(case: Case) -> int:
    return int(case.stand.value("SELECT count(*) FROM email_jobs"))


@cells()
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
async def test_a_base_exception_from_a_handler_releases_its_row_and_is_raised_alone(
    case: Case, clock: VirtualClock, raised: type[BaseException]
) -> None:
    add_rows(case, 1)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        await trio.lowlevel.checkpoint()
        raise raised

    app = app_on(case, handle)
    # Not BaseExceptionGroup([KeyboardInterrupt()]): what a caller of trio.run(app.serve) sees.
    with trio.fail_after(10), pytest.raises(raised) as caught:
        await app.serve()
    assert type(caught.value) is raised
    assert rows_left(case) == 1
    assert await delivered_again(case, 1) == [0]


@cells()
async def test_a_handler_whose_own_nursery_is_cancelled_at_the_grace_deadline_releases_its_row(
    case: Case, clock: VirtualClock
) -> None:
    add_rows(case, 1)
    started = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        # The cancel at the grace deadline leaves this nursery as a BaseExceptionGroup.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(trio.sleep_forever)
            started.set()
        return HandlerOutcome.ack()

    app = app_on(case, handle, grace=0.5)
    with trio.fail_after(20):
        async with serving(app):
            await started.wait()
    assert app.report is not None and app.report.locks_released == 1
    assert rows_left(case) == 1
    assert await delivered_again(case, 1) == [0]


@cells()
async def test_a_cancelled_re_raised_outside_its_scope_is_a_failure_and_serving_goes_on(
    case: Case, clock: VirtualClock
) -> None:
    add_rows(case, 2)
    attempts: list[tuple[int, int]] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        attempts.append((job.n, len(attempts)))
        if len([a for a in attempts if a[0] == job.n]) == 1:
            caught: trio.Cancelled | None = None
            with trio.move_on_after(0.01):
                try:
                    await trio.sleep_forever()
                except trio.Cancelled as exc:
                    caught = exc
                    raise
            assert caught is not None
            raise caught  # a Cancelled no scope of trinbox's sent
        return HandlerOutcome.ack()

    app = app_on(case, handle)
    with trio.fail_after(20):
        async with serving(app):
            await settled(app, handle, 4)
    assert sorted(n for n, _ in attempts) == [0, 0, 1, 1]
    assert rows_left(case) == 0


@cells()
async def test_cancelling_serve_from_outside_is_a_graceful_shutdown(
    case: Case, clock: VirtualClock
) -> None:
    add_rows(case, 3)
    in_work = trio.Event()
    finish = trio.Event()
    handled: list[int] = []
    claims_after_cancel: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        if finish.is_set():
            claims_after_cancel.append(job.n)
        in_work.set()
        await finish.wait()  # the grace period lets it finish
        handled.append(job.n)
        return HandlerOutcome.ack()

    app = app_on(case, handle, grace=30.0)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def serve() -> None:
                with scope:
                    await app.serve()

            nursery.start_soon(serve)
            await in_work.wait()
            scope.cancel()
            await trio.sleep(1)  # in virtual time: claiming has stopped, the handler waits
            finish.set()
    # The row in work was acked in its grace period; no row was claimed after the cancel.
    assert handled == [0]
    assert claims_after_cancel == []
    assert rows_left(case) == 2
    assert await delivered_again(case, 2) == [1, 2]


@cells(forms=["lease"])
async def test_a_startup_failure_is_raised_alone(case: Case, clock: VirtualClock) -> None:
    case.stand.script("DROP TABLE email_jobs")

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        pass

    app = app_on(case, handle)
    with trio.fail_after(10), pytest.raises(SchemaError):
        await app.serve()


@cells(stands=["sqlite"], forms=["lease"])
async def test_settlement_errors_are_counted_and_the_last_ten_kept(
    case: Case, clock: VirtualClock
) -> None:
    add_rows(case, 12)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        # Another claim took the row: the lease is gone, and so is the ack's effect.
        case.stand.execute(
            "UPDATE email_jobs SET locked_until = NULL WHERE payload = ?",
            json.dumps({"n": job.n}).encode(),
        )
        case.stand.execute(
            "DELETE FROM email_jobs WHERE payload = ?", json.dumps({"n": job.n}).encode()
        )
        return HandlerOutcome.ack()

    app = app_on(case, handle)
    with trio.fail_after(20):
        async with serving(app):
            await settled(app, handle, 12)
            stats = app.statistics(handle)
            assert stats.settle_failures == 12
            assert len(stats.settle_errors) == 10


@cells(stands=["sqlite"], forms=["lease"])
async def test_a_crash_of_the_claim_loop_ends_serve_with_its_error(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_rows(case, 1)

    def crash(state: ClaimState, deliveries: object, *, started: float) -> None:
        raise RuntimeError("a bug in trinbox")

    monkeypatch.setattr(ClaimState, "after_claim", crash)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        pass

    app = app_on(case, handle)
    with trio.fail_after(10), pytest.raises(RuntimeError, match="a bug in trinbox"):
        await app.serve()
    # The claim's row was released, not lost with the crash.
    monkeypatch.undo()
    assert await delivered_again(case, 1) == [0]


def _step_crashes_for_row_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect of trinbox's own in a handler task: the step of row 0's outcome raises (the
    only way to crash trinbox's code there on purpose; a user's code cannot)."""
    original = StepRules.step

    def step(rules: StepRules, delivery: Delivery, outcome: HandlerOutcome) -> Step:
        payload = delivery.values["payload"]
        assert isinstance(payload, bytes | memoryview)
        if json.loads(bytes(payload))["n"] == 0:
            raise RuntimeError("a bug in trinbox")
        return original(rules, delivery, outcome)

    monkeypatch.setattr(StepRules, "step", step)


@cells()
@pytest.mark.parametrize("crash", ["trinbox", "KeyboardInterrupt"])
async def test_a_crashed_handler_task_stops_claiming_at_once(
    case: Case, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    # Row 0's task ends with an exception that ends serve, while row 1's handler takes half a
    # second to leave (shielded): during that unwind no row is claimed, so none has an
    # attempt counted and dropped unseen. Real time: a claim loop that claims and drops rows
    # through the unwind never lets a virtual clock reach the end of the shielded sleep.
    add_rows(case, 5)
    one_in_work = trio.Event()
    late: list[int] = []
    if crash == "trinbox":
        _step_crashes_for_row_zero(monkeypatch)

    @subscriber(InboxQueue(case.email, "emails").workers(2))
    async def handle(job: Job) -> None:
        if job.n == 0:
            await one_in_work.wait()
            if crash == "KeyboardInterrupt":
                raise KeyboardInterrupt
        elif job.n == 1:
            one_in_work.set()
            with trio.CancelScope(shield=True):
                await trio.sleep(0.5)
        else:
            late.append(job.n)

    app = app_on(case, handle)
    raised = RuntimeError if crash == "trinbox" else KeyboardInterrupt
    with trio.fail_after(30), pytest.raises(raised):
        await app.serve()
    assert late == []
    assert app.statistics(handle).claimed == 2
    # Rows 2 to 4 were never claimed: no attempt counted.
    attempts = case.stand.rows("SELECT attempt FROM email_jobs ORDER BY job_id")
    assert attempts[-3:] == [(1,)] * 3
    monkeypatch.undo()
    # Row 1's handler returned within the unwind and was acked; row 0 was released, not lost
    # with the crash.
    assert await delivered_again(case, 4) == [0, 2, 3, 4]
