"""One worker process of the two-process FIFO test (test_fifo.py).

    python -m tests.integration.matrix.fifo_process <stand> <form> <url> <count>

serves the FIFO group ``acct`` of the ledger table of ``url`` in ``form`` (row_lock, lease) with
``workers(4)`` until the table is empty, and prints one JSON object on its last line: ``ids``,
the entry numbers it handled, and ``intervals``, one ``[n, start, end]`` per delivery, read with
``time.monotonic()`` (one clock for every process of the host). It prints ``ready`` once it is
set up and starts serving when it reads a line on its standard input.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber

from ..worker_kit import serve_until_empty
from .test_fifo import GROUP, LEDGER, TABLE, Entry

POLL = 0.02
WORK = 0.01  # each delivery's work, long enough for an overlap to show
DEADLINE = 60.0


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

    @subscriber(InboxQueue(LEDGER[form], GROUP).workers(4))
    async def handle(entry: Entry) -> None:
        start = time.monotonic()
        await trio.sleep(WORK)
        handled.append(entry.n)
        intervals.append((str(entry.n), start, time.monotonic()))

    app = App(AppInfo(f"fifo-{stand}-{form}"), grace=5.0)
    app.include(broker, handle)
    print("ready", flush=True)
    await trio.to_thread.run_sync(sys.stdin.readline)

    await serve_until_empty(app, broker, TABLE, poll=POLL, deadline=DEADLINE)
    if len(handled) > count:
        msg = f"handled {len(handled)} deliveries of {count} rows"
        raise AssertionError(msg)
    return {"ids": handled, "intervals": intervals}


def main(argv: list[str]) -> None:
    stand, form, url, count = argv[1], argv[2], argv[3], int(argv[4])
    result = trio.run(work, stand, form, url, count)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv)
