"""Small helpers with no trinbox dependencies."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

__all__ = ["HostClock", "as_bytes", "evolve", "positive_duration"]

T = TypeVar("T")

HostClock = Callable[[], datetime]
"""A host's clock: returns an aware UTC datetime (a broker's ``clock=``, unless it is the
database's; ``trinbox.testing.TrioClock`` follows Trio's virtual time)."""


def as_bytes(value: object) -> bytes | None:
    """``value`` as ``bytes`` when it is bytes-like (``bytes``, ``bytearray``, ``memoryview``:
    what the drivers return for a binary column), else ``None``."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, memoryview):
        return cast("memoryview[int]", value).tobytes()
    return None


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


def positive_duration(what: str, value: object) -> timedelta:
    """``value`` (a timedelta or seconds) as a timedelta, refused unless it is positive: a
    poll interval of zero would claim in a busy loop, a lease of zero would hold nothing."""
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        msg = f"{what} is a timedelta or seconds, found {value!r}; pass a positive duration"
        raise TypeError(msg)
    duration = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if duration <= timedelta(0):
        msg = f"{what} is positive, found {duration}; pass a positive duration"
        raise ValueError(msg)
    return duration
