"""What every bench module shares: the bench table in each dialect, its row classes (one per
claim form), filling it, and the one-line JSON result a bench subprocess prints last.

The table is the same on every database: a group (``name``), an advisory key source
(``tenant``: ten values), a ``priority`` (five values), ``retry_after``, ``attempt``,
``locked_until``, a JSON payload ``{"n": i}`` and a ``headers`` column (NULL, or with
``fill(..., headers=True)`` the ``HEADERS`` the forms with a Headers field read, ``--headers``
in ``drain.py`` and ``publish.py``; ``fill(..., unique=True)`` adds a ``dedup`` column with its
unique index, ``--unique`` in ``publish.py``). The claim order is indexed: ``(name,
retry_after, id)``, as the README says; for the forms that declare ``Priority()``
(``lease-prio``, ``rowlock-prio``) ``(name, priority, retry_after, id)``, as
``trinbox.schema.ddl`` renders it, in place of it.

Setup and checks run through drivers trinbox does not use (psycopg, PyMySQL, sqlite3), so
nothing of the library runs outside the timed part.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Headers,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    Priority,
    RetryAfter,
    RowLock,
    Unique,
)

TABLE = "bench_jobs"
GROUP = "bench"
TENANTS = 10
WORKERS = 4

# The claim forms measured, by the name the tables print.
FORMS = ("rowlock", "lease", "adv-row", "adv-10")
FORM_LABEL = {
    "rowlock": "row lock",
    "lease": "lease",
    "rowlock-prio": "row lock with Priority()",
    "lease-prio": "lease with Priority()",
    "adv-row": "advisory, key per row",
    "adv-10": "advisory, 10 keys",
}
DB_LABEL = {"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}


@dataclass
class Job:
    """The message of every bench row."""

    n: int


class RowLockJob(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class LeaseJob(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class RowLockPriorityJob(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class LeasePriorityJob(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class RowKeyJob(Inbox[Advisory], table=TABLE, advisory_lock="bench-{id}"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class TenantKeyJob(Inbox[Advisory], table=TABLE, advisory_lock="bench-{tenant}"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class RowLockHeadersJob(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


class LeaseHeadersJob(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


class LeaseUniqueJob(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


# The rows of each form with a Unique field (``--unique``: ``fill(..., unique=True)``).
WITH_UNIQUE: dict[str, type[Inbox[Any, Any]]] = {"lease": LeaseUniqueJob}
# A Unique field's column and index, as ``trinbox.schema.ddl`` writes them for LeaseUniqueJob
# (ack deletes, no dead letter group: every row holds its key, a plain unique index).
UNIQUE_DDL = {
    "postgres": f"ALTER TABLE {TABLE} ADD COLUMN dedup TEXT; "
    f"CREATE UNIQUE INDEX {TABLE}_unique ON {TABLE} (dedup)",
    "mysql": f"ALTER TABLE {TABLE} ADD COLUMN dedup VARCHAR(191) COLLATE utf8mb4_bin, "
    f"ADD UNIQUE INDEX {TABLE}_unique (dedup)",
    "sqlite": f"ALTER TABLE {TABLE} ADD COLUMN dedup TEXT; "
    f"CREATE UNIQUE INDEX {TABLE}_unique ON {TABLE} (dedup)",
}

# The rows of each form read with their Headers field (``--headers``).
WITH_HEADERS: dict[str, type[Inbox[Any, Any]]] = {
    "rowlock": RowLockHeadersJob,
    "lease": LeaseHeadersJob,
}
# What a row of the bench carries with --headers: a tenant and a W3C trace context.
HEADERS = {
    "tenant": "acme",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
}
HEADERS_JSON = json.dumps(HEADERS, sort_keys=True, separators=(",", ":"))

ROWS: dict[str, type[Inbox[Any, Any]]] = {
    "rowlock": RowLockJob,
    "lease": LeaseJob,
    "adv-row": RowKeyJob,
    "adv-10": TenantKeyJob,
    "rowlock-prio": RowLockPriorityJob,
    "lease-prio": LeasePriorityJob,
}
# The forms whose claim orders by priority first (their own index).
PRIORITY_FORMS = ("rowlock-prio", "lease-prio")
PRIORITIES = 5

DDL = {
    "postgres": f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (
            id BIGSERIAL PRIMARY KEY,
            name TEXT NOT NULL,
            tenant TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            retry_after TIMESTAMPTZ NOT NULL,
            attempt INT NOT NULL DEFAULT 1,
            locked_until TIMESTAMPTZ,
            payload BYTEA NOT NULL,
            headers JSONB
        )
    """,
    # locked_until without fractions: the lease token is whole seconds.
    "mysql": f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (
            id BIGINT AUTO_INCREMENT PRIMARY KEY,
            name VARCHAR(191) NOT NULL,
            tenant VARCHAR(191) NOT NULL,
            priority INT NOT NULL DEFAULT 0,
            retry_after DATETIME(6) NOT NULL,
            attempt INT NOT NULL DEFAULT 1,
            locked_until DATETIME,
            payload LONGBLOB NOT NULL,
            headers JSON
        ) ENGINE=InnoDB
    """,
    "sqlite": f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            tenant TEXT NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            retry_after TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            locked_until TEXT,
            payload BLOB NOT NULL,
            headers TEXT
        )
    """,
}
INDEX = f"CREATE INDEX {TABLE}_claim ON {TABLE} (name, retry_after, id)"
PRIORITY_INDEX = f"CREATE INDEX {TABLE}_claim ON {TABLE} (name, priority, retry_after, id)"


def due_time() -> datetime:
    """When every pre-inserted row fell due: an hour ago."""
    return datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


# -- plain database access (setup and checks) -------------------------------------------------


def sqlite_file(url: str) -> str:
    return url.removeprefix("sqlite:///")


@contextmanager
def connect(db: str, url: str) -> Iterator[Any]:
    """A synchronous autocommit connection through a driver trinbox does not use."""
    if db == "postgres":
        import psycopg

        pg = psycopg.connect(url, autocommit=True)
        try:
            yield pg
        finally:
            pg.close()
    elif db == "mysql":
        import pymysql

        parts = urlsplit(url)
        my = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=unquote(parts.path.lstrip("/")),
            autocommit=True,
            charset="utf8mb4",
            init_command="SET time_zone = '+00:00'",
        )
        try:
            yield my
        finally:
            my.close()
    else:
        lite = sqlite3.connect(sqlite_file(url), isolation_level=None)
        try:
            lite.execute("PRAGMA journal_mode=WAL")
            yield lite
        finally:
            lite.close()


def run_sql(db: str, conn: Any, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    """Run one statement; its rows (empty for a statement that returns none)."""
    if db == "sqlite":
        return list(conn.execute(sql, params).fetchall())
    with conn.cursor() as cur:
        cur.execute(sql, params or None)
        return list(cur.fetchall()) if cur.description else []


def script(db: str, conn: Any, text: str) -> None:
    for part in text.split(";"):
        if part.strip():
            run_sql(db, conn, part)


def fill(
    db: str,
    url: str,
    n: int,
    *,
    index: bool = True,
    form: str | None = None,
    headers: bool = False,
    unique: bool = False,
    tenants: int = TENANTS,
) -> None:
    """Recreate the bench table with ``n`` due rows (ids 1..n, tenants t0..t9 or
    ``tenants`` of them: row i's tenant is ``t{i % tenants}``, priorities
    0..4; ``headers``: each with ``HEADERS``), index the claim order of ``form`` (``unique``:
    add the Unique field's column and index, every row's key NULL), and leave the server
    settled (statistics, a checkpoint)."""
    due = due_time()
    with_headers = HEADERS_JSON if headers else None
    claim_index = PRIORITY_INDEX if form in PRIORITY_FORMS else INDEX
    with connect(db, url) as conn:
        script(db, conn, DDL[db])
        if unique:
            script(db, conn, UNIQUE_DDL[db])
        if db == "postgres":
            run_sql(
                db,
                conn,
                f"INSERT INTO {TABLE} (name, tenant, priority, retry_after, payload, headers) "
                f"SELECT %s, 't' || (g %% {tenants}), g %% {PRIORITIES}, %s, "
                f"convert_to('{{\"n\":' || g || '}}', 'UTF8'), %s::jsonb "
                f"FROM generate_series(1, %s) g",
                (GROUP, due, with_headers, n),
            )
            if index:
                run_sql(db, conn, claim_index)
            settle(db, conn)
        elif db == "mysql":
            naive = due.replace(tzinfo=None)
            done = 0
            # MariaDB's sequence engine: seq_1_to_N is a table of 1..N.
            while done < n:
                step = min(100_000, n - done)
                run_sql(
                    db,
                    conn,
                    f"INSERT INTO {TABLE} (name, tenant, priority, retry_after, payload, headers) "
                    f"SELECT %s, CONCAT('t', seq %% {tenants}), seq %% {PRIORITIES}, %s, "
                    f"CONCAT('{{\"n\":', seq, '}}'), %s FROM seq_{done + 1}_to_{done + step}",
                    (GROUP, naive, with_headers),
                )
                done += step
            if index:
                run_sql(db, conn, claim_index)
            settle(db, conn)
        else:
            text = due.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
            conn.execute("BEGIN")
            conn.execute(  # (the recursive select yields 1 even for n = 0: LIMIT it)
                f"WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?) "
                f"INSERT INTO {TABLE} (name, tenant, priority, retry_after, payload, headers) "
                f"SELECT ?, 't' || (x % {tenants}), x % {PRIORITIES}, ?, "
                f"CAST('{{\"n\":' || x || '}}' AS BLOB), ? FROM g LIMIT ?",
                (n, GROUP, text, with_headers, n),
            )
            conn.execute("COMMIT")
            if index:
                conn.execute(claim_index)
            settle(db, conn)


def settle(db: str, conn: Any) -> None:
    """Leave the server settled after a fill: fresh statistics, a checkpoint."""
    if db == "postgres":
        run_sql(db, conn, f"VACUUM ANALYZE {TABLE}")
        run_sql(db, conn, "CHECKPOINT")
    elif db == "mysql":
        run_sql(db, conn, f"ANALYZE TABLE {TABLE}")
    else:
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def key_every_row(db: str, url: str) -> None:
    """Give every row of the bench table a dedup key of its own (``k<id>``), then let the
    server settle again: the Unique index holds one entry per row, as keyed publishes leave it."""
    key = "CONCAT('k', id)" if db == "mysql" else "'k' || id"
    with connect(db, url) as conn:
        run_sql(db, conn, f"UPDATE {TABLE} SET dedup = {key}")
        settle(db, conn)


def remaining(db: str, url: str) -> int:
    with connect(db, url) as conn:
        return int(run_sql(db, conn, f"SELECT count(*) FROM {TABLE}")[0][0])


def emit(result: dict[str, Any]) -> None:
    """A bench subprocess's result: one JSON line, the last of its stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def lease_token(now: datetime, lease: timedelta) -> datetime:
    """The lease form's token: ``now + lease`` rounded up to a whole second (as trinbox)."""
    end = now + lease
    whole = end.replace(microsecond=0)
    return whole if whole == end else whole + timedelta(seconds=1)
