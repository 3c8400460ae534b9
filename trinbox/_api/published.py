"""What a publish returns: with a dedup key, the row that holds the key.

A publish into a table with a ``Unique`` field, given ``unique="k"``, writes its row unless an
unfinished row of the table holds ``k`` already; either way it returns that row as a
``Published``. A publish without a key (into any table) returns ``NOT_READ``, whose ``id`` is
``None``: it runs the plain insert, which reads nothing back, so a table without a ``Unique``
field publishes at the cost it always had.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, final

__all__ = ["NOT_READ", "OnDuplicate", "Published"]

OnDuplicate: TypeAlias = Literal["return", "raise"]
"""What a publish does when an unfinished row holds its key: return that row (``"return"``,
``Published.duplicate`` true) or raise ``Duplicate`` (``"raise"``). Nothing is written either
way."""


@final
@dataclass(frozen=True, slots=True)
class Published:
    """What a publish wrote or found: with a dedup key, the row that holds it."""

    id: object
    """The row's id, as its ``Id`` field types it (an ``int`` for a generated id): the new
    row's, or the one that held the key before the publish. ``None`` for a publish without a
    key, which reads nothing back."""

    duplicate: bool
    """Whether a row held the key before the publish (then nothing was written)."""

    key: str | None
    """The key as the column holds it (with a window, the key and its period's start);
    ``None`` for a publish without one."""


NOT_READ = Published(None, False, None)
"""What a publish without a dedup key returns: a row written, its id not read back."""
