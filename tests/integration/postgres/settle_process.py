"""The settling process of test_wait_notify.py: another process's settlement wakes a wait.

    python -m tests.integration.postgres.settle_process <url>

serves ``quote_jobs`` with ``listen_notify``; its handler prints ``claimed <n>``, waits for a
line on stdin (the test sends it once its wait reads the row unsettled), and acks with a
``Quote`` of twice ``n``. Once that settlement is counted the process shuts down and exits.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    Result,
    RetryAfter,
    SqlBroker,
    subscriber,
)
from trinbox.testing import settled


@dataclass
class Ask:
    n: int


@dataclass
class Quote:
    total: int


class QuoteJob(Inbox[Lease], table="quote_jobs"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    quote: Annotated[Quote | None, Result()] = None
    payload: Annotated[bytes, Payload()]


async def main(url: str) -> None:
    broker = SqlBroker.postgres(url, poll_interval=0.05, listen_notify=True)

    @subscriber(InboxQueue(QuoteJob, "quotes"))
    async def price(ask: Ask) -> HandlerOutcome:
        print(f"claimed {ask.n}", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        return HandlerOutcome.ack(Quote(ask.n * 2))

    app = App(AppInfo("settler"))
    app.include(broker, price)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        with trio.fail_after(60):
            await settled(app, price, 1)
        app.shutdown()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
