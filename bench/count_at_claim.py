"""The cost of the row lock form's ``count_attempt_at_claim()``: drains of N pre-inserted no-op
jobs with ``workers(4)``, without and with the opt-in, interleaved over rounds (each round
runs both, in alternating order), on one database. Not part of ``scripts/bench``.

    python -m bench.count_at_claim DB URL [--jobs N] [--rounds R]

Prints one JSON line per drain, then one with the medians, their ratio (with / without) and
the median of each round's own ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, subscriber
from trinbox.testing import settled

from .common import GROUP, WORKERS, Job, RowLockJob, emit, fill, remaining
from .drain import SHUTDOWN_TIMEOUT, make_broker


async def drain(db: str, url: str, n: int, counted: bool, max_seconds: float) -> float:
    """Jobs per second over one drain of the filled table."""
    queue = InboxQueue(RowLockJob, GROUP).workers(WORKERS).poll_interval(1.0)
    if counted:
        queue = queue.count_attempt_at_claim()

    @subscriber(queue)
    async def handler(job: Job) -> None:
        pass

    app = App(AppInfo("bench-count-at-claim"), grace=5.0)
    app.include(make_broker(db, url), handler)
    with trio.fail_after(max_seconds + SHUTDOWN_TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            started = time.perf_counter()
            before = app.statistics(handler).finished
            with trio.move_on_after(max_seconds):
                await settled(app, handler, n)
            seconds = time.perf_counter() - started
            finished = app.statistics(handler).finished
            app.shutdown()
    return (finished - before) / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql"])
    parser.add_argument("url")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        # Alternate which runs first, so that a drift of the machine's load is shared.
        for counted in (False, True) if r % 2 == 0 else (True, False):
            fill(args.db, args.url, args.jobs)
            rate = trio.run(drain, args.db, args.url, args.jobs, counted, args.max_seconds)
            left = remaining(args.db, args.url)
            rates[counted].append(rate)
            emit({"round": r, "counted": counted, "jobs_per_s": rate, "left": left})
    plain = statistics.median(rates[False])
    counted_rate = statistics.median(rates[True])
    summary: dict[str, Any] = {
        "db": args.db,
        "jobs": args.jobs,
        "rounds": args.rounds,
        "without": plain,
        "with": counted_rate,
        "ratio": counted_rate / plain,
        # Each round's own ratio: the two drains of a round ran under the same load.
        "paired_ratio": statistics.median(
            w / wo for w, wo in zip(rates[True], rates[False], strict=True)
        ),
    }
    emit(summary)


if __name__ == "__main__":
    main()
