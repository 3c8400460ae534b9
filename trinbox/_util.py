"""Small helpers with no trinbox dependencies."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["evolve"]

T = TypeVar("T")


def evolve(obj: T, **changes: Any) -> T:
    """A copy of a frozen dataclass with some fields changed, without calling its
    ``__init__`` (whose signature is the public constructor's, not the fields')."""
    new = object.__new__(type(obj))
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        object.__setattr__(new, f.name, changes.pop(f.name, getattr(obj, f.name)))
    if changes:
        msg = f"{type(obj).__name__} has no fields {sorted(changes)}"
        raise TypeError(msg)
    return new
