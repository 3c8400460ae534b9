"""``broker.insert_statement``: a queue row written on a connection trinbox does not own, in
the user's own transaction (docs/reference.md#publish-api ``Insert``)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import trio

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, RetryAfter, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .harness import Db

JOBS = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    retry_after TEXT NOT NULL,
    locked_until TEXT,
    payload BLOB
);
"""


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Note:
    text: str


async def test_the_row_commits_or_rolls_back_with_the_users_transaction(db: Db) -> None:
    db.script(JOBS)
    broker = db.broker(poll_interval=0.05)
    sql, params = broker.insert_statement(Job, Note("kept"))
    assert sql == "INSERT INTO `jobs` (`retry_after`, `locked_until`, `payload`) VALUES (?, ?, ?)"
    assert params[1:] == (None, b'{"text":"kept"}')
    # Times as trinbox stores them on SQLite, ready for the user's own sqlite3 connection.
    assert isinstance(params[0], str)
    assert (
        datetime.strptime(params[0], "%Y-%m-%d %H:%M:%S.%f").isoformat(" ", "microseconds")
        == params[0]
    )
    with sqlite3.connect(db.path, isolation_level=None) as own:
        own.execute("BEGIN")
        own.execute(sql, broker.insert_statement(Job, Note("undone"))[1])
        own.execute("ROLLBACK")
        own.execute("BEGIN")
        own.execute(sql, params)
        own.execute("COMMIT")
    got: list[str] = []

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(note: Note) -> None:
        got.append(note.text)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == ["kept"]
