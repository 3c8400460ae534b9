"""The process the kill -9 test of limits kills (test_limit_processes.py).

    python -m tests.integration.matrix.limit_holder_process <stand> <url> [<form>]

serves plain_jobs of ``url`` in the lease form (or ``form``: ``row_lock``, ``advisory``) with
four workers under ``.limit(key="tenant", concurrency=3)`` and a lease of two seconds; each
handler prints ``holding <n>`` and then waits forever, so the process holds three leases (row
lock: three slots, locks of its claims' transactions; advisory: three slots, session locks
beside each row's key) of the tenant until it is killed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber

from .schema import LIMITED_PLAIN

LEASE = 2.0


@dataclass
class Job:
    n: int
    tenant: str


def holder_broker(stand: str, url: str) -> SqlBroker[Any]:
    """The holder's broker: a lease of two seconds, so the test waits little for its end."""
    if stand == "sqlite":
        return SqlBroker.sqlite(url, poll_interval=0.05, lease=LEASE)
    if stand == "postgres":
        return SqlBroker.postgres(url, poll_interval=0.05, lease=LEASE)
    return SqlBroker.mysql(url, poll_interval=0.05, lease=LEASE)


async def hold(stand: str, url: str, form: str) -> None:
    broker = holder_broker(stand, url)
    queue = InboxQueue(LIMITED_PLAIN[form], "plain").workers(4).limit(key="tenant", concurrency=3)

    @subscriber(queue)
    async def handle(job: Job) -> None:
        print(f"holding {job.n}", flush=True)
        await trio.sleep_forever()

    app = App(AppInfo(f"limit-holder-{stand}"))
    app.include(broker, handle)
    await app.serve()


if __name__ == "__main__":
    trio.run(hold, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "lease")
