"""A worker process of the FIFO limit tests across processes (test_limits_fifo.py).

    python -m tests.integration.matrix.limit_fifo_process <stand> <form> <url> <count>
    python -m tests.integration.matrix.limit_fifo_process hold <stand> <url> [<form>]

serves every group of the bookings table of ``url`` in ``form`` (lease, row_lock; ``hold``:
lease unless told) with four workers under
``.limit(key="tenant", concurrency=3)``. The first form serves until the table is empty and
prints one JSON object on its last line: ``ids``, the postings it handled, and ``intervals``,
one ``[n, start, end]`` per delivery read with ``time.monotonic()`` (one clock for every
process of the host); it prints ``ready`` once set up, and serves when it reads a line on
standard input. ``hold``: a lease of two seconds, and each handler prints ``holding <n>`` and
waits forever, so the process holds its leases (row lock: its slots, guards and rows) until it
is killed.
"""

from __future__ import annotations

import sys
import time

import trio

from trinbox import App, AppInfo, subscriber

from ..worker_kit import handled_once, run_counted, serve_when_told
from .limit_holder_process import holder_broker
from .test_limits_fifo import BOOKING, TABLE, Posting, every_group
from .worker_process import DEADLINE, POLL, make_broker

WORK = 0.03  # each delivery's work, long enough for overlaps to happen


async def work(stand: str, form: str, url: str, count: int) -> dict[str, object]:
    broker = make_broker(stand, url)
    handled: list[int] = []
    intervals: list[tuple[str, float, float]] = []

    @subscriber(every_group(BOOKING[form]))
    async def handle(posting: Posting) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(posting.n)
        intervals.append((str(posting.n), start, time.monotonic()))

    app = App(AppInfo(f"limit-fifo-{stand}"), grace=5.0)
    app.include(broker, handle)
    await serve_when_told(app, broker, TABLE, poll=POLL, deadline=DEADLINE)
    handled_once(handled, count)
    return {"ids": handled, "intervals": intervals}


async def hold(stand: str, url: str, form: str) -> None:
    broker = holder_broker(stand, url)

    @subscriber(every_group(BOOKING[form]))
    async def handle(posting: Posting) -> None:
        print(f"holding {posting.n}", flush=True)
        await trio.sleep_forever()

    app = App(AppInfo(f"limit-fifo-holder-{stand}"))
    app.include(broker, handle)
    await app.serve()


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        trio.run(hold, sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "lease")
    else:
        run_counted(work, sys.argv)
