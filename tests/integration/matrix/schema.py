"""The matrix's tables in each dialect, and their row classes in each form
(docs/reference.md#test-databases): ``email_jobs`` (every role, grouped, ``dead_from`` keeping a
dead letter's group) with its dead letter table, and ``plain_jobs`` (group-less, no retry_after)
with its dead letter table."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RepeatableRead,
    RetryAfter,
    RowLock,
    Serializable,
)

from ..stands import StandName

EMAIL_JOBS: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE email_jobs (
            job_id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            dead_from TEXT,
            customer TEXT,
            retry_after TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            locked_until TEXT,
            processed_at TEXT,
            payload BLOB
        );
        CREATE TABLE email_jobs_dead AS SELECT * FROM email_jobs WHERE 0;
        CREATE INDEX email_jobs_claim ON email_jobs (name, retry_after, job_id);
    """,
    "postgres": """
        CREATE TABLE email_jobs (
            job_id BIGSERIAL PRIMARY KEY,
            name TEXT NOT NULL,
            dead_from TEXT,
            customer TEXT,
            retry_after TIMESTAMPTZ NOT NULL DEFAULT now(),
            attempt SMALLINT NOT NULL DEFAULT 1,
            locked_until TIMESTAMPTZ,
            processed_at TIMESTAMPTZ,
            payload BYTEA
        );
        CREATE TABLE email_jobs_dead (LIKE email_jobs);
        CREATE INDEX email_jobs_claim ON email_jobs (name, retry_after, job_id);
    """,
    # locked_until is DATETIME without fractions: the lease token is whole seconds.
    "mariadb": """
        CREATE TABLE email_jobs (
            job_id BIGINT AUTO_INCREMENT PRIMARY KEY,
            name VARCHAR(191) NOT NULL,
            dead_from VARCHAR(191),
            customer VARCHAR(191),
            retry_after DATETIME(6) NOT NULL,
            attempt INT NOT NULL DEFAULT 1,
            locked_until DATETIME,
            processed_at DATETIME(6),
            payload LONGBLOB,
            INDEX email_jobs_claim (name, retry_after, job_id)
        ) ENGINE=InnoDB;
        CREATE TABLE email_jobs_dead LIKE email_jobs;
    """,
}

PLAIN_JOBS: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE plain_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            attempt INTEGER NOT NULL DEFAULT 1,
            tenant TEXT NOT NULL DEFAULT '',
            locked_until TEXT,
            payload BLOB
        );
        CREATE TABLE plain_jobs_dead AS SELECT * FROM plain_jobs WHERE 0;
    """,
    "postgres": """
        CREATE TABLE plain_jobs (
            id BIGSERIAL PRIMARY KEY,
            attempt INT NOT NULL DEFAULT 1,
            tenant TEXT NOT NULL DEFAULT '',
            locked_until TIMESTAMPTZ,
            payload BYTEA
        );
        CREATE TABLE plain_jobs_dead (LIKE plain_jobs);
    """,
    "mariadb": """
        CREATE TABLE plain_jobs (
            id BIGINT AUTO_INCREMENT PRIMARY KEY,
            attempt INT NOT NULL DEFAULT 1,
            tenant VARCHAR(191) NOT NULL DEFAULT '',
            locked_until DATETIME,
            payload LONGBLOB
        ) ENGINE=InnoDB;
        CREATE TABLE plain_jobs_dead LIKE plain_jobs;
    """,
}


class RowLockedEmail(Inbox[RowLock], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class LeasedEmail(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedEmail(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{customer}"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class RowLockedFinished(Inbox[RowLock], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class LeasedFinished(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class LockedFinished(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{job_id}"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class RowLockedPlain(Inbox[RowLock], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    payload: Annotated[bytes, Payload()]


class LeasedPlain(Inbox[Lease], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LockedPlain(Inbox[Advisory], table="plain_jobs", advisory_lock="plain_jobs-{tenant}"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    payload: Annotated[bytes, Payload()]


FORMS = ("row_lock", "lease", "advisory")
EMAIL: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": RowLockedEmail,
    "lease": LeasedEmail,
    "advisory": LockedEmail,
}
FINISHED: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": RowLockedFinished,
    "lease": LeasedFinished,
    "advisory": LockedFinished,
}
PLAIN: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": RowLockedPlain,
    "lease": LeasedPlain,
    "advisory": LockedPlain,
}


class SlottedPlain(Inbox[Advisory], table="plain_jobs", advisory_lock="plain_jobs:{id}"):
    """Each row its own advisory key: a limit on the tenant then counts several rows."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    payload: Annotated[bytes, Payload()]


# The rows a limit on the tenant is tested with, per form.
LIMITED_PLAIN: dict[str, type[Inbox[Any, Any]]] = {**PLAIN, "advisory": SlottedPlain}


# -- tables of the batch, transactional, wake, failure, mode, lifecycle and concurrency tests ---
# (docs/reference.md#acceptance-scenarios). `audit` takes handler writes; `email_refs` points at
# email_jobs, so that deleting a referenced job (its ack) fails; `next_jobs` is a second queue
# handlers publish into; `mail_jobs` is a row mode table (no payload) whose `note` may be NULL.

AUDIT: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
    """,
    "postgres": """
        CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, note TEXT NOT NULL);
    """,
    "mariadb": """
        CREATE TABLE audit (
            id BIGINT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(191) NOT NULL
        ) ENGINE=InnoDB;
    """,
}

EMAIL_REFS: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE email_refs (job_id INTEGER NOT NULL REFERENCES email_jobs (job_id));
    """,
    "postgres": """
        CREATE TABLE email_refs (job_id BIGINT NOT NULL REFERENCES email_jobs (job_id));
    """,
    "mariadb": """
        CREATE TABLE email_refs (
            job_id BIGINT NOT NULL,
            CONSTRAINT email_refs_job FOREIGN KEY (job_id) REFERENCES email_jobs (job_id)
        ) ENGINE=InnoDB;
    """,
}

NEXT_JOBS: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE next_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT, locked_until TEXT, payload BLOB
        );
    """,
    "postgres": """
        CREATE TABLE next_jobs (id BIGSERIAL PRIMARY KEY, locked_until TIMESTAMPTZ, payload BYTEA);
    """,
    "mariadb": """
        CREATE TABLE next_jobs (
            id BIGINT AUTO_INCREMENT PRIMARY KEY, locked_until DATETIME, payload LONGBLOB
        ) ENGINE=InnoDB;
    """,
}

MAIL_JOBS: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE mail_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            retry_after TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            locked_until TEXT,
            recipient TEXT NOT NULL,
            note TEXT
        );
    """,
    "postgres": """
        CREATE TABLE mail_jobs (
            id BIGSERIAL PRIMARY KEY,
            retry_after TIMESTAMPTZ NOT NULL DEFAULT now(),
            attempt INT NOT NULL DEFAULT 1,
            locked_until TIMESTAMPTZ,
            recipient TEXT NOT NULL,
            note TEXT
        );
    """,
    "mariadb": """
        CREATE TABLE mail_jobs (
            id BIGINT AUTO_INCREMENT PRIMARY KEY,
            retry_after DATETIME(6) NOT NULL,
            attempt INT NOT NULL DEFAULT 1,
            locked_until DATETIME,
            recipient VARCHAR(191) NOT NULL,
            note VARCHAR(191)
        ) ENGINE=InnoDB;
    """,
}


class NextJob(Inbox[Lease], table="next_jobs"):
    """A second queue (lease form on every stand), without attempt or retry_after."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class RowLockedMail(Inbox[RowLock], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    recipient: str
    note: str | None


class LeasedMail(Inbox[Lease], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    recipient: str
    note: str | None


class LockedMail(Inbox[Advisory], table="mail_jobs", advisory_lock="mail_jobs-{id}"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    recipient: str
    note: str | None


MAIL: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": RowLockedMail,
    "lease": LeasedMail,
    "advisory": LockedMail,
}


class RepeatableLeasedEmail(Inbox[Lease, RepeatableRead], table="email_jobs"):
    """A lease table opened at REPEATABLE READ (a transactional handler on PostgreSQL would
    miss the lease extensions committed after its transaction began)."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class SerializableLeasedEmail(Inbox[Lease, Serializable], table="email_jobs"):
    """A lease table opened at SERIALIZABLE."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
