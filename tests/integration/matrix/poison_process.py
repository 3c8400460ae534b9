"""A worker process whose handler kills it (test_poison_rows.py).

    python -m tests.integration.matrix.poison_process <stand> <url> <form>

serves ``plain_jobs`` of ``url`` at ``max_attempts(MAX_ATTEMPTS)`` into ``plain_jobs_dead`` in
``form``: ``row_lock``, ``row_lock_counted`` (with ``count_attempt_at_claim()``), ``lease`` or
``advisory``; or, for ``fifo_lease``, the FIFO group ``acct`` of the lease table ``ledger``,
dead letters going to its group ``acct-dead``. The handler prints the delivery's attempt as a
JSON line and ends the process at once (``os._exit(DIED)``: no settlement, no rollback sent,
as a segfault or the OOM killer would); in the FIFO group only entry 0 does, the others are
acked. So the process exits with ``DIED`` when it was handed the poison row, and with 0 once
the rows are gone (the poison row moved to its dead letter at claim), printing the
subscription's ``acked``, ``dead_lettered`` and the entries ``handled`` as its last line.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, keys, subscriber

from ..worker_kit import serve_until_empty
from .schema import LeasedPlain, LockedPlain, RowLockedPlain
from .test_fifo import GROUP, TABLE, LedgerLease

POLL = 0.02
LEASE = 1.0  # a dead process's lease ends within two seconds (whole seconds, rounded up)
DEADLINE = 30.0
MAX_ATTEMPTS = 2
DIED = 17
FIFO_DEAD = f"{GROUP}-dead"

PLAIN: dict[str, Any] = {
    "row_lock": RowLockedPlain,
    "row_lock_counted": RowLockedPlain,
    "lease": LeasedPlain,
    "advisory": LockedPlain,
}


@dataclass
class Job:
    n: int


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    if stand == "sqlite":
        return SqlBroker.sqlite(url, poll_interval=POLL, lease=LEASE)
    if stand == "postgres":
        return SqlBroker.postgres(url, poll_interval=POLL, pool_size=4, lease=LEASE)
    return SqlBroker.mysql(url, poll_interval=POLL, pool_size=4, lease=LEASE)


async def work(stand: str, url: str, form: str) -> None:
    broker = make_broker(stand, url)
    fifo = form == "fifo_lease"
    queue: InboxQueue[Any, Any] = (
        InboxQueue(LedgerLease, GROUP) if fifo else InboxQueue(PLAIN[form], "plain")
    )
    if form == "row_lock_counted":
        queue = queue.count_attempt_at_claim()
    handled: list[int] = []

    @subscriber(queue)
    async def handle(job: Job, attempt: keys.Attempt) -> None:
        if job.n != 0:
            handled.append(job.n)
            return
        print(json.dumps({"attempt": attempt}), flush=True)
        os._exit(DIED)

    app = App(AppInfo(f"poison-{stand}-{form}"), grace=5.0)
    app.include(broker, handle).max_attempts(MAX_ATTEMPTS).dead_letter(
        FIFO_DEAD if fifo else "plain_jobs_dead"
    )

    rows = f"{TABLE} WHERE account = '{GROUP}'" if fifo else "plain_jobs"
    await serve_until_empty(app, broker, rows, poll=POLL, deadline=DEADLINE)
    stats = app.statistics(handle)
    print(
        json.dumps({"acked": stats.acked, "dead_lettered": stats.dead_lettered, "handled": handled})
    )


def main(argv: list[str]) -> None:
    trio.run(work, argv[1], argv[2], argv[3])


if __name__ == "__main__":
    main(sys.argv)
