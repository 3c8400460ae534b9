"""A rendered statement: SQL text plus the names of its parameters in binding order.

Dialects write parameters as ``P("name")`` markers anywhere in the text; :func:`render` scans
the finished text left to right and turns each marker into the dialect's placeholder, so the
binding order always follows the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["P", "ParamStyle", "Statement", "render"]

ParamStyle = Literal["dollar", "format", "qmark"]

_MARK = re.compile("\u27e8([^\u27e9]+)\u27e9")


def P(name: str) -> str:
    """A parameter marker inside SQL text."""
    return f"\u27e8{name}\u27e9"


@dataclass(frozen=True, slots=True)
class Statement:
    """``sql`` with placeholders for ``params``; ``bind`` lays values out in that order."""

    event: str
    sql: str
    params: tuple[str, ...] = ()

    def bind(self, values: Mapping[str, object]) -> tuple[object, ...]:
        return tuple(values[name] for name in self.params)


def render(event: str, text: str, style: ParamStyle) -> Statement:
    """Replace the markers of ``text`` with ``$n`` (a repeat reuses its number), ``%s`` or ``?``."""
    params: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        name = match.group(1)
        if style == "dollar":
            if name not in params:
                params.append(name)
            return f"${params.index(name) + 1}"
        params.append(name)
        return "?" if style == "qmark" else "%s"

    sql = _MARK.sub(placeholder, text)
    return Statement(event, sql, tuple(params))
