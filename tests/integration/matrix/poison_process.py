"""A worker process whose handler kills it (test_poison_rows.py).

    python -m tests.integration.matrix.poison_process <stand> <url> <counted>

serves plain_jobs of ``url`` in the row lock form, with ``count_attempt_at_claim()`` when
``counted`` is ``1``, at ``max_attempts(MAX_ATTEMPTS)`` into ``plain_jobs_dead``. Its handler
ends the process at once (``os._exit(DIED)``: no settlement, no rollback sent, as a segfault
or the OOM killer would), so the process exits with ``DIED`` when it was handed the row, and
with 0 once the table is empty (the row moved to the dead letter at claim), printing the
subscription's ``acked`` and ``dead_lettered`` as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber

from ..worker_kit import serve_until_empty
from .schema import RowLockedPlain

POLL = 0.02
DEADLINE = 30.0
MAX_ATTEMPTS = 2
DIED = 17


@dataclass
class Job:
    n: int


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    if stand == "postgres":
        return SqlBroker.postgres(url, poll_interval=POLL, pool_size=4)
    return SqlBroker.mysql(url, poll_interval=POLL, pool_size=4)


async def work(stand: str, url: str, counted: bool) -> None:
    broker = make_broker(stand, url)
    queue = InboxQueue(RowLockedPlain, "plain")
    if counted:
        queue = queue.count_attempt_at_claim()

    @subscriber(queue)
    async def handle(job: Job) -> None:
        os._exit(DIED)

    app = App(AppInfo(f"poison-{stand}"), grace=5.0)
    app.include(broker, handle).max_attempts(MAX_ATTEMPTS).dead_letter("plain_jobs_dead")

    await serve_until_empty(app, broker, "plain_jobs", poll=POLL, deadline=DEADLINE)
    stats = app.statistics(handle)
    print(json.dumps({"acked": stats.acked, "dead_lettered": stats.dead_lettered}))


def main(argv: list[str]) -> None:
    trio.run(work, argv[1], argv[2], argv[3] == "1")


if __name__ == "__main__":
    main(sys.argv)
