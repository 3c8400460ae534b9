"""A drop is one bound, counted from the drop (issue 8, item 3): the deliveries of a batch that
shutdown releases on a server that does not answer are released side by side, so serve returns
about RELEASE seconds after the grace period, not RELEASE seconds per row. A claim in flight as
its subscription stops has RELEASE left, and cut then, it is released as a drop is: RELEASE
more for its clean-ups, not what its own bound had left (issue 17, item 6). Real time: the
server's lock waits are real."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import trio

from trinbox import InboxQueue, subscriber
from trinbox._bounds import CLEANUP, RELEASE

from ..relay import relay
from ..serving import make_app
from .conftest import Case
from .kit import HOUR, cells, insert_emails

ROWS = 20
GRACE = 0.2


@dataclass
class Job:
    n: int


@cells(stands=["postgres", "mariadb"], forms=["lease"])
async def test_a_batch_released_on_a_hung_server_takes_one_bound_not_one_per_row(
    case: Case,
) -> None:
    insert_emails(case.stand, [json.dumps({"n": n}).encode() for n in range(ROWS)])
    in_work = trio.Event()

    @subscriber(InboxQueue(case.email, "emails").batch(ROWS))
    async def handle(jobs: list[Job]) -> None:
        in_work.set()
        await trio.sleep_forever()

    app = make_app(grace=GRACE)
    app.include(case.stand.broker(lease=HOUR), handle)
    holder = case.stand._connect()  # type: ignore[attr-defined]
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            with trio.fail_after(10):
                await in_work.wait()
            # Another session now holds every row's lock: each lease release waits on it.
            cur = holder.cursor()
            cur.execute("BEGIN")
            cur.execute("UPDATE email_jobs SET customer = customer")
            stopped = time.monotonic()
            app.shutdown()
        took = time.monotonic() - stopped
    finally:
        holder.rollback()
        holder.close()
    # Grace, then one release bound for all twenty rows (each alone would take RELEASE).
    assert RELEASE - 0.5 < took < GRACE + RELEASE + 2.5, took


@cells(stands=["postgres", "mariadb"], forms=["lease"])
async def test_a_claim_cut_at_shutdown_on_a_server_that_stopped_answering_is_released_as_a_drop(
    case: Case,
) -> None:
    """The claim in flight as shutdown begins has RELEASE left; cut then, its clean-up (a
    rollback that waits for the server to acknowledge the cut statement, a KILL from a new
    connection) has RELEASE more, as a drop's release, not the rest of the claim's own bound
    of CLAIM (60 s)."""

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        raise AssertionError("the queue is empty")

    app = make_app(grace=GRACE)
    async with relay(case.stand.url) as server:
        app.include(case.stand.broker(url=server.url), handle)
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            server.freeze()
            with trio.fail_after(10):
                await server.wait_held()  # a claim now waits for a server that does not answer
            stopped = time.monotonic()
            app.shutdown()
        took = time.monotonic() - stopped
    # The claim is cut RELEASE after the stop, its clean-up RELEASE later (the server never
    # answers it); closing the pool's idle connections takes one CLEANUP more at most.
    assert 2 * RELEASE - 0.5 < took < 2 * RELEASE + CLEANUP + 2.5, took
