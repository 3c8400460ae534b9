"""The publish insert for a driver trinbox does not own: the user's psycopg, PyMySQL, sqlite3
or SQLAlchemy connection, inside the user's own transaction (``broker.insert_statement``).

The statement is the dialect's own insert (``Dialect.insert_sql``), its parts rendered once in
the DB-API paramstyle the user names, so that no character of a name is read as a placeholder:

    qmark      ``?``            tuple   sqlite3 (and aiosqlite), pyodbc
    format     ``%s``           tuple   psycopg 3, psycopg2, PyMySQL, mysqlclient, pg8000
    named      ``:name``        dict    sqlite3
    pyformat   ``%(name)s``     dict    psycopg 3, psycopg2, PyMySQL, mysqlclient
    sqlalchemy ``:name``        dict    SQLAlchemy ``conn.execute(text(sql), params)``

The text around the placeholders is written as the driver reads it. ``format`` and
``pyformat`` are interpolated by the client (``query % args`` in PyMySQL, psycopg's own parser
in psycopg), which sees a ``%`` anywhere, inside a quoted name too: each is written ``%%``.
``qmark`` and ``named`` are parsed by SQLite itself, whose tokenizer keeps a quoted name whole:
the text is written as is. SQLAlchemy's ``text()`` reads ``:word`` anywhere as a bound name and
turns ``\\:`` into ``:``: each ``:`` of the text is written ``\\:`` (a ``\\`` before a ``:`` is
then kept too, since the unescaping takes one backslash, the one just before the colon);
SQLAlchemy doubles ``%`` itself when its driver interpolates. DB-API's ``numeric`` (``:1``) is
left out: no driver of the three databases takes it (sqlite3 reads ``:1`` as a name).

Bound names (named styles) are the columns' names when those are plain ASCII identifiers, and
``p1``, ``p2``... (by position) for names no style could carry (``%(a b)s``, ``:é``); a name
is never used twice, compared case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, TypeAlias, get_args

from ..errors import DeclarationError
from ._statement import Frag, Param, Sql

__all__ = [
    "NamedStyle",
    "Paramstyle",
    "PositionalStyle",
    "bind_names",
    "check_paramstyle",
    "render_for_driver",
]

PositionalStyle: TypeAlias = Literal["qmark", "format"]
"""Styles whose parameters are a tuple, in placeholder order."""
NamedStyle: TypeAlias = Literal["named", "pyformat", "sqlalchemy"]
"""Styles whose parameters are a dict, by bound name."""
Paramstyle: TypeAlias = Literal[PositionalStyle, NamedStyle]

PARAMSTYLES: tuple[str, ...] = (*get_args(PositionalStyle), *get_args(NamedStyle))
_NAMED = frozenset(get_args(NamedStyle))

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_paramstyle(style: object) -> Paramstyle:
    """``style`` if it is one of :data:`PARAMSTYLES`, else ``ValueError`` naming them (for
    callers mypy does not check)."""
    if style in PARAMSTYLES:
        return style  # type: ignore[return-value]
    styles = ", ".join(repr(s) for s in PARAMSTYLES)
    msg = (
        f"insert_statement renders one of the DB-API paramstyles {styles}, found {style!r}; "
        f"name your driver's style (psycopg and PyMySQL: 'format' or 'pyformat', sqlite3: "
        f"'qmark' or 'named', SQLAlchemy text(): 'sqlalchemy'), or leave it out for the "
        f"broker's own driver"
    )
    raise ValueError(msg)


def is_named(style: Paramstyle) -> bool:
    return style in _NAMED


def bind_names(columns: tuple[str, ...]) -> dict[str, str]:
    """The bound name of each column: the column's own name when it is a plain ASCII
    identifier, else ``p<position>``; ``_2``, ``_3``... make a name unique (compared
    case-insensitively, in case a driver folds them)."""
    found: dict[str, str] = {}
    taken: set[str] = set()
    for column in columns:  # plain names first: they keep themselves whatever comes later
        if _PLAIN.match(column) and column.casefold() not in taken:
            found[column] = column
            taken.add(column.casefold())
    for position, column in enumerate(columns, start=1):
        if column in found:
            continue
        name, n = f"p{position}", 1
        while name.casefold() in taken:
            n += 1
            name = f"p{position}_{n}"
        found[column] = name
        taken.add(name.casefold())
    return found


def _text(text: str, style: Paramstyle) -> str:
    if style in ("format", "pyformat"):
        return text.replace("%", "%%")
    if style == "sqlalchemy":
        return text.replace(":", "\\:")
    return text


def _placeholder(name: str, style: Paramstyle) -> str:
    if style == "qmark":
        return "?"
    if style == "format":
        return "%s"
    if style == "pyformat":
        return f"%({name})s"
    return f":{name}"


def render_for_driver(
    sql: Frag, values: Mapping[str, object], style: Paramstyle
) -> tuple[str, tuple[object, ...]] | tuple[str, dict[str, object]]:
    """``sql`` in ``style``, with its parameters: a tuple in placeholder order for the
    positional styles, a dict by bound name for the named ones. ``values`` are by slot name
    (the insert's slots are its columns)."""
    parts = sql.parts if isinstance(sql, Sql) else (sql,)
    slots = [p.name for p in parts if isinstance(p, Param)]
    if len(set(slots)) != len(slots):
        # Not reached by the insert (one slot per column); a repeated slot would bind twice.
        msg = f"a statement for a driver binds each parameter once, found {slots}"
        raise DeclarationError(msg)
    names = bind_names(tuple(slots))
    text: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(_text(part, style))
        else:
            text.append(_placeholder(names[part.name], style))
    rendered = "".join(text)
    if is_named(style):
        return rendered, {names[slot]: values[slot] for slot in slots}
    return rendered, tuple(values[slot] for slot in slots)
