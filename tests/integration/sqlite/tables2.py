"""Row classes and DDL for the batch, transactional, wake, failure, mode, lifecycle and
concurrency tests on SQLite (REFERENCE.md §10.2), raw inserts that wake nobody, and a watch
on the claims of every subscription."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Immediate,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    RowLock,
)
from trinbox._forms._base import Delivery
from trinbox._forms.advisory import AdvisoryForm
from trinbox._forms.lease import LeaseForm

from .harness import Db

# Due long before any broker clock (TrioClock starts in 2030).
DUE = "2000-01-01 00:00:00.000000"

# `jobs`: a group-less queue that deletes finished rows. `refs` points at jobs (a foreign key
# makes deleting a referenced job, hence its ack, fail). `audit` takes handler writes.
# `next_jobs` is a second queue that handlers publish into.
JOBS = f"""
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    retry_after TEXT NOT NULL DEFAULT '{DUE}',
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    payload BLOB
);
CREATE TABLE refs (job_id INTEGER NOT NULL REFERENCES jobs(id));
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
CREATE TABLE next_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    locked_until TEXT,
    payload BLOB
);
"""


class LeasedJob(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedJob(Inbox[Advisory], table="jobs", advisory_lock="jobs-{id}"):
    """Advisory form, one key per row (so a batch can hold several rows)."""

    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class ImmediateLeasedJob(Inbox[Lease, Immediate], table="jobs"):
    """Lease form whose transactions open with BEGIN IMMEDIATE."""

    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class ImmediateLockedJob(Inbox[Advisory, Immediate], table="jobs", advisory_lock="jobs-{id}"):
    """Advisory form whose transactions open with BEGIN IMMEDIATE."""

    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class NextJob(Inbox[Lease], table="next_jobs"):
    """A second queue, without attempt or retry_after columns."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class RowLockedJob(Inbox[RowLock], table="jobs"):
    """The row lock form, which SQLite cannot serve."""

    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


JOB_FORMS: list[type[Inbox[Any, Any]]] = [LeasedJob, LockedJob]
IMMEDIATE_FORMS: list[type[Inbox[Any, Any]]] = [ImmediateLeasedJob, ImmediateLockedJob]

# `grouped_jobs`: one queue per value of `name`.
GROUPED_JOBS = f"""
CREATE TABLE grouped_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    retry_after TEXT NOT NULL DEFAULT '{DUE}',
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    payload BLOB
);
"""


class LeasedGrouped(Inbox[Lease], table="grouped_jobs"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedGrouped(Inbox[Advisory], table="grouped_jobs", advisory_lock="grouped-{id}"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


GROUPED_FORMS: list[type[Inbox[Any, Any]]] = [LeasedGrouped, LockedGrouped]

# `mail_jobs`: row mode (no payload column); `note` may be NULL.
MAIL_JOBS = f"""
CREATE TABLE mail_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    retry_after TEXT NOT NULL DEFAULT '{DUE}',
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    recipient TEXT NOT NULL,
    note TEXT
);
"""


class LeasedMail(Inbox[Lease], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    recipient: str
    note: str | None


class LockedMail(Inbox[Advisory], table="mail_jobs", advisory_lock="mail-{id}"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    recipient: str
    note: str | None


MAIL_FORMS: list[type[Inbox[Any, Any]]] = [LeasedMail, LockedMail]

# `bare_jobs`: no attempt and no retry_after column.
BARE_JOBS = """
CREATE TABLE bare_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    locked_until TEXT,
    payload BLOB
);
"""


class LeasedBare(Inbox[Lease], table="bare_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedBare(Inbox[Advisory], table="bare_jobs", advisory_lock="bare-{id}"):
    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


BARE_FORMS: list[type[Inbox[Any, Any]]] = [LeasedBare, LockedBare]


def insert_jobs(db: Db, payloads: list[bytes], *, table: str = "jobs", **columns: object) -> None:
    """Write rows by raw SQL (no broker: nothing is woken), one per payload."""
    names = ["payload", *columns]
    marks = ", ".join("?" for _ in names)
    conn = sqlite3.connect(db.path)
    try:
        with conn:
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})",
                [(payload, *columns.values()) for payload in payloads],
            )
    finally:
        conn.close()


Hook = Callable[[int], Awaitable[None]]


class ClaimWatch:
    """Watches every claim of the lease and advisory forms in one test.

    ``before(n)`` runs as claim ``n`` (1-based, across subscriptions) begins and ``after(n)``
    once it has read its rows, before the claim loop sees them; ``times`` holds when each
    claim began (``trio.current_time()``).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.done = 0
        self.times: list[float] = []
        self.failed: list[BaseException] = []
        self.before: Hook | None = None
        self.after: Hook | None = None
        self._changed = trio.Event()
        for form in (LeaseForm, AdvisoryForm):
            monkeypatch.setattr(form, "claim", self._wrap(form.claim))

    def _wrap(
        self, original: Callable[[Any, int], Awaitable[list[Delivery]]]
    ) -> Callable[[Any, int], Awaitable[list[Delivery]]]:
        async def claim(form: Any, limit: int) -> list[Delivery]:
            self.count += 1
            n = self.count
            self.times.append(trio.current_time())
            try:
                if self.before is not None:
                    await self.before(n)
                found = await original(form, limit)
                if self.after is not None:
                    await self.after(n)
                return found
            except Exception as exc:
                self.failed.append(exc)
                raise
            finally:
                self.done += 1
                self._changed.set()
                self._changed = trio.Event()

        return claim

    async def wait_done(self, count: int) -> None:
        """Wait until ``count`` claims have returned (or failed)."""
        while self.done < count:
            await self._changed.wait()
