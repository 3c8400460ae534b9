"""``broker.insert_statement(..., paramstyle=...)`` inside a real transaction of the user's own
driver or ORM (issue 10, item 7): psycopg, SQLAlchemy Core and an ORM Session on PostgreSQL,
PyMySQL and SQLAlchemy on MariaDB, sqlite3 and SQLAlchemy on SQLite. A queue row and a business
write commit together, or roll back together and leave no row; an app then handles the
committed row, its message decoded equal to what was published. Once on the matrix's
``email_jobs`` table and once on a table whose every name holds ``%``, ``:``, ``?`` and what
each driver reads in them (``%s``, ``%(x)s``, ``:name``, ``\\:``, ``::``, ``$1``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pymysql
import pytest
import sqlalchemy
import sqlalchemy.orm
import trio

from trinbox import (
    Column,
    Group,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    SystemClock,
    keys,
    subscriber,
)
from trinbox.schema import DialectName, ddl
from trinbox.testing import settled

from .matrix.schema import AUDIT, EMAIL_JOBS, LeasedEmail
from .serving import make_app, serving
from .stands import MariaStand, Stand, StandName, fresh_stand


@dataclass
class Note:
    text: str
    n: int


# -- a table whose names are what the drivers read as placeholders and escapes ---------------

H_TABLE = "q%s:a?%(x)s"
H_ID = "i\\:d"
H_GROUP = "g::x:ab:"
H_RETRY = "re?try %"
H_LOCKED = "lock:ed%%"
H_PAYLOAD = "pay:load$1"
H_DATA = ":data\\::"


class HostileJob(Inbox[Lease], table=H_TABLE):
    id: Annotated[int, Id(generated=True), Column(H_ID)]
    grp: Annotated[str, Group(), Column(H_GROUP)]
    retry_after: Annotated[datetime, RetryAfter(), Column(H_RETRY)]
    locked_until: Annotated[datetime | None, LockedUntil(), Column(H_LOCKED)]
    payload: Annotated[bytes, Payload(), Column(H_PAYLOAD)]
    data: Annotated[str, Column(H_DATA)]


def quote(stand: StandName, name: str) -> str:
    mark = '"' if stand == "postgres" else "`"
    return mark + name.replace(mark, mark * 2) + mark


_TYPES: dict[StandName, tuple[str, str, str, str, str, str]] = {
    # id, group, retry_after, locked_until, payload, data
    "sqlite": ("INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT NOT NULL", "TEXT NOT NULL", "TEXT",
               "BLOB", "TEXT NOT NULL"),
    "postgres": ("BIGSERIAL PRIMARY KEY", "TEXT NOT NULL", "TIMESTAMPTZ NOT NULL",
                 "TIMESTAMPTZ", "BYTEA", "TEXT NOT NULL"),
    "mariadb": ("BIGINT AUTO_INCREMENT PRIMARY KEY", "VARCHAR(191) NOT NULL",
                "DATETIME(6) NOT NULL", "DATETIME", "LONGBLOB", "VARCHAR(191) NOT NULL"),
}  # fmt: skip


def hostile_ddl(stand: StandName) -> str:
    names = (H_ID, H_GROUP, H_RETRY, H_LOCKED, H_PAYLOAD, H_DATA)
    columns = ", ".join(f"{quote(stand, n)} {t}" for n, t in zip(names, _TYPES[stand], strict=True))
    return f"CREATE TABLE {quote(stand, H_TABLE)} ({columns})"


@dataclass(frozen=True)
class Table:
    """A queue table: how to create it, its row class, the fields a publish gives, and how
    to read its rows' retry_after."""

    name: str
    ddl: Callable[[StandName], str]
    row: type[Inbox[Any, Any]]
    fields: dict[str, Any]
    retry_after: Callable[[StandName], str]


TABLES = [
    Table(
        "email_jobs",
        lambda s: EMAIL_JOBS[s],
        LeasedEmail,
        {"name": "emails", "customer": "c1"},
        lambda s: "SELECT retry_after FROM email_jobs",
    ),
    Table(
        "hostile",
        hostile_ddl,
        HostileJob,
        {"grp": "emails", "data": "%s :x ?"},
        lambda s: f"SELECT {quote(s, H_RETRY)} FROM {quote(s, H_TABLE)}",
    ),
]

# -- the user's own drivers, each in a transaction of its own -------------------------------

Write = Callable[[list[tuple[str, Any]], bool], None]


def _sqlalchemy_url(stand: Stand) -> str:
    if stand.name == "sqlite":
        return stand.url
    scheme = "postgresql+psycopg" if stand.name == "postgres" else "mysql+pymysql"
    return scheme + stand.url[stand.url.index("://") :]


def _psycopg(stand: Stand) -> Write:
    def write(statements: list[tuple[str, Any]], commit: bool) -> None:
        with psycopg.connect(stand.url) as conn:  # a transaction opens at the first statement
            for sql, params in statements:
                conn.execute(sql, params)
            conn.commit() if commit else conn.rollback()

    return write


def _pymysql(stand: Stand) -> Write:
    assert isinstance(stand, MariaStand)

    def write(statements: list[tuple[str, Any]], commit: bool) -> None:
        conn = pymysql.connect(**{**stand._args, "autocommit": False})  # type: ignore[arg-type]
        try:
            conn.begin()
            with conn.cursor() as cur:
                for sql, params in statements:
                    cur.execute(sql, params)
            conn.commit() if commit else conn.rollback()
        finally:
            conn.close()

    return write


def _sqlite3(stand: Stand) -> Write:
    def write(statements: list[tuple[str, Any]], commit: bool) -> None:
        path = stand.url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("BEGIN")
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("COMMIT" if commit else "ROLLBACK")

    return write


def _sqlalchemy(stand: Stand) -> Write:
    def write(statements: list[tuple[str, Any]], commit: bool) -> None:
        engine = sqlalchemy.create_engine(_sqlalchemy_url(stand))
        try:
            with engine.connect() as conn:
                tx = conn.begin()
                for sql, params in statements:
                    conn.execute(sqlalchemy.text(sql), params)
                tx.commit() if commit else tx.rollback()
        finally:
            engine.dispose()

    return write


def _sqlalchemy_orm(stand: Stand) -> Write:
    def write(statements: list[tuple[str, Any]], commit: bool) -> None:
        engine = sqlalchemy.create_engine(_sqlalchemy_url(stand))
        try:
            with sqlalchemy.orm.Session(engine) as session:  # a transaction opens at once
                for sql, params in statements:
                    session.execute(sqlalchemy.text(sql), params)
                session.commit() if commit else session.rollback()
        finally:
            engine.dispose()

    return write


DRIVERS: dict[str, Callable[[Stand], Write]] = {
    "psycopg": _psycopg,
    "pymysql": _pymysql,
    "sqlite3": _sqlite3,
    "sqlalchemy": _sqlalchemy,
    "sqlalchemy-orm": _sqlalchemy_orm,
}

# (stand, driver, paramstyle); None is the broker's own driver's style, which PyMySQL and
# sqlite3 take too (aiomysql's %s, sqlite3's ?).
CASES: list[tuple[StandName, str, str | None]] = [
    ("postgres", "psycopg", "format"),
    ("postgres", "psycopg", "pyformat"),
    ("postgres", "sqlalchemy", "sqlalchemy"),
    ("postgres", "sqlalchemy-orm", "sqlalchemy"),
    ("mariadb", "pymysql", "format"),
    ("mariadb", "pymysql", "pyformat"),
    ("mariadb", "pymysql", None),
    ("mariadb", "sqlalchemy", "sqlalchemy"),
    ("sqlite", "sqlite3", "qmark"),
    ("sqlite", "sqlite3", "named"),
    ("sqlite", "sqlite3", None),
    ("sqlite", "sqlalchemy", "sqlalchemy"),
]

# The business write beside the queue row, in each style.
AUDIT_INSERT = {
    "format": ("INSERT INTO audit (note) VALUES (%s)", ("{}",)),
    "pyformat": ("INSERT INTO audit (note) VALUES (%(note)s)", {"note": "{}"}),
    "qmark": ("INSERT INTO audit (note) VALUES (?)", ("{}",)),
    "named": ("INSERT INTO audit (note) VALUES (:note)", {"note": "{}"}),
    "sqlalchemy": ("INSERT INTO audit (note) VALUES (:note)", {"note": "{}"}),
}


def audit(style: str, note: str) -> tuple[str, Any]:
    sql, params = AUDIT_INSERT[style]
    if isinstance(params, dict):
        return sql, {"note": note}
    return sql, (note,)


def read(stand: Stand, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as written: no parameters, so no driver reads a ``%`` or ``?`` in it
    (``Stand.rows`` turns ``?`` into ``%s``)."""
    if isinstance(stand, MariaStand):
        conn = stand._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()
    if stand.name == "postgres":
        with psycopg.connect(stand.url, autocommit=True) as pg:
            return [tuple(r) for r in pg.execute(sql.encode()).fetchall()]
    with contextlib.closing(sqlite3.connect(stand.url.removeprefix("sqlite:///"))) as lite:
        return [tuple(r) for r in lite.execute(sql)]


def own_broker(stand: Stand) -> SqlBroker[Any]:
    """A broker on the host's system clock, so that the due time is a bound value (the
    database clock's publish, which the server stamps, is test_database_clock.py's)."""
    if stand.name == "sqlite":
        return SqlBroker.sqlite(stand.url, poll_interval=0.05)
    if stand.name == "postgres":
        return SqlBroker.postgres(stand.url, poll_interval=0.05, clock=SystemClock())
    return SqlBroker.mysql(stand.url, poll_interval=0.05, clock=SystemClock())


def as_stored(stand: StandName, value: object) -> object:
    """A retry_after parameter as the stand reads it back."""
    if stand == "postgres":
        assert isinstance(value, datetime)
        assert value.tzinfo is not None  # psycopg would read a naive one in the session's zone
        return value
    if stand == "mariadb":
        assert isinstance(value, datetime)
        assert value.tzinfo is None  # DATETIME(6) holds naive UTC
        return value
    assert isinstance(value, str)  # the UTC text trinbox stores on SQLite
    return value


@pytest.fixture(params=CASES, ids=[f"{s}-{d}-{p}" for s, d, p in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Stand, str, str | None]]:
    stand_name, driver, style = request.param
    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(AUDIT[stand_name])
        yield stand, driver, style


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
async def test_a_row_written_in_the_users_transaction_is_handled(
    case: tuple[Stand, str, str | None], table: Table
) -> None:
    stand, driver, style = case
    stand.script(table.ddl(stand.name))
    broker = own_broker(stand)
    write = DRIVERS[driver](stand)
    own_style = style or {"mariadb": "format", "sqlite": "qmark"}[stand.name]

    def statement(note: Note) -> tuple[str, Any]:
        if style is None:
            return broker.insert_statement(table.row, note, **table.fields)
        named: Any = style  # a str here: the overloads pick the params' type by the literal
        return broker.insert_statement(table.row, note, paramstyle=named, **table.fields)

    undone = statement(Note("undone", 0))
    write([audit(own_style, "undone"), undone], False)
    assert stand.rows("SELECT COUNT(*) FROM audit") == [(0,)]
    assert read(stand, table.retry_after(stand.name)) == []

    kept = statement(Note("kept %s :x ?", 1))
    write([audit(own_style, "kept"), kept], True)
    assert stand.rows("SELECT note FROM audit") == [("kept",)]
    # The time is written as trinbox writes it (a time zone lost on the way would also leave
    # the row not yet due, below).
    params = kept[1]
    due = params[list(params)[1]] if isinstance(params, dict) else params[1]
    assert read(stand, table.retry_after(stand.name)) == [(as_stored(stand.name, due),)]

    got: list[Note] = []

    @subscriber(InboxQueue(table.row, "emails"))
    async def handle(note: Note) -> None:
        got.append(note)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == [Note("kept %s :x ?", 1)]
    assert read(stand, table.retry_after(stand.name)) == []  # acked: deleted


def test_the_time_written_on_each_database_is_the_brokers_clock_in_utc() -> None:
    """A clock in another zone (or a naive one) is written as trinbox's own driver writes it."""
    at = datetime(2026, 11, 29, 21, 37, 0, 5, tzinfo=UTC)
    zoned = at.astimezone(timezone(timedelta(hours=1)))
    cases: list[tuple[SqlBroker[Any], object]] = [
        (
            SqlBroker.sqlite("sqlite:///unused.db", clock=lambda: zoned),
            "2026-11-29 21:37:00.000005",
        ),
        (SqlBroker.postgres("postgresql://u@h/d", clock=lambda: at.replace(tzinfo=None)), at),
        (SqlBroker.mysql("mysql://u@h/d", clock=lambda: zoned), at.replace(tzinfo=None)),
    ]
    for broker, expected in cases:
        for style in ("qmark", "format", None):
            _, params = broker.insert_statement(LeasedEmail, {}, name="q", paramstyle=style)
            assert params[1] == expected
            if isinstance(expected, datetime):
                assert isinstance(params[1], datetime)
                assert params[1].tzinfo == expected.tzinfo
        _, named = broker.insert_statement(LeasedEmail, {}, name="q", paramstyle="pyformat")
        assert named["retry_after"] == expected


class HeadedEmail(Inbox[Lease], table="headed_emails"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


_DDL_NAMES: dict[StandName, DialectName] = {
    "postgres": "postgres",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}


async def test_headers_written_in_the_users_transaction_reach_the_handler(
    case: tuple[Stand, str, str | None],
) -> None:
    """The JSON text each dialect renders goes into its JSON column (jsonb, JSON, TEXT) through
    every driver, and comes back as the handler's keys.Headers."""
    stand, driver, style = case
    stand.script(";\n".join(ddl(HeadedEmail, _DDL_NAMES[stand.name])))
    broker = own_broker(stand)
    headers = {"tenant": "ä:b %s ?", "trace": "00-1"}
    named: Any = style
    statement = (
        broker.insert_statement(HeadedEmail, Note("n", 1), name="q", headers=headers)
        if style is None
        else broker.insert_statement(
            HeadedEmail, Note("n", 1), name="q", headers=headers, paramstyle=named
        )
    )
    DRIVERS[driver](stand)([statement], True)
    got: list[dict[str, str]] = []

    @subscriber(InboxQueue(HeadedEmail, "q"))
    async def handle(note: Note, found: keys.Headers) -> None:
        got.append(dict(found))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == [headers]


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
async def test_a_batch_written_in_the_users_transaction_is_handled(
    case: tuple[Stand, str, str | None], table: Table
) -> None:
    # insert_many_statement: one multi-row insert per chunk, every name as hostile as above.
    stand, driver, style = case
    stand.script(table.ddl(stand.name))
    broker = own_broker(stand)
    write = DRIVERS[driver](stand)

    def statements(notes: list[Note]) -> list[tuple[str, Any]]:
        if style is None:
            return list(broker.insert_many_statement(table.row, notes, chunk=2, **table.fields))
        named: Any = style
        found = broker.insert_many_statement(
            table.row, notes, chunk=2, paramstyle=named, **table.fields
        )
        return list(found)

    assert statements([]) == []
    write(statements([Note("undone", n) for n in range(3)]), False)
    assert read(stand, table.retry_after(stand.name)) == []
    notes = [Note(f"kept %s :x ? {n}", n) for n in range(5)]
    batch = statements(notes)
    assert len(batch) == 3  # chunks of two rows
    write(batch, True)
    got: list[Note] = []

    @subscriber(InboxQueue(table.row, "emails"))
    async def handle(note: Note) -> None:
        got.append(note)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 5)
    assert sorted(got, key=lambda n: n.n) == notes
