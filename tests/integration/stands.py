"""Database stands for the integration matrix: SQLite files, and fresh databases on the
throwaway PostgreSQL and MariaDB servers of scripts/start-postgres and scripts/start-mariadb.

A stand is one database for one test. It reads and writes synchronously through a driver
trinbox does not use (sqlite3, psycopg, PyMySQL), so assertions never go through the code under
test. Test SQL uses ``?`` placeholders and plain lower-case identifiers on every stand.

A server that cannot be reached skips its tests, or fails them when
``TRINBOX_REQUIRE_DATABASES=1`` (scripts/test and CI).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import pymysql
import pytest

from trinbox import Pauses, SqlBroker
from trinbox.testing import TrioClock

StandName = Literal["sqlite", "postgres", "mariadb"]
STANDS: tuple[StandName, ...] = ("sqlite", "postgres", "mariadb")
SERVER_STANDS: tuple[StandName, ...] = ("postgres", "mariadb")

PG_DSN = os.environ.get("TRINBOX_PG_DSN", "postgresql://postgres@127.0.0.1:54329/postgres")
MYSQL_DSN = os.environ.get("TRINBOX_MYSQL_DSN", "mysql://trinbox:trinbox@127.0.0.1:33079/trinbox")
_names = itertools.count()


class Stand:
    """One database: its URL, a broker on it, and synchronous reads and scripts."""

    name: StandName
    url: str

    def script(self, ddl: str) -> None:
        """Run several ``;``-separated statements."""
        raise NotImplementedError

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def execute(self, sql: str, *params: object) -> int:
        raise NotImplementedError

    def value(self, sql: str, *params: object) -> Any:
        found = self.rows(sql, *params)
        return found[0][0] if found else None

    def broker(
        self,
        *,
        poll_interval: float = 0.05,
        lease: float = 30.0,
        pool_size: int = 8,
        url: str | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[Any]:
        """A broker on the stand's database (``url``: the same database by another way, a
        relay of the test's own; ``pauses``: its pause table)."""
        options: dict[str, Any] = {
            "poll_interval": poll_interval,
            "lease": lease,
            "pool_size": pool_size,
            "clock": TrioClock(),
            "pauses": pauses,
        }
        url = url or self.url
        if self.name == "sqlite":
            return SqlBroker.sqlite(url, **options)
        if self.name == "postgres":
            return SqlBroker.postgres(url, **options)
        return SqlBroker.mysql(url, **options)


class SqliteStand(Stand):
    name: StandName = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def script(self, ddl: str) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.executescript(ddl)

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path)
        try:
            return [tuple(r) for r in conn.execute(sql, params)]
        finally:
            conn.close()

    def execute(self, sql: str, *params: object) -> int:
        with sqlite3.connect(self.path) as conn:
            return conn.execute(sql, params).rowcount


class PostgresStand(Stand):
    name: StandName = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def script(self, ddl: str) -> None:
        with self._connect() as conn:
            conn.execute(ddl)

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            cur = conn.execute(sql.replace("?", "%s"), params or None)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def execute(self, sql: str, *params: object) -> int:
        with self._connect() as conn:
            return int(conn.execute(sql.replace("?", "%s"), params or None).rowcount)


class MariaStand(Stand):
    name: StandName = "mariadb"

    def __init__(self, url: str) -> None:
        self.url = url
        parts = urlsplit(url)
        self._args = {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 3306,
            "user": parts.username or "root",
            "password": parts.password or "",
            "database": parts.path.lstrip("/"),
            "autocommit": True,
        }

    def _connect(self) -> pymysql.connections.Connection:
        return pymysql.connect(**self._args)  # type: ignore[arg-type]

    def connect(self, *, autocommit: bool = True) -> pymysql.connections.Connection:
        """A connection of the test's own, to hold a transaction open beside trinbox's."""
        return pymysql.connect(**{**self._args, "autocommit": autocommit})  # type: ignore[arg-type]

    def script(self, ddl: str) -> None:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                for statement in ddl.split(";"):
                    if statement.strip():
                        cur.execute(statement)
        finally:
            conn.close()

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql.replace("?", "%s"), params or None)
                return [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()

    def execute(self, sql: str, *params: object) -> int:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                return int(cur.execute(sql.replace("?", "%s"), params or None))
        finally:
            conn.close()


def drop_mariadb_database(cur: Any, database: str) -> None:
    """Kill the sessions a test left on ``database`` (they would hold metadata locks on the
    drop), then drop it."""
    cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s", (database,))
    for (session,) in cur.fetchall():
        try:
            cur.execute(f"KILL CONNECTION {int(session)}")
        except pymysql.Error:
            pass
    cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


def _unreachable(what: str, exc: BaseException) -> None:
    message = f"{what} is not reachable ({exc}); start it with scripts/test or scripts/start-*"
    if os.environ.get("TRINBOX_REQUIRE_DATABASES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


@contextmanager
def fresh_stand(name: StandName, tmp_path: Path) -> Iterator[Stand]:
    """A new, empty database on the named stand, dropped afterwards."""
    if name == "sqlite":
        yield SqliteStand(tmp_path / "queue.db")
        return
    database = f"tb_{os.getpid()}_{next(_names)}"
    if name == "postgres":
        import psycopg

        try:
            admin = psycopg.connect(PG_DSN, autocommit=True)
        except psycopg.Error as exc:
            _unreachable("PostgreSQL", exc)
        with admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        try:
            yield PostgresStand(_with_database(PG_DSN, database))
        finally:
            with psycopg.connect(PG_DSN, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        return
    maria = MariaStand(MYSQL_DSN)
    try:
        conn = maria._connect()
    except pymysql.Error as exc:
        _unreachable("MariaDB", exc)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}`")
    finally:
        conn.close()
    try:
        yield MariaStand(_with_database(MYSQL_DSN, database))
    finally:
        conn = maria._connect()
        try:
            with conn.cursor() as cur:
                drop_mariadb_database(cur, database)
        finally:
            conn.close()
