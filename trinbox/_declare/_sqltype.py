"""``SqlType``: the column type the rendered DDL gives one field, instead of the one trinbox
derives from its Python type.

    note: Annotated[str, SqlType("VARCHAR(64)")]
    data: Annotated[dict[str, int], SqlType(postgres="JSON", mysql="JSON", sqlite="TEXT")]

The text is written where the type goes, before what trinbox adds (``NOT NULL``, the
attempt's ``DEFAULT 1``, the id's ``PRIMARY KEY``), so it may carry a ``DEFAULT`` of its own.
Only the DDL reads it: queries, the startup check and publishing never do.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from ..errors import DeclarationError

__all__ = ["DIALECT_KEYS", "SqlType", "sql_types_of"]

DIALECT_KEYS = ("postgres", "mysql", "sqlite")


@dataclass(frozen=True, slots=True, init=False)
class SqlType:
    """A column's SQL type in the DDL: one text for every database (``SqlType("TEXT")``) or
    one per database (``SqlType(postgres="JSONB", mysql="JSON")``); a database left out gets
    the type trinbox derives from the field's Python type."""

    default: str | None
    postgres: str | None
    mysql: str | None
    sqlite: str | None

    def __init__(
        self,
        default: str | None = None,
        /,
        *,
        postgres: str | None = None,
        mysql: str | None = None,
        sqlite: str | None = None,
    ) -> None:
        given = {"": default, "postgres": postgres, "mysql": mysql, "sqlite": sqlite}
        for key, text in given.items():
            if text is not None and not text.strip():
                where = f"{key}=" if key else "the type"
                msg = (
                    f"SqlType: {where} is the column's SQL type as text, found {text!r}; "
                    f'write it, like SqlType("VARCHAR(64)")'
                )
                raise DeclarationError(msg)
        if all(text is None for text in given.values()):
            msg = (
                'SqlType: an override names a type, found none; write SqlType("TEXT") or '
                'SqlType(postgres="JSONB", mysql="JSON", sqlite="TEXT")'
            )
            raise DeclarationError(msg)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "postgres", postgres)
        object.__setattr__(self, "mysql", mysql)
        object.__setattr__(self, "sqlite", sqlite)

    def for_dialect(self, key: str) -> str | None:
        """The type on the database ``key`` (``postgres``, ``mysql``, ``sqlite``), or
        ``None`` where this override leaves it to trinbox."""
        found: str | None = getattr(self, key)
        return found if found is not None else self.default


def sql_types_of(row_type: type | None) -> dict[str, SqlType]:
    """The ``SqlType`` of each field of ``row_type`` that has one, by field name."""
    if row_type is None:
        return {}
    where = f"class {row_type.__qualname__}"
    hints = typing.get_type_hints(row_type, include_extras=True)
    found: dict[str, SqlType] = {}
    for name, hint in hints.items():
        marks = _marks(hint)
        if len(marks) > 1:
            msg = (
                f"{where}: a field has one SqlType, found {len(marks)} on {name!r}; keep one "
                f"(SqlType(postgres=..., mysql=..., sqlite=...) names one per database)"
            )
            raise DeclarationError(msg)
        if marks:
            found[name] = marks[0]
    return found


def _marks(hint: Any) -> list[SqlType]:
    """Every ``SqlType`` in ``hint``'s ``Annotated`` metadata, an optional's member too."""
    if get_origin(hint) is typing.Annotated:
        inner, *metadata = get_args(hint)
        return [m for m in metadata if isinstance(m, SqlType)] + _marks(inner)
    marks: list[SqlType] = []
    if get_origin(hint) in (typing.Union, _UNION):
        for arg in get_args(hint):
            marks += _marks(arg)
    return marks


_UNION: Any = type(int | None)
