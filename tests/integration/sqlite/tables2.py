"""Row classes and DDL for the SQLite-only scenario tests (transaction modes, codecs, row mode
handler and publish refusals, sqlite3 connections; docs/reference.md#acceptance-scenarios), and raw
inserts that wake nobody. The scenarios every database runs use
tests/integration/matrix/schema.py."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Annotated, Any

from trinbox import (
    Advisory,
    Attempt,
    Id,
    Immediate,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    RowLock,
)

from .harness import Db

# Due long before any broker clock (TrioClock starts in 2030).
DUE = "2000-01-01 00:00:00.000000"

# `jobs`: a group-less queue that deletes finished rows. `audit` takes handler writes.
JOBS = f"""
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    retry_after TEXT NOT NULL DEFAULT '{DUE}',
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    payload BLOB
);
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
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


class RowLockedJob(Inbox[RowLock], table="jobs"):
    """The row lock form, which SQLite cannot serve."""

    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


JOB_FORMS: list[type[Inbox[Any, Any]]] = [LeasedJob, LockedJob]
IMMEDIATE_FORMS: list[type[Inbox[Any, Any]]] = [ImmediateLeasedJob, ImmediateLockedJob]

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
