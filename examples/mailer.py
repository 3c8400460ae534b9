"""An email sender with retries and a dead letter group (lease form, SQLite).

A failed send returns ``retry_after`` with a backoff computed from the attempt; after five
attempts the row moves to the ``emails.failed`` group, where nothing claims it; its
``dead_from`` column keeps the group it came from, for ``trinbox dead-letters`` to list it
under its queue and redrive it there.

    python -m examples.mailer [path/to/mail.db]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated

import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    RetryAfter,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import Sqlite


class SendEmail(Inbox[Lease], table="email_jobs"):
    """A row of ``email_jobs``: the group column ``name`` is the queue."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    # NULL until the row moves to the dead letter group, which writes its group here.
    dead_from: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Email:
    to: str
    subject: str


@dataclass
class Outbox:
    sent: list[str]
    bounces: dict[str, int]  # address -> failures before it goes through (99: never)
    finished: trio.Event


def service(broker: SqlBroker[Sqlite], outbox: Outbox) -> App:
    app = App(AppInfo("mailer", "0.1.0"))

    @app.on_startup
    async def create_schema() -> None:
        # The table from the declaration; its dead letters are a group of it (no table).
        await broker.create_tables(SendEmail, dead_letter="emails.failed")

    @subscriber(InboxQueue(SendEmail, "emails").workers(4))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        if outbox.bounces.get(email.to, 0) >= attempt:
            # Backoff is the handler's: 50 ms times the attempt.
            return HandlerOutcome.retry_after(timedelta(milliseconds=50 * attempt))
        outbox.sent.append(email.to)
        return HandlerOutcome.ack()

    # Five attempts, then the row moves to the `emails.failed` group.
    app.include(broker, send).max_attempts(5).dead_letter("emails.failed")
    return app


async def main(path: Path) -> int:
    broker = SqlBroker.sqlite(f"sqlite:///{path}", poll_interval=0.02)
    addresses = {"ann@example.com": 0, "bob@example.com": 2, "cy@example.com": 99}
    outbox = Outbox(sent=[], bounces=addresses, finished=trio.Event())
    app = service(broker, outbox)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for address in addresses:
            await broker.publish(SendEmail, Email(address, "hello"), name="emails")
        with trio.fail_after(30):
            while True:
                failed = await broker.database.fetchval(
                    "SELECT COUNT(*) FROM email_jobs WHERE name = 'emails.failed' "
                    "AND dead_from = 'emails'"
                )
                if len(outbox.sent) == 2 and failed == 1:
                    break
                await trio.sleep(0.05)
        app.shutdown()
    print(f"sent: {sorted(outbox.sent)}; moved to emails.failed: cy@example.com")
    return 0


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "mail.db"
    sys.exit(trio.run(main, target))
