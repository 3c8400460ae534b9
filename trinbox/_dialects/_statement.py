"""Statements built as parts, rendered once: names are names, parameters are parameters.

A dialect composes SQL as :class:`Sql`, a sequence of text and parameter slots::

    "UPDATE " + table + " SET " + col + " = " + P("now") + " WHERE " + ident + " = " + P("id")

Quoted names and literals are text; a parameter exists only as a slot made by :func:`P`, so no
character of a name can ever become one. :func:`render` walks the parts once: a slot becomes
the style's placeholder (binding order follows the text), text is written as is, except that
the ``format`` style (PyMySQL interpolates ``query % args`` on the client) writes each ``%`` of
it ``%%``. An ``Sql`` is never turned into a ``str`` by formatting (that would lose its slots):
``str()``, ``format()`` and f-strings raise ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["Frag", "P", "Param", "ParamStyle", "Sql", "Statement", "join", "render"]

ParamStyle = Literal["dollar", "format", "qmark"]


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter slot: the value bound under ``name``."""

    name: str


class Sql:
    """SQL being built: text and parameter slots in order. Compose with ``+`` and
    :func:`join`; text (a ``str``) may stand on either side."""

    __slots__ = ("parts",)

    parts: tuple[str | Param, ...]

    def __init__(self, *parts: str | Param | Sql) -> None:
        flat: list[str | Param] = []
        for part in parts:
            for piece in part.parts if isinstance(part, Sql) else (part,):
                if isinstance(piece, str):
                    if not piece:
                        continue
                    last = flat[-1] if flat else None
                    if isinstance(last, str):
                        flat[-1] = last + piece  # adjacent text is one part
                        continue
                flat.append(piece)
        self.parts = tuple(flat)

    def __add__(self, other: str | Sql) -> Sql:
        return Sql(self, other)

    def __radd__(self, other: str) -> Sql:
        return Sql(other, self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sql) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Sql{self.parts!r}"

    def __str__(self) -> str:
        msg = "an Sql keeps its parameter slots: compose it with + or join(), never str()"
        raise TypeError(msg)

    def __format__(self, format_spec: str) -> str:
        msg = "an Sql keeps its parameter slots: compose it with + or join(), not an f-string"
        raise TypeError(msg)


Frag: TypeAlias = str | Sql
"""A piece of a statement: text alone, or text with parameter slots."""


def P(name: str) -> Sql:
    """The parameter slot ``name``."""
    return Sql(Param(name))


def join(separator: str, frags: Iterable[Frag]) -> Sql:
    """``frags`` with ``separator`` text between them."""
    parts: list[Frag] = []
    for i, frag in enumerate(frags):
        if i:
            parts.append(separator)
        parts.append(frag)
    return Sql(*parts)


@dataclass(frozen=True, slots=True)
class Statement:
    """``sql`` with placeholders for ``params``; ``bind`` lays values out in that order."""

    event: str
    sql: str
    params: tuple[str, ...] = ()

    def bind(self, values: Mapping[str, object]) -> tuple[object, ...]:
        return tuple(values[name] for name in self.params)


def render(event: str, sql: Frag, style: ParamStyle) -> Statement:
    """One pass over the parts: a slot becomes ``$n`` (a repeated name reuses its number),
    ``%s`` or ``?``; text is written as is (``%`` doubled in the ``format`` style)."""
    parts = sql.parts if isinstance(sql, Sql) else (sql,)
    text: list[str] = []
    params: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part.replace("%", "%%") if style == "format" else part)
        elif style == "dollar":
            if part.name not in params:
                params.append(part.name)
            text.append(f"${params.index(part.name) + 1}")
        else:
            params.append(part.name)
            text.append("?" if style == "qmark" else "%s")
    return Statement(event, "".join(text), tuple(params))
