"""One worker process of the two-process FIFO test (test_fifo.py).

    python -m tests.integration.matrix.fifo_process <stand> <form> <url> <count> [every]

serves the FIFO group ``acct`` of the ledger table of ``url`` in ``form`` (row_lock, lease) with
``workers(4)`` (with ``every``: one subscription over every group of the table) until the table
is empty, and prints one JSON object on its last line: ``ids``, the entry numbers it handled,
and ``intervals``, one ``[n, start, end]`` per delivery, read with ``time.monotonic()`` (one
clock for every process of the host). It prints ``ready`` once it is set up and starts serving
when it reads a line on its standard input.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber

from ..worker_kit import handled_once, run_counted, serve_when_told
from .test_fifo import GROUP, LEDGER, TABLE, Entry

POLL = 0.02
WORK = 0.01  # each delivery's work, long enough for an overlap to show
DEADLINE = 60.0
EVERY = sys.argv[5:] == ["every"]  # one subscription over every group of the table


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

    queue = InboxQueue(LEDGER[form], GROUP)
    if EVERY:
        queue = queue.every_group()

    @subscriber(queue.workers(4))
    async def handle(entry: Entry) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(entry.n)
        intervals.append((str(entry.n), start, time.monotonic()))

    app = App(AppInfo(f"fifo-{stand}-{form}"), grace=5.0)
    app.include(broker, handle)
    await serve_when_told(app, broker, TABLE, poll=POLL, deadline=DEADLINE)
    handled_once(handled, count)
    return {"ids": handled, "intervals": intervals}


if __name__ == "__main__":
    run_counted(work, sys.argv)
