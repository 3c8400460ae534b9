"""A report renderer (lease form, SQLite): a render may outlast its lease, because the
subscription extends the lease of every delivery in work each half lease.

    python -m examples.reports [path/to/reports.db]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

import trio

from trinbox import (
    App,
    AppInfo,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
    subscriber,
)
from trinbox.typing import Sqlite


class Report(Inbox[Lease], table="report_jobs"):
    """A report to render; the lease holds the row while it renders."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Request:
    month: int


def service(broker: SqlBroker[Sqlite], rendered: list[int], done: trio.Event) -> App:
    app = App(AppInfo("reports", "0.1.0"))

    @app.on_startup
    async def create_schema() -> None:
        await broker.create_tables(Report)  # the table from the declaration

    # A renderer that crashed leaves its report leased for one second; a live one keeps
    # extending the lease while it renders.
    @subscriber(InboxQueue(Report, "reports").lease(1).workers(2))
    async def render(request: Request) -> HandlerOutcome:
        await trio.sleep(1.2)  # longer than the lease
        rendered.append(request.month)
        if len(rendered) == 3:
            done.set()
        return HandlerOutcome.ack()

    app.include(broker, render)
    return app


async def main(path: Path) -> int:
    broker = SqlBroker.sqlite(f"sqlite:///{path}", poll_interval=0.05)
    rendered: list[int] = []
    done = trio.Event()
    app = service(broker, rendered, done)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for month in (1, 2, 3):
            await broker.publish(Report, Request(month))
        with trio.fail_after(30):
            await done.wait()
        app.shutdown()
    print(f"rendered months {sorted(rendered)}, each once, each past its 1 s lease")
    return 0 if sorted(rendered) == [1, 2, 3] else 1


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "r.db"
    sys.exit(trio.run(main, target))
