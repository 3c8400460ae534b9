"""A worker process of tests/integration/matrix/test_cancel_processes.py: serves the queue of
``cancel_jobs`` in the form given with a handler that waits for ever, prints ``entered`` once
it runs and ``cancelled`` once a cancel from the test's process reached it, and then the
subscription's statistics as the JSON line the test reads last.

    python -m tests.integration.matrix.cancel_process STAND FORM URL [pgbouncer|notify]
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import trio

from trinbox import App, AppInfo, CancelRequests, InboxQueue, SqlBroker, subscriber
from trinbox.testing import settled

from .test_cancel import KEPT, Job

REQUESTS = CancelRequests("test_cancels", expire_after=timedelta(hours=1))


def broker_of(stand: str, url: str, *, bounced: bool, notify: bool = False) -> SqlBroker[Any]:
    if stand == "sqlite":
        return SqlBroker.sqlite(url, poll_interval=0.05)
    if stand == "postgres":
        if notify:  # a poll too long for the test's bound: only the NOTIFY reaches in time
            return SqlBroker.postgres(url, poll_interval=600, listen_notify=True)
        return SqlBroker.postgres(
            url, poll_interval=0.05, pgbouncer="transaction" if bounced else None
        )
    return SqlBroker.mysql(url, poll_interval=0.05)


async def main(stand: str, form: str, url: str, mode: str) -> dict[str, int]:
    broker = broker_of(stand, url, bounced=mode == "pgbouncer", notify=mode == "notify")
    broker.use_cancel_requests(REQUESTS)
    row = KEPT[form]

    @subscriber(InboxQueue(row, "jobs"))
    async def wait_for_ever(job: Job) -> None:
        print("entered", flush=True)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            print("cancelled", flush=True)
            raise

    app = App(AppInfo("cancel worker"))
    app.include(broker, wait_for_ever)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            await settled(app, wait_for_ever, 1)
            stats = app.statistics(wait_for_ever)
            app.shutdown()
    return {
        "cancelled": stats.cancelled,
        "released": stats.released,
        "retried": stats.retried,
        "served": stats.cancel_requests_served,
        "polled": int(stats.cancel_polls >= 1),
    }


if __name__ == "__main__":
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps(trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], mode)), flush=True)
