"""One worker process of the two-process test (test_processes.py).

    python -m tests.integration.matrix.worker_process <stand> <form> <url> <count>

serves plain_jobs of ``url`` in ``form`` (row_lock, lease, advisory) until the table is empty,
and prints one JSON object on its last line: ``ids``, the payload numbers it handled, and
``intervals``, one ``[tenant, start, end]`` per delivery, read with ``time.monotonic()`` (one
clock for every process of the host). ``count`` is how many rows the test wrote; a worker never
handles more. It prints ``ready`` once it is set up and starts serving when it reads a line on
its standard input, so that the test can start both workers together.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber

from ..worker_kit import handled_once, run_counted, serve_when_told
from .schema import PLAIN

POLL = 0.02
WORK = 0.01  # each delivery's work, long enough for an overlap to show
DEADLINE = 60.0


@dataclass
class Job:
    n: int
    tenant: str


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    if stand == "sqlite":
        return SqlBroker.sqlite(url, poll_interval=POLL)
    if stand == "postgres":
        return SqlBroker.postgres(url, poll_interval=POLL, pool_size=8)
    return SqlBroker.mysql(url, poll_interval=POLL, pool_size=8)


async def work(stand: str, form: str, url: str, count: int) -> dict[str, object]:
    broker = make_broker(stand, url)
    handled: list[int] = []
    intervals: list[tuple[str, float, float]] = []

    @subscriber(InboxQueue(PLAIN[form], "plain").workers(4))
    async def handle(job: Job) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(job.n)
        intervals.append((job.tenant, start, time.monotonic()))

    app = App(AppInfo(f"worker-{stand}-{form}"), grace=5.0)
    app.include(broker, handle)
    await serve_when_told(app, broker, "plain_jobs", poll=POLL, deadline=DEADLINE)
    handled_once(handled, count)
    return {"ids": handled, "intervals": intervals}


if __name__ == "__main__":
    run_counted(work, sys.argv)
