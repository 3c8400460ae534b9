"""A cancel request lapses (``CancelRequests(expire_after=...)``), on every stand and form: a
request whose delivery ended before any watch read it (here the handler asked for a retry)
cancels no later delivery of its row once it has lapsed, and a new cancel of that row writes
a fresh request in its place, which reaches the handler. Without the lapse a request left
behind stayed for ever, cancelling whichever delivery of the row came next, and kept a new
request of the row from being written."""

from __future__ import annotations

from datetime import timedelta

import trio

from trinbox import CancelRequests, CancelResult, HandlerOutcome, InboxQueue, subscriber
from trinbox._drivers.aio import asyncio_loop
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR
from .test_cancel import KEPT, Job

LAPSING = CancelRequests("lapsing_cancels", expire_after=timedelta(hours=2))


async def test_a_lapsed_request_cancels_no_later_delivery_and_gives_way_to_a_new_one(
    case: Case, clock: VirtualClock
) -> None:
    kept = KEPT[case.form]
    # Watches read once an hour: the first request is written and its delivery ends
    # between two reads, so no watch ever sees it in time.
    worker = case.stand.broker(poll_interval=HOUR)
    worker.use_cancel_requests(LAPSING)
    admin = case.stand.broker(poll_interval=HOUR)
    admin.use_cancel_requests(LAPSING)
    entered = [trio.Event(), trio.Event()]
    go = trio.Event()
    survived = trio.Event()
    seen: list[str] = []

    @subscriber(InboxQueue(kept, "jobs"))
    async def keep(job: Job) -> HandlerOutcome:
        attempt = len(seen)
        seen.append(f"attempt {attempt + 1}")
        entered[min(attempt, 1)].set()
        if attempt == 0:
            await go.wait()
            return HandlerOutcome.retry_after(timedelta(hours=3))  # past the request's lapse
        # Held across two watch reads after the first request lapsed: nothing cancels it.
        await trio.sleep(2 * HOUR)
        survived.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append("cancelled")
            raise
        raise AssertionError("unreachable")

    app = make_app()
    app.on_startup(lambda: worker.create_tables(kept))
    app.on_startup(lambda: worker.create_tables(LAPSING))
    app.include(worker, keep)
    async with asyncio_loop(admin.needs_asyncio), serving(app):
        await admin.open()
        try:
            await worker.publish(kept, Job(1), id=1, queue="jobs")
            with trio.fail_after(10 * HOUR):
                await entered[0].wait()
                # Another process's handler: the request is written, and not read in time.
                assert await admin.cancel(kept, 1) is CancelResult.RUNNING
                go.set()
                await entered[1].wait()
                await survived.wait()
                lapsed = case.stand.value("SELECT count(*) FROM lapsing_cancels")
                assert await admin.cancel(kept, 1) is CancelResult.RUNNING
                await settled(app, keep, 2)
                done = await worker.wait(kept, 1)
            stats = app.statistics(keep)
            left = case.stand.value("SELECT count(*) FROM lapsing_cancels")
        finally:
            await admin.aclose()
    assert seen == ["attempt 1", "attempt 2", "cancelled"]
    assert lapsed == 1  # the first request stayed until the next one was written
    assert (done.outcome, done.result) == ("drop", None)
    assert (stats.retried_after, stats.cancelled, stats.cancel_requests_served) == (1, 1, 1)
    assert left == 0
