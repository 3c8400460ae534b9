"""Portable placeholders: one SQL text for every database, with ``:name`` parameters bound
from a mapping, for the statements handlers run through ``keys.Pool`` and ``keys.Tx``.

The text is read once per (text, database) as that database's lexer reads it, and becomes an
``Sql`` of text and parameter slots, which ``render`` writes in the driver's own placeholders
(``$1`` asyncpg, ``%s`` aiomysql, ``?`` sqlite3), as every statement of trinbox's own is
written (``_statement.py``): a repeated name binds once on PostgreSQL and once per use
elsewhere, and on MySQL each ``%`` of the text is written ``%%`` (PyMySQL interpolates on the
client), so the portable text writes a ``%`` as itself.

A ``:name`` is a placeholder only outside what the database reads as a whole: string literals
(``'it''s'``; with backslash escapes in MySQL's strings and PostgreSQL's ``E'...'``), quoted
names (``"a:b"``, MySQL's and SQLite's backquotes, SQLite's ``[...]``), PostgreSQL's dollar
quotes (``$$...$$``, ``$fn$...$fn$``) and comments (``--``, ``/* */``, MySQL's ``#``), and
only where no letter, digit or ``_`` comes right before the colon (``a:b`` is text). A ``::``
(PostgreSQL's cast, ``:id::int`` too) is text, and so is ``\\:``, written as ``:`` (a slice
``a[lo\\:hi]`` on PostgreSQL, a ``:word`` that must stay text).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ._statement import P, ParamStyle, Sql, render

__all__ = ["bind_portable"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z0-9_$]")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


@dataclass(frozen=True, slots=True)
class _Lexicon:
    """What one database reads as a whole, besides ``'...'`` and ``"..."`` and comments."""

    backslash_strings: bool = False  # MySQL: \\' inside '...' and "..." is an escape
    e_strings: bool = False  # PostgreSQL: E'...' takes backslash escapes
    dollar_quotes: bool = False  # PostgreSQL: $tag$...$tag$
    backquotes: bool = False  # MySQL, SQLite: `name`
    brackets: bool = False  # SQLite: [name]
    hash_comments: bool = False  # MySQL: # to the end of the line


# Each placeholder style is one database's driver, so it names the lexer too.
_LEXICONS: dict[ParamStyle, _Lexicon] = {
    "dollar": _Lexicon(e_strings=True, dollar_quotes=True),
    "format": _Lexicon(backslash_strings=True, backquotes=True, hash_comments=True),
    "qmark": _Lexicon(backquotes=True, brackets=True),
}


def _quoted_end(sql: str, start: int, quote: str, backslashes: bool) -> int:
    """The index after the quoted run opened at ``start`` (a doubled quote is one quote; with
    ``backslashes`` a backslash escapes the next character); the text's end if unclosed."""
    i = start + 1
    while i < len(sql):
        char = sql[i]
        if backslashes and char == "\\":
            i += 2
            continue
        if char == quote:
            if sql.startswith(quote, i + 1):
                i += 2
                continue
            return i + 1
        i += 1
    return len(sql)


def _whole_run(sql: str, i: int, lex: _Lexicon) -> int | None:
    """The end of the literal, quoted name or comment starting at ``i``, or None."""
    char = sql[i]
    after_word = i > 0 and _WORD.match(sql[i - 1]) is not None
    if char == "'":
        e_string = (
            lex.e_strings
            and i > 0
            and sql[i - 1] in "eE"
            and (i < 2 or _WORD.match(sql[i - 2]) is None)
        )
        return _quoted_end(sql, i, "'", lex.backslash_strings or e_string)
    if char == '"':
        return _quoted_end(sql, i, '"', lex.backslash_strings)
    if char == "`" and lex.backquotes:
        return _quoted_end(sql, i, "`", backslashes=False)
    if char == "[" and lex.brackets:
        end = sql.find("]", i + 1)
        return len(sql) if end < 0 else end + 1
    if sql.startswith("--", i) or (char == "#" and lex.hash_comments):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    if sql.startswith("/*", i):
        end = sql.find("*/", i + 2)
        return len(sql) if end < 0 else end + 2
    if char == "$" and lex.dollar_quotes and not after_word:
        tag = _DOLLAR_TAG.match(sql, i)
        if tag is not None:
            end = sql.find(tag.group(), tag.end())
            return len(sql) if end < 0 else end + len(tag.group())
    return None


@functools.lru_cache(maxsize=512)
def _parse(sql: str, style: ParamStyle) -> Sql:
    """``sql`` as text and ``:name`` slots, read as the database of ``style`` reads it."""
    lex = _LEXICONS[style]
    parts: list[str | Sql] = []
    text: list[str] = []
    i = 0
    while i < len(sql):
        char = sql[i]
        end = _whole_run(sql, i, lex)
        if end is not None:
            text.append(sql[i:end])
            i = end
        elif sql.startswith("\\:", i):
            text.append(":")
            i += 2
        elif sql.startswith("::", i):
            text.append("::")
            i += 2
        elif (
            char == ":"
            and (i == 0 or _WORD.match(sql[i - 1]) is None)
            and (name := _NAME.match(sql, i + 1)) is not None
        ):
            parts.extend(("".join(text), P(name.group())))
            text = []
            i = name.end()
        else:
            text.append(char)
            i += 1
    parts.append("".join(text))
    return Sql(*parts)


@functools.lru_cache(maxsize=512)
def _rendered(sql: str, style: ParamStyle) -> tuple[str, tuple[str, ...]]:
    statement = render("handler", _parse(sql, style), style)
    return statement.sql, statement.params


def bind_portable(
    sql: str, values: Mapping[str, object], style: ParamStyle
) -> tuple[str, tuple[object, ...]]:
    """``sql``'s ``:name`` placeholders in the driver's style, and their values in binding
    order from ``values`` (names it does not use are left alone), or ``ValueError`` naming a
    placeholder that has no value."""
    text, names = _rendered(sql, style)
    missing = sorted({name for name in names if name not in values})
    if missing:
        given = ", ".join(sorted(map(str, values))) or "nothing"
        msg = (
            f"a statement with :name placeholders binds each from the mapping it is given, "
            f"found no value for {', '.join(missing)} (given: {given}); add it to the "
            f"mapping, or write \\: for a colon that is text"
        )
        raise ValueError(msg)
    return text, tuple(values[name] for name in names)
