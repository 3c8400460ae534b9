"""The process that holds a limit's slot and frees it (test_limit_slots_pg.py).

    python -m tests.integration.postgres.limit_slot_process <url>

serves ``slot_jobs`` (``Slot``) with listen_notify, one worker under
``.limit(key="tenant", concurrency=1)`` and an hour-long poll; its handler prints
``holding <n>``, reads a line from stdin, shuts the app down (so this process claims nothing
more) and returns: the row is acked, its slot freed, and the process exits.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    subscriber,
)

HOUR = 3600.0

SLOT_JOBS = """
CREATE TABLE slot_jobs (
    id BIGSERIAL PRIMARY KEY,
    tenant TEXT NOT NULL,
    retry_after TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempt INT NOT NULL DEFAULT 1,
    locked_until TIMESTAMPTZ,
    payload BYTEA
)
"""


class Slot(Inbox[Lease], table="slot_jobs"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Job:
    n: int


def queue() -> InboxQueue[Any, Any, Any]:
    """The limited queue both processes serve: one row of a tenant in work at once."""
    return (
        InboxQueue(Slot, "slots").workers(1).limit(key="tenant", concurrency=1).poll_interval(HOUR)
    )


async def hold(url: str) -> None:
    broker = SqlBroker.postgres(url, listen_notify=True, poll_interval=HOUR)
    app = App(AppInfo("limit-slot-holder"), grace=30.0)

    @subscriber(queue())
    async def handle(job: Job) -> None:
        print(f"holding {job.n}", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        app.shutdown()  # claim nothing more here: the freed slot is for the other process

    app.include(broker, handle)
    await app.serve()
    print("done", flush=True)


if __name__ == "__main__":
    trio.run(hold, sys.argv[1])
