"""The column types of the rendered DDL: what each dialect writes for each role, and for a
data column by its Python type (``ddl.py`` writes the statements).

Each role gets the type the startup check (``_columns.py``) accepts for it: a time with its
zone (PostgreSQL ``TIMESTAMPTZ``; MySQL ``DATETIME(6)``, naive UTC, which holds the lease's
whole-second token exactly and the other times to the microsecond; SQLite ``TEXT``, the UTC
text trinbox writes), an integer attempt and priority, a binary payload, the headers as the
dialect's JSON column (PostgreSQL ``JSONB``, MySQL ``JSON``, SQLite ``TEXT``). A field's ``SqlType``
replaces the type and keeps the rest (``NOT NULL``, ``DEFAULT 1``, ``PRIMARY KEY``).
"""

from __future__ import annotations

import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import get_args, get_origin

from .._declare._roles import ROLE_CLASSES
from .._declare._spec import ColumnSpec, TableSpec
from .._declare._sqltype import SqlType
from ..errors import DeclarationError

__all__ = ["DdlRules", "column_type", "is_optional"]


@dataclass(frozen=True, slots=True)
class DdlRules:
    """What one dialect writes in a CREATE TABLE. ``key`` names it in ``SqlType(key=...)``."""

    key: str
    # A data column's type by its Python type (a subclass takes its base's: bool before int).
    types: Mapping[type, str]
    # A text column in an index or a primary key, the group and a text id (MySQL cannot index
    # TEXT whole, and compares them byte for byte: ids and group names differing in case
    # stay apart).
    indexed_text: str
    time: str
    count: str
    payload: str
    # A generated id: ``{type}`` is the integer type, or the field's SqlType.
    generated_id: str
    integer_id: str
    partial_indexes: bool = True
    # SQLite names the schema on the index, the table bare (PostgreSQL puts an index in its
    # table's schema, and refuses a qualified index name).
    schema_on_index: bool = False
    inline_index: bool = False
    table_options: str = ""


# Python types in lookup order: bool is an int, datetime is a date.
_ORDER: tuple[type, ...] = (bool, int, float, Decimal, str, bytes, datetime, date, uuid.UUID)
_JSON = (dict, list)


def is_optional(hint: object) -> bool:
    """Whether a field's type admits ``None`` (``X | None``, ``Optional[X]``)."""
    return _is_union(hint) and type(None) in get_args(hint)


def _is_union(hint: object) -> bool:
    return get_origin(hint) in (typing.Union, types.UnionType)


def _bare(hint: object) -> object:
    """``hint`` without ``Annotated`` and without ``None`` (``int | None`` -> ``int``)."""
    if get_origin(hint) is typing.Annotated:
        return _bare(get_args(hint)[0])
    if _is_union(hint):
        members = [a for a in get_args(hint) if a is not type(None)]
        if len(members) == 1:
            return _bare(members[0])
    return hint


def _derived(rules: DdlRules, hint: object) -> str | None:
    """The type of a data column holding ``hint``, or ``None`` when none fits."""
    bare = _bare(hint)
    origin = get_origin(bare)
    if bare in _JSON or origin in _JSON:
        return rules.types[dict]
    if isinstance(bare, type):
        for candidate in _ORDER:
            if issubclass(bare, candidate):
                return rules.types[candidate]
    return None


def _describe(hint: object) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


def column_type(
    rules: DdlRules,
    spec: TableSpec,
    col: ColumnSpec,
    override: SqlType | None,
    *,
    indexed: bool,
) -> str:
    """The SQL type of ``col`` (without NULL, DEFAULT or PRIMARY KEY): its field's SqlType
    on this dialect, the type of its role, or the type of its Python type."""
    if override is not None:
        given = override.for_dialect(rules.key)
        if given is not None:
            return given.strip()
    role = col.role
    if role in ("retry_after", "locked_until", "processed_at", "dead_lettered_at"):
        return rules.time
    if role in ("attempt", "priority"):
        return rules.count
    if role == "progress":
        return rules.types[float]
    if role == "payload":
        return rules.payload
    if role in ("headers", "result"):
        return rules.types[dict]  # JSON: JSONB, JSON, TEXT
    if role == "id" and col.generated:
        if _bare(col.python_type) is int:
            return rules.integer_id
        what = f"the generated Id field {col.field!r} of {spec.label}"
        msg = (
            f"{what}: the database fills a generated id, which trinbox renders for an int "
            f"(an identity or auto-increment column), found {_describe(col.python_type)}; "
            f"declare it int, or give its type and default with SqlType(...), like "
            f"Annotated[{_describe(_bare(col.python_type))}, Id(generated=True), "
            f'SqlType(postgres="UUID DEFAULT gen_random_uuid()")]'
        )
        raise DeclarationError(msg)
    if col.generated:
        name = ROLE_CLASSES[role] if role else "Generated()"
        msg = (
            f"field {col.field!r} of {spec.label}: the database fills a {name} column when the "
            f"publish leaves it out, from a default trinbox does not know, found no SqlType "
            f"on it; give its type and default, like Annotated[{_describe(col.python_type)}, "
            f"..., SqlType(\"TEXT DEFAULT ''\")]"
        )
        raise DeclarationError(msg)
    found = _derived(rules, col.python_type)
    if found is None:
        known = "str, int, float, bool, bytes, datetime, date, Decimal, UUID, dict, list"
        msg = (
            f"field {col.field!r} of {spec.label}: the DDL derives a data column's SQL type "
            f"from its Python type ({known}, or one of them | None), found "
            f"{_describe(col.python_type)}; name the column's type with SqlType, like "
            f'Annotated[{_describe(col.python_type)}, SqlType("TEXT")], or '
            f'SqlType(postgres="JSONB", mysql="JSON", sqlite="TEXT")'
        )
        raise DeclarationError(msg)
    if indexed and found == rules.types[str]:
        return rules.indexed_text
    return found
