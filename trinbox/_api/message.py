"""``Message``: one row of a batch publish that differs from the batch's other rows.

``broker.publish_many(Row, items, **shared)`` writes one row per item. An item is a message,
written with what the call shares (its columns, ``delay`` and ``headers``), or a ``Message``
wrapping one with what is its own: its columns over the shared ones, its delay instead of the
shared one, its headers over the shared ones, and its dedup key (a key is a row's own: a key
shared by a batch would hold one row of it)::

    await broker.publish_many(Email, [Welcome("a"), Message(Welcome("b"), delay=HOUR)],
                              queue="emails")
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import final

__all__ = ["Message"]


@final
class Message:
    """A row of a batch publish with fields of its own: ``message`` (left out in row mode),
    ``delay``, ``headers``, ``unique`` and the columns as ``publish`` takes them."""

    __slots__ = ("columns", "delay", "headers", "message", "unique")

    def __init__(
        self,
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        **columns: object,
    ) -> None:
        self.message = message
        self.delay = delay
        self.headers = headers
        self.unique = unique
        self.columns = columns

    def __repr__(self) -> str:
        parts = [] if self.message is None else [repr(self.message)]
        for name in ("delay", "headers", "unique"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        parts.extend(f"{name}={value!r}" for name, value in self.columns.items())
        return f"Message({', '.join(parts)})"
