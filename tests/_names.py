"""Declared names for the property tests of issue 9 ("names are names"): Hypothesis strategies
that draw table, schema and column names and advisory key literals out of arbitrary Unicode
biased toward what SQL text, parameter markers and internal aliases are made of, and the rules
each server holds names to, as observed on the servers themselves (PostgreSQL 15, MariaDB 10.11,
SQLite 3.40; probed with their own clients, one CREATE TABLE per character).

The rules are written here independently of trinbox's own checks: a test asserts that trinbox
refuses exactly what they refuse, no more and no less.
"""

from __future__ import annotations

import types
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, cast

from hypothesis import strategies as st

from trinbox import (
    Advisory,
    Attempt,
    Column,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
)

__all__ = [
    "FORMS",
    "RULES",
    "Dialect",
    "NameRules",
    "Shape",
    "declare",
    "fold",
    "key_literals",
    "names",
    "refused_anywhere",
    "shapes",
]

Dialect = str  # "postgres" | "mariadb" | "sqlite"

# Pieces that once broke statements: the old in-band parameter marker, every placeholder
# style, every quote, comment and statement separators, the internal aliases of the dialects,
# SQL words the drivers look for, characters some server refuses, and an injection attempt.
PIECES = (
    "\u27e8",
    "\u27e9",
    "\u27e8id\u27e9",
    "\u27e8now\u27e9",
    "%",
    "%s",
    "%%",
    "%(a)s",
    "?",
    "?1",
    "$1",
    ":a",
    "@a",
    "'",
    '"',
    "`",
    "``",
    "\\",
    "[",
    "]",
    ";",
    "--",
    "/*",
    "*/",
    "{",
    "}",
    "(",
    ")",
    ",",
    "=",
    " ",
    "\t",
    "\n",
    "\u00a0",
    "\u0301",
    "\u202e",
    "\U0001f600",
    "\x00",
    "\ud800",
    "__lock",
    "__LOCK",
    "__claimed",
    "__stamped",
    "__row",
    "__candidates",
    "moved",
    "value",
    "sqlite_",
    "#mysql50#",
    " LIMIT ",
    "GET_LOCK(",
    "'); DROP TABLE x; --",
    "é",
    "Ω",
    "ß",
)


def names(*, max_pieces: int = 3, servable: bool = False) -> st.SearchStrategy[str]:
    """A non-empty name: a few pieces, each a biased piece, or short text of the first code
    points (Latin, controls, punctuation), of the Basic Multilingual Plane, or of any plane.
    ``servable`` names avoid what some server refuses (NUL, surrogates, characters past
    U+FFFF, trailing whitespace) and keep everything else."""
    if servable:
        tame = [p for p in PIECES if not refused_anywhere(p) and "\U0001f600" not in p]
        no_nul = "\x00"
        piece = st.one_of(
            st.sampled_from(tame),
            st.text(st.characters(max_codepoint=0x2FF, exclude_characters=no_nul), min_size=1),
            st.text(st.characters(max_codepoint=0xFFFF, exclude_characters=no_nul), min_size=1),
        )
        joined = st.lists(piece, min_size=1, max_size=max_pieces).map("".join)
        return joined.map(lambda s: s[:12].rstrip(" \t\n\v\f\r") or "n")
    piece = st.one_of(
        st.sampled_from(PIECES),
        st.text(st.characters(max_codepoint=0x2FF), min_size=1, max_size=6),
        st.text(st.characters(max_codepoint=0xFFFF), min_size=1, max_size=4),
        st.text(min_size=1, max_size=3),
    )
    return st.lists(piece, min_size=1, max_size=max_pieces).map("".join)


def key_literals() -> st.SearchStrategy[str]:
    """Literal text of a class statement's lock key (no braces: those open placeholders)."""
    return names(max_pieces=3).map(lambda s: s.replace("{", "").replace("}", ""))


def fold(name: str) -> str:
    """A key under which names some server may take for one name compare equal (MariaDB
    compares column names case- and accent-insensitively, SQLite ignores ASCII case): wider
    than any server's own comparison, so names distinct under it are distinct everywhere."""
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return bare.casefold().rstrip()


def refused_anywhere(text: str) -> bool:
    """What no server can hold, in a name or a key literal: NUL, and text that is not
    encodable as UTF-8 (a lone surrogate)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@dataclass(frozen=True)
class NameRules:
    """One server's rules for quoted identifiers (besides NUL and surrogates)."""

    dialect: Dialect

    def refuses(self, name: str, *, table: bool) -> bool:
        """Whether the server refuses ``name`` as a table or schema name (``table``) or a
        column name."""
        if self.dialect == "postgres":
            # Longer names are truncated to NAMEDATALEN - 1 bytes.
            return len(name.encode("utf-8")) > 63
        if self.dialect == "mariadb":
            return (
                len(name) > 64
                or any(ord(ch) > 0xFFFF for ch in name)
                or name[-1] in " \t\n\v\f\r"
                or (table and name.startswith("#mysql50#"))
            )
        return table and name.lower().startswith("sqlite_")


RULES = {d: NameRules(d) for d in ("postgres", "mariadb", "sqlite")}


# -- a row class of drawn names ----------------------------------------------------------------

FORMS = ("row_lock", "lease", "advisory")
FIELDS = (
    "id",
    "grp",
    "origin",
    "data",
    "retry_after",
    "attempt",
    "locked_until",
    "processed_at",
    "payload",
)
"""The fields a drawn row class may have, in declaration order; each holds a drawn column. A
grouped table has an ``origin`` (its OriginGroup, kept by the move into a dead letter group)."""


@dataclass(frozen=True)
class Shape:
    """A queue table of drawn names: its form, table, schema, the column of each field it has,
    the literal of its advisory key (``{literal}{data}``), and its dead letter table (a table
    without a group moves spent rows there; a grouped one moves them to a group)."""

    form: str
    table: str
    schema: str | None
    columns: dict[str, str]
    literal: str
    dead: str | None

    @property
    def names(self) -> list[str]:
        """Every declared name and literal."""
        found = [self.table, *self.columns.values()]
        if self.schema is not None:
            found.append(self.schema)
        if self.form == "advisory":
            found.append(self.literal)
        return found

    def refused_at_declaration(self) -> bool:
        """What a class statement refuses, whatever the database: NUL or a lone surrogate
        anywhere, a dot in the table or schema (``schema=`` names the schema)."""
        dotted = "." in self.table or (self.schema is not None and "." in self.schema)
        return dotted or any(refused_anywhere(name) for name in self.names)

    def refused_by(self, dialect: Dialect) -> bool:
        """What the dialect refuses when the table is mounted (its server cannot hold it)."""
        rules = RULES[dialect]
        tables = [self.table] if self.schema is None else [self.table, self.schema]
        return any(rules.refuses(t, table=True) for t in tables) or any(
            rules.refuses(c, table=False) for c in self.columns.values()
        )

    def dead_refused_by(self, dialect: Dialect) -> bool:
        return self.dead is not None and (
            refused_anywhere(self.dead) or RULES[dialect].refuses(self.dead, table=True)
        )


@st.composite
def shapes(draw: st.DrawFn, form: str, dialect: Dialect) -> Shape:
    """A row class of ``form`` with drawn names, its optional roles drawn too; columns differ
    under :func:`fold` (a server that folds two of them together could not create the table)."""
    fields = ["id", "data", "attempt"]
    for optional in ("grp", "retry_after", "processed_at", "payload"):
        if draw(st.booleans()):
            fields.append(optional)
    if "grp" in fields:
        fields.append("origin")
    if form == "lease":
        fields.append("locked_until")
    fields.sort(key=FIELDS.index)
    # Half the shapes draw names every server holds (adversarial still: markers, quotes,
    # aliases, percent signs), so that most examples get as far as serving rows.
    drawn = names(servable=draw(st.booleans()))
    columns = draw(st.lists(drawn, min_size=len(fields), max_size=len(fields), unique_by=fold))
    table = draw(drawn)
    schema = None if dialect == "sqlite" else draw(st.none() | drawn)
    dead = None
    if "grp" not in fields:
        # The dead letter destination is written "[schema.]table": no dot in its table.
        dead = draw(drawn).replace(".", "") or "d"
        if fold(dead) == fold(table):
            dead += "d"
    literal = draw(key_literals())
    return Shape(form, table, schema, dict(zip(fields, columns, strict=True)), literal, dead)


_FORM_TYPES: dict[str, type] = {"row_lock": RowLock, "lease": Lease, "advisory": Advisory}
_TYPES: dict[str, Any] = {
    "id": Annotated[int, Id(generated=True)],
    "grp": Annotated[str, Group()],
    "origin": Annotated[str | None, OriginGroup()],
    "data": str,
    "retry_after": Annotated[datetime, RetryAfter()],
    "attempt": Annotated[int, Attempt()],
    "locked_until": Annotated[datetime | None, LockedUntil()],
    "processed_at": Annotated[datetime | None, ProcessedAt()],
    "payload": Annotated[bytes, Payload()],
}


def declare(shape: Shape) -> type[Inbox[Any, Any]]:
    """The class statement of ``shape``: each field renamed to its drawn column."""
    annotations = {
        field: Annotated[_TYPES[field], Column(column)] for field, column in shape.columns.items()
    }
    keywords: dict[str, Any] = {"table": shape.table}
    if shape.schema is not None:
        keywords["schema"] = shape.schema
    if shape.form == "advisory":
        keywords["advisory_lock"] = shape.literal + "{data}"
    base = cast("Any", Inbox)[_FORM_TYPES[shape.form]]

    def body(ns: dict[str, Any]) -> None:
        ns["__annotations__"] = annotations
        ns["__module__"] = __name__

    row: type[Inbox[Any, Any]] = types.new_class("Named", (base,), keywords, body)
    return row
