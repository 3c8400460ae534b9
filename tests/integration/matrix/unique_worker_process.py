"""The worker of test_unique_processes.py's kill -9: it claims the one row of unique_plain and
holds it, its handler never returning, until the test kills the process.

    python -m tests.integration.matrix.unique_worker_process <stand> <form> <url>

prints ``holding <id>`` once its handler has the row (a lease of one second in the lease
form, so that the next claim does not wait long for it).
"""

from __future__ import annotations

import sys

import trio

from trinbox import App, AppInfo, InboxQueue, keys, subscriber

from .test_unique import PLAINS, Sync
from .unique_process import make_broker


async def hold(stand: str, form: str, url: str) -> None:
    broker = make_broker(stand, url)
    queue = InboxQueue(PLAINS[form], "plain").poll_interval(0.05)
    if form == "lease":
        queue = queue.lease(1.0)

    @subscriber(queue)
    async def handle(sync: Sync, row: keys.RowId) -> None:
        print(f"holding {row}", flush=True)
        await trio.sleep_forever()

    app = App(AppInfo(f"holder-{stand}-{form}"))
    app.include(broker, handle)
    await app.serve()


if __name__ == "__main__":
    trio.run(hold, sys.argv[1], sys.argv[2], sys.argv[3])
