"""A fresh database per driver test, on the PostgreSQL / MariaDB servers named by
``TRINBOX_PG_DSN`` / ``TRINBOX_MYSQL_DSN`` (admin DSNs; the defaults are the ports of
scripts/start-postgres and scripts/start-mariadb), and the few SQL spellings the tests
shared by both drivers need.

A server that cannot be reached skips the test, or fails it when
``TRINBOX_REQUIRE_DATABASES=1`` (CI). Each database is dropped after its test.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, NoReturn, overload
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

from trinbox._drivers import mysql, postgres
from trinbox.errors import ConnectError

Kind = Literal["postgres", "mysql"]
TestPool = postgres.PgPool | mysql.MySqlPool
TestConnection = postgres.PgConnection | mysql.MySqlConnection

DEFAULT_DSN: dict[Kind, str] = {
    "postgres": "postgresql://postgres@127.0.0.1:54329/postgres",
    "mysql": "mysql://trinbox:trinbox@127.0.0.1:33079/trinbox",
}
DSN_ENV: dict[Kind, str] = {"postgres": "TRINBOX_PG_DSN", "mysql": "TRINBOX_MYSQL_DSN"}


@dataclass(frozen=True)
class Backend:
    """One fresh database, and the few SQL spellings the shared tests need."""

    kind: Kind
    url: str

    def q(self, sql: str) -> str:
        """Write tests with ``?`` placeholders; this gives ``$n`` or ``%s``."""
        if self.kind == "mysql":
            return sql.replace("?", "%s")
        count = 0

        def number(_: re.Match[str]) -> str:
            nonlocal count
            count += 1
            return f"${count}"

        return re.sub(r"\?", number, sql)

    @property
    def sleep(self) -> str:
        return "SELECT pg_sleep(5)" if self.kind == "postgres" else "SELECT SLEEP(5)"

    @property
    def kill(self) -> str:
        """Ends the session with the given id; waits for it on PostgreSQL."""
        if self.kind == "postgres":
            return "SELECT pg_terminate_backend($1, 5000)"
        return "KILL CONNECTION %s"

    @property
    def open_transactions(self) -> str:
        """Sessions of this database other than the caller's with a transaction open."""
        if self.kind == "postgres":
            return (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            )
        return (
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX AS t "
            "JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id "
            "WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id <> CONNECTION_ID()"
        )

    async def settle_transaction_list(self) -> None:
        """MariaDB refreshes INNODB_TRX only when nobody read it for 0.1 s (a server-side
        cache, with no event to wait on): let that much real time pass before reading it."""
        if self.kind == "mysql":
            await trio.sleep(0.15)

    @property
    def sessions(self) -> str:
        """Ids of the sessions on this database."""
        if self.kind == "postgres":
            return "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        return "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()"

    @property
    def setup(self) -> tuple[str, ...]:
        """Per-session settings for the lock tests: quick deadlock checks, bounded waits."""
        if self.kind == "postgres":
            return ("SET deadlock_timeout = '50ms'", "SET lock_timeout = '10s'")
        return ("SET SESSION innodb_lock_wait_timeout = 10",)

    async def open_pool(self, max_size: int) -> TestPool:
        if self.kind == "postgres":
            return await postgres.open_pool(self.url, max_size=max_size)
        return await mysql.open_pool(self.url, max_size=max_size)


def session_id(conn: TestConnection) -> int:
    if isinstance(conn, postgres.PgConnection):
        return conn.server_pid
    return conn.thread_id


def _with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


def _unreachable(kind: Kind, dsn: str, exc: Exception) -> NoReturn:
    msg = f"{kind} server at {dsn} is not reachable ({exc}); start it with scripts/start-{kind}"
    if os.environ.get("TRINBOX_REQUIRE_DATABASES") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@asynccontextmanager
async def fresh_database(kind: Kind) -> AsyncIterator[Backend]:
    """Create a database through the admin DSN; drop it (shielded) afterwards."""
    admin_dsn = os.environ.get(DSN_ENV[kind], DEFAULT_DSN[kind])
    name = f"trinbox_drv_{uuid.uuid4().hex[:12]}"
    try:
        admin = await Backend(kind, admin_dsn).open_pool(1)
    except ConnectError as exc:
        _unreachable(kind, admin_dsn, exc)
    try:
        conn = await admin.acquire()
        try:
            await conn.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.give_back(conn)
        try:
            yield Backend(kind, _with_database(admin_dsn, name))
        finally:
            with trio.CancelScope(shield=True):
                conn = await admin.acquire()
                try:
                    force = " WITH (FORCE)" if kind == "postgres" else ""
                    await conn.execute(f"DROP DATABASE IF EXISTS {name}{force}")
                finally:
                    await admin.give_back(conn)
    finally:
        await admin.aclose()


@overload
def using(pool: postgres.PgPool) -> AbstractAsyncContextManager[postgres.PgConnection]: ...
@overload
def using(pool: mysql.MySqlPool) -> AbstractAsyncContextManager[mysql.MySqlConnection]: ...
@overload
def using(pool: TestPool) -> AbstractAsyncContextManager[TestConnection]: ...
def using(pool: TestPool) -> AbstractAsyncContextManager[TestConnection]:
    """A connection of ``pool`` for the block, released (shielded) after it."""
    return _using(pool)


@asynccontextmanager
async def _using(pool: TestPool) -> AsyncIterator[TestConnection]:
    conn = await pool.acquire()
    try:
        yield conn
    finally:
        await pool.give_back(conn)
