"""One worker process of the rate test across processes (test_rate_processes.py).

    python -m tests.integration.matrix.rate_process <stand> <form> <url> <count>

serves plain_jobs of ``url`` in the lease form with four workers under
``.limit(key="tenant", rate=RATE, rates=RATES)`` (the rate table made by the test) until the
table is empty, and prints one JSON object on its last line: ``ids``, the payload numbers it
handled, and ``intervals``, one ``[tenant, start, start]`` per delivery, its handler's start
read with ``time.monotonic()`` (one clock for every process of the host). It prints ``ready``
once set up, and serves when it reads a line on standard input.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import timedelta

import trio

from trinbox import App, AppInfo, InboxQueue, Rate, Rates, subscriber

from ..worker_kit import handled_once, run_counted, serve_when_told
from .schema import PLAIN
from .worker_process import DEADLINE, POLL, make_broker

RATES = Rates("process_rates")
RATE = Rate(4, per=timedelta(seconds=2))  # a burst of 4, then one every 0.5 s
WORK = 0.01


@dataclass
class Job:
    n: int
    tenant: str


async def work(stand: str, form: str, url: str, count: int) -> dict[str, object]:
    broker = make_broker(stand, url)
    handled: list[int] = []
    intervals: list[tuple[str, float, float]] = []
    queue = InboxQueue(PLAIN[form], "plain").workers(4).limit(key="tenant", rate=RATE, rates=RATES)

    @subscriber(queue)
    async def handle(job: Job) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(job.n)
        intervals.append((job.tenant, start, start))

    app = App(AppInfo(f"rate-{stand}-{form}"), grace=5.0)
    app.include(broker, handle)
    await serve_when_told(app, broker, "plain_jobs", poll=POLL, deadline=DEADLINE)
    handled_once(handled, count)
    return {"ids": handled, "intervals": intervals}


if __name__ == "__main__":
    run_counted(work, sys.argv)
