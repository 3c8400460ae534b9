"""Row classes and their DDL, shared by the SQLite integration tests (REFERENCE.md §10.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated

import trio

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    RetryAfter,
)

EMAIL_JOBS = """
CREATE TABLE email_jobs (
    job_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    customer TEXT,
    retry_after TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    processed_at TEXT,
    payload BLOB
);
CREATE TABLE email_jobs_dead AS SELECT * FROM email_jobs WHERE 0;
"""


class LeasedEmail(Inbox[Lease], table="email_jobs"):
    """Lease form, with every role."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedEmail(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{customer}"):
    """Advisory form on the same table, one key per customer."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class FinishedLeasedEmail(Inbox[Lease], table="email_jobs"):
    """Lease form keeping finished rows (processed_at)."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class FinishedLockedEmail(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{job_id}"):
    """Advisory form keeping finished rows (processed_at), one key per row."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


PLAIN_JOBS = """
CREATE TABLE plain_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt INTEGER NOT NULL DEFAULT 1,
    tenant TEXT NOT NULL DEFAULT '',
    locked_until TEXT,
    payload BLOB
);
CREATE TABLE plain_jobs_dead AS SELECT * FROM plain_jobs WHERE 0;
"""


class LeasedPlain(Inbox[Lease], table="plain_jobs"):
    """Group-less lease table without retry_after: the whole table is one queue."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedPlain(Inbox[Advisory], table="plain_jobs", advisory_lock="plain_jobs-{tenant}"):
    """Group-less advisory table without retry_after, one key per tenant."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    payload: Annotated[bytes, Payload()]


# The matrix the scenario tests run over: each (form) on SQLite.
EMAIL_FORMS = [LeasedEmail, LockedEmail]
PLAIN_FORMS = [LeasedPlain, LockedPlain]
# The same forms keeping finished rows (processed_at), so the row stays to be looked at.
FINISHED_FORMS = [FinishedLeasedEmail, FinishedLockedEmail]


@asynccontextmanager
async def ticking(period: float = 0.5) -> AsyncIterator[None]:
    """Under the ``clock`` fixture, keep a deadline at most ``period`` away for the block.

    The mock clock jumps to the next deadline once the run loop has idled 50 ms of real time,
    and it idles while a worker thread runs a SQLite call. A call slowed past that (a busy
    machine, a slow fsync) with the test's ``fail_after`` as the only deadline would jump
    straight to it; with a tick near, the clock moves one period per 50 ms instead.
    """
    async with trio.open_nursery() as nursery:

        async def tick() -> None:
            # A deadline kept near, not a wait for a condition.
            while True:  # noqa: ASYNC110
                await trio.sleep(period)

        nursery.start_soon(tick)
        try:
            yield
        finally:
            nursery.cancel_scope.cancel()


def attempts_after(row: type, deliveries: int) -> int:
    """The attempt column after ``deliveries`` deliveries (the lease and advisory forms
    count at the claim, so the column runs one ahead of the last reported attempt)."""
    return deliveries + 1
