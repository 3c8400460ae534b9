"""Row classes shared by the dialect golden tests (tests/unit/test_dialect_*.py).

Each class is one shape a subscription's statements depend on: with or without a group,
retry_after, attempt, processed_at, a payload (payload mode) or none (row mode), a schema, a
lease, an advisory key; generated columns decide what the insert writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from trinbox._declare._inbox import Inbox
from trinbox._declare._markers import Advisory, Lease, RowLock
from trinbox._declare._roles import (
    Attempt,
    Column,
    Group,
    Id,
    LockedUntil,
    Payload,
    ProcessedAt,
    RetryAfter,
)
from trinbox._dialects._base import DeadLetter

__all__ = [
    "DEAD_APP_PLAIN",
    "DEAD_EMAILS",
    "DEAD_KEYED",
    "DEAD_PLAIN",
    "EmailJob",
    "KeyedJob",
    "LeasedEmail",
    "LeasedPlain",
    "OddNames",
    "PlainJob",
    "TenantJob",
    "Ticket",
]


class EmailJob(Inbox[RowLock], table="email_jobs"):
    """Row lock, payload mode, every optional role: a group, a retry time, an attempt count and
    a finished mark; a data column declared between the roles."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt(generated=True)]
    payload: Annotated[bytes, Payload()]


class PlainJob(Inbox[RowLock], table="plain_jobs"):
    """Row lock, row mode, no group (the table is one queue), an attempt, rows deleted when
    finished, an id the service writes."""

    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    tenant: str


class LeasedEmail(Inbox[Lease], table="email_jobs"):
    """Lease, payload mode, every optional role."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt(generated=True)]
    payload: Annotated[bytes, Payload()]


class LeasedPlain(Inbox[Lease], table="plain_jobs", schema="app"):
    """Lease in a schema, no group, no retry time, rows deleted when finished; a renamed
    column."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    tenant: Annotated[str, Column("tenant_name")]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Ticket(Inbox[Lease], table="tickets"):
    """Lease, row mode, no attempt, every column generated (the insert writes defaults)."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil(generated=True)]


class TenantJob(Inbox[Advisory], table="tenant_jobs", advisory_lock="tenant_jobs-{tenant}"):
    """Advisory with a key on a data column (a tenant's rows go into work one at a time), every
    optional role."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt(generated=True)]
    payload: Annotated[bytes, Payload()]


class KeyedJob(Inbox[Advisory], table="keyed_jobs", schema="app", advisory_lock="{id}"):
    """Advisory in a schema, each row locked alone by its id; no group, no attempt (the take
    only reads), no retry time."""

    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


class OddNames(Inbox[Advisory], table='odd"jobs`%', advisory_lock="it's 100%\\{id}"):
    """Names holding every dialect's quote character and a percent sign, a key literal with a
    quote, a percent sign and a backslash."""

    id: Annotated[int, Id(generated=True), Column('i"d`')]
    payload: Annotated[bytes, Payload()]


DEAD_EMAILS = DeadLetter(group="emails.dead")
DEAD_PLAIN = DeadLetter(table="plain_jobs_dead")
DEAD_APP_PLAIN = DeadLetter(table="plain_jobs_dead", schema="app")
DEAD_KEYED = DeadLetter(table="keyed_jobs_dead")
