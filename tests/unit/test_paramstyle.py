"""The publish insert rendered for the user's own driver (trinbox/_dialects/_paramstyle.py),
without a database: each DB-API paramstyle's placeholders, the text around them written as
that driver reads it, and the bound names. SQLAlchemy's ``text()`` is checked by SQLAlchemy
itself: compiled for psycopg, PyMySQL and sqlite3, the ``"sqlalchemy"`` rendering of any
names becomes exactly the rendering trinbox gives that driver directly. The end-to-end half,
inside real transactions, is tests/integration/test_own_driver.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mysql, postgresql, sqlite

from trinbox import Column, Id, Inbox, Lease, LockedUntil, Payload, RetryAfter, SqlBroker
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import Dialect
from trinbox._dialects._paramstyle import bind_names, render_for_driver
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox._errors import DeclarationError

from .._names import declare, shapes


class Hostile(Inbox[Lease], table="q%s:a?"):
    id: Annotated[int, Id(generated=True), Column("i:d")]
    retry_after: Annotated[datetime, RetryAfter(), Column("re%try")]
    locked_until: Annotated[datetime | None, LockedUntil(), Column("\\:x")]
    payload: Annotated[bytes, Payload()]
    note: Annotated[str, Column("%(n)s")]


def values_of(dialect: Dialect) -> dict[str, object]:
    return {c.column: c.column.upper() for c in spec_of(Hostile).insert_columns}


GOLDEN = {
    "qmark": (
        "INSERT INTO `q%s:a?` (`re%try`, `\\:x`, `payload`, `%(n)s`) VALUES (?, ?, ?, ?)",
        ("RE%TRY", "\\:X", "PAYLOAD", "%(N)S"),
    ),
    "named": (
        "INSERT INTO `q%s:a?` (`re%try`, `\\:x`, `payload`, `%(n)s`) "
        "VALUES (:p1, :p2, :payload, :p4)",
        {"p1": "RE%TRY", "p2": "\\:X", "payload": "PAYLOAD", "p4": "%(N)S"},
    ),
    "format": (
        "INSERT INTO `q%%s:a?` (`re%%try`, `\\:x`, `payload`, `%%(n)s`) VALUES (%s, %s, %s, %s)",
        ("RE%TRY", "\\:X", "PAYLOAD", "%(N)S"),
    ),
    "pyformat": (
        "INSERT INTO `q%%s:a?` (`re%%try`, `\\:x`, `payload`, `%%(n)s`) "
        "VALUES (%(p1)s, %(p2)s, %(payload)s, %(p4)s)",
        {"p1": "RE%TRY", "p2": "\\:X", "payload": "PAYLOAD", "p4": "%(N)S"},
    ),
    "sqlalchemy": (
        "INSERT INTO `q%s\\:a?` (`re%try`, `\\\\:x`, `payload`, `%(n)s`) "
        "VALUES (:p1, :p2, :payload, :p4)",
        {"p1": "RE%TRY", "p2": "\\:X", "payload": "PAYLOAD", "p4": "%(N)S"},
    ),
}


@pytest.mark.parametrize("style", list(GOLDEN))
def test_each_style_writes_its_placeholders_and_keeps_names_out_of_them(style: Any) -> None:
    dialect = SqliteDialect()
    sql, params = render_for_driver(dialect.insert_sql(spec_of(Hostile)), values_of(dialect), style)
    assert (sql, params) == GOLDEN[style]


def test_bound_names_are_plain_column_names_or_positions_never_twice() -> None:
    assert bind_names(("name", "retry_after", "Note_2")) == {
        "name": "name",
        "retry_after": "retry_after",
        "Note_2": "Note_2",
    }
    # Not a plain identifier: its position; a position a plain name took: a suffix; names
    # compare case-insensitively.
    assert bind_names(("a b", "é", "p1", "P2", "name", "NAME")) == {
        "a b": "p1_2",
        "é": "p2_2",
        "p1": "p1",
        "P2": "P2",
        "name": "name",
        "NAME": "p6",
    }


def test_an_unknown_paramstyle_names_the_styles_and_the_drivers() -> None:
    broker = SqlBroker.sqlite("sqlite:///unused.db")
    with pytest.raises(ValueError) as caught:
        broker.insert_statement(Hostile, b"m", note="n", paramstyle="numeric")  # type: ignore[call-overload]
    assert str(caught.value) == (
        "insert_statement renders one of the DB-API paramstyles 'qmark', 'format', 'named', "
        "'pyformat', 'sqlalchemy', found 'numeric'; name your driver's style (psycopg and "
        "PyMySQL: 'format' or 'pyformat', sqlite3: 'qmark' or 'named', SQLAlchemy text(): "
        "'sqlalchemy'), or leave it out for the broker's own driver"
    )


def test_a_refused_publish_is_refused_in_every_style() -> None:
    broker = SqlBroker.sqlite("sqlite:///unused.db")
    for style in GOLDEN:
        named: Any = style
        with pytest.raises(DeclarationError, match="found none for note"):
            broker.insert_statement(Hostile, b"m", paramstyle=named)


# -- SQLAlchemy's text(), compiled by SQLAlchemy --------------------------------------------

# Each database's SQLAlchemy driver, and the style trinbox renders for that driver directly.
ENGINES: dict[str, tuple[Dialect, sqlalchemy.engine.Dialect, Any]] = {
    "postgres": (PostgresDialect(), postgresql.psycopg.dialect(), "pyformat"),  # type: ignore[no-untyped-call]
    "mariadb": (MySqlDialect(), mysql.pymysql.dialect(), "format"),
    "sqlite": (SqliteDialect(), sqlite.pysqlite.dialect(), "qmark"),
}


def compiled(sql: str, params: dict[str, object], engine: sqlalchemy.engine.Dialect) -> Any:
    clause = sqlalchemy.text(sql)
    assert set(clause._bindparams) == set(params)  # every bound name found, and only those
    # Untyped binds: SQLAlchemy's psycopg dialect writes a cast after a typed one (%(p)s::INTEGER).
    done = clause.compile(dialect=engine)
    return done.string, done.positiontup


@pytest.mark.parametrize("name", list(ENGINES))
@settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(data=st.data())
def test_sqlalchemy_text_reads_any_names_as_the_driver_would_be_given_them(
    name: str, data: st.DataObject
) -> None:
    dialect, engine, direct = ENGINES[name]
    shape = data.draw(shapes("lease", name))
    try:
        spec = spec_of(declare(shape))
        insert = dialect.insert_sql(spec)
    except DeclarationError:
        return  # refused before anything renders (tests/unit/test_names.py)
    values: dict[str, object] = {c.column: i for i, c in enumerate(spec.insert_columns)}
    sql, params = render_for_driver(insert, values, "sqlalchemy")
    assert isinstance(params, dict)
    want_sql, want_params = render_for_driver(insert, values, direct)
    got_sql, order = compiled(sql, params, engine)
    assert got_sql == want_sql
    if isinstance(want_params, tuple):  # positional: SQLAlchemy binds in the same order
        assert tuple(params[k] for k in order) == want_params
    else:
        assert params == want_params


@pytest.mark.parametrize(
    "text",
    [":a", "\\:a", "\\:", ":a:", "a::b", "\\::b", ":ab:c", "::", ":a$b", "\\\\:a", "%:a%", ":é"],
)
@pytest.mark.parametrize("name", list(ENGINES))
def test_sqlalchemy_text_keeps_colons_and_backslashes_of_a_name(name: str, text: str) -> None:
    dialect, engine, direct = ENGINES[name]
    table = dialect.quoted(text)
    insert = "INSERT INTO " + table + " DEFAULT VALUES"
    sql, params = render_for_driver(insert, {}, "sqlalchemy")
    assert params == {}
    want, _ = render_for_driver(insert, {}, direct)
    assert compiled(sql, {}, engine)[0] == want
