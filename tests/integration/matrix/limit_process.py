"""One worker process of the limit test across processes (test_limit_processes.py).

    python -m tests.integration.matrix.limit_process <stand> <form> <url> <count>

serves plain_jobs of ``url`` in ``form`` (advisory: each row its own key) with four workers under
``.limit(key="tenant", concurrency=3)`` until the table is empty, and prints one JSON object on
its last line: ``ids``, the payload numbers it handled, and ``intervals``, one ``[tenant,
start, end]`` per delivery read with ``time.monotonic()`` (one clock for every process of the
host). It prints ``ready`` once set up, and serves when it reads a line on standard input.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import trio

from trinbox import App, AppInfo, InboxQueue, subscriber

from ..worker_kit import handled_once, run_counted, serve_when_told
from .schema import LIMITED_PLAIN
from .worker_process import DEADLINE, POLL, make_broker

LIMIT = 3
WORK = 0.03  # each delivery's work, long enough for overlaps to happen


@dataclass
class Job:
    n: int
    tenant: str


async def work(stand: str, form: str, url: str, count: int) -> dict[str, object]:
    broker = make_broker(stand, url)
    handled: list[int] = []
    intervals: list[tuple[str, float, float]] = []
    queue = (
        InboxQueue(LIMITED_PLAIN[form], "plain").workers(4).limit(key="tenant", concurrency=LIMIT)
    )

    @subscriber(queue)
    async def handle(job: Job) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(job.n)
        intervals.append((job.tenant, start, time.monotonic()))

    app = App(AppInfo(f"limit-{stand}-{form}"), grace=5.0)
    app.include(broker, handle)
    await serve_when_told(app, broker, "plain_jobs", poll=POLL, deadline=DEADLINE)
    handled_once(handled, count)
    return {"ids": handled, "intervals": intervals}


if __name__ == "__main__":
    run_counted(work, sys.argv)
