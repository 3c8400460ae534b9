"""Column roles, written as ``Annotated`` metadata on a row class's fields.

``id: Annotated[int, Id(generated=True)]`` makes ``id`` the row identity, filled by the database.
A field without a role is a data column. ``Column("name")`` renames a field's column.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

__all__ = [
    "Attempt",
    "Column",
    "DeadLetteredAt",
    "Generated",
    "Group",
    "Headers",
    "Id",
    "LockedUntil",
    "OriginGroup",
    "Payload",
    "Priority",
    "ProcessedAt",
    "Progress",
    "Result",
    "RetryAfter",
    "Role",
    "Unique",
]


@dataclass(frozen=True, slots=True)
class Role:
    """A queue role a column plays. ``generated`` marks a column the database fills."""

    generated: bool = False
    role: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class Id(Role):
    """The row identity (exactly one field)."""

    role: ClassVar[str] = "id"


@dataclass(frozen=True, slots=True)
class Group(Role):
    """The subscription name selects rows whose group column equals it. ``fifo=True`` makes
    each group a FIFO group: its rows are handled one at a time, strictly in order (row lock
    and lease forms only; in the advisory form put the group in the key).

    A FIFO group's order is ``Priority``, then id: a row not yet due (a retry after a delay
    or a backoff, a delayed publish) waits at its place and holds its group until it is due.
    ``delayed_rows_move_behind=True`` orders the group by ``Priority``, then ``RetryAfter``,
    then id instead: such a row moves behind the rows due before it, and they go on."""

    fifo: bool = False
    delayed_rows_move_behind: bool = False
    role: ClassVar[str] = "group"


@dataclass(frozen=True, slots=True)
class OriginGroup(Role):
    """The group a dead letter came from: moving a spent row into a dead letter group writes
    its group here first, ``trinbox dead-letters`` lists it under that queue and a redrive
    returns it there. NULL while the row is not a dead letter: the publish leaves it out and
    a redrive clears it. A table with a ``Group`` field needs one to dead-letter into a group;
    declare it ``Annotated[str | None, OriginGroup()] = None``."""

    role: ClassVar[str] = "origin_group"


@dataclass(frozen=True, slots=True)
class RetryAfter(Role):
    """Time before which the row is not claimable; ``retry_after(d)`` writes it."""

    role: ClassVar[str] = "retry_after"


@dataclass(frozen=True, slots=True)
class Priority(Role):
    """An int the claim orders by, smaller first (before the due time and the id); a publish
    that leaves it out writes 0. Never written by a settlement: a retried row keeps it."""

    role: ClassVar[str] = "priority"


@dataclass(frozen=True, slots=True)
class Attempt(Role):
    """The attempt counter; required by ``max_attempts``."""

    role: ClassVar[str] = "attempt"


@dataclass(frozen=True, slots=True)
class LockedUntil(Role):
    """The lease expiry; it selects the lease form."""

    role: ClassVar[str] = "locked_until"


@dataclass(frozen=True, slots=True)
class ProcessedAt(Role):
    """Ack and drop mark the row with a time instead of deleting it."""

    role: ClassVar[str] = "processed_at"


@dataclass(frozen=True, slots=True)
class DeadLetteredAt(Role):
    """When the row became a dead letter: the move into a dead letter group or table writes
    the settlement's now (the broker's clock, as ``ProcessedAt`` is written), a redrive clears
    it. NULL while the row is not a dead letter: the publish leaves it out. ``.retain(
    dead_letters=...)`` ages dead letters by it, so a row that waited long in the queue is
    kept its full time once it is dead. Declare it ``Annotated[datetime | None,
    DeadLetteredAt()] = None`` (a dead letter table has the same column)."""

    role: ClassVar[str] = "dead_lettered_at"


@dataclass(frozen=True, slots=True)
class Progress(Role):
    """How far the handler of the row in work has got, a fraction from 0 to 1, as it last
    reported through ``keys.Progress``: the lease keeper writes the newest value with its next
    extension (the same statement, no round trip of its own). NULL until a handler reports;
    the publish leaves it out, a redrive clears it. Declare it ``Annotated[float | None,
    Progress()] = None``. Written in the lease form only (a row lock row is locked by its
    handler's transaction; the advisory form has no keeper): elsewhere ``statistics()``
    shows it."""

    role: ClassVar[str] = "progress"


@dataclass(frozen=True, slots=True)
class Payload(Role):
    """The message bytes: the table is in payload mode."""

    role: ClassVar[str] = "payload"


@dataclass(frozen=True, slots=True)
class Headers(Role):
    """The message's headers, names and values of text, as one JSON object (PostgreSQL
    ``jsonb``, MySQL ``JSON``, SQLite ``TEXT``): ``publish(..., headers={...})`` writes them
    and a handler reads them through ``keys.Headers``. Declare it ``Annotated[dict[str, str],
    Headers()]``; NULL holds none. Settlements never write it: a retry, a dead letter and a
    redrive keep it."""

    role: ClassVar[str] = "headers"


@dataclass(frozen=True, slots=True)
class Unique(Role):
    """A dedup key: at most one unfinished row of the table holds each key, from its publish
    until its ack, its drop or its move into a dead letter (a retry keeps it; a row kept by
    ``ProcessedAt`` lets it go). ``publish(..., unique="k")`` writes it and returns the row
    holding it (``Published``, ``duplicate=True`` when that row was there before); NULL, a
    publish without ``unique=``, dedups nothing. A unique index enforces it, which ``trinbox
    schema`` writes and startup checks for. Declare it ``Annotated[str | None, Unique()] =
    None``.

    ``window`` keys the row on the period of that length holding its due time as well: the
    column holds the key and the period's start (``k@2026-12-01T10:00:00Z``), so one row per
    key and period. Uniqueness is no concurrency limit: two rows of different keys run side
    by side, and a key is free again once its row is finished."""

    window: timedelta | None = None
    role: ClassVar[str] = "unique"


@dataclass(frozen=True, slots=True)
class Result(Role):
    """What the handler left on its row, one JSON value (PostgreSQL ``jsonb``, MySQL ``JSON``,
    SQLite ``TEXT``) written by the ack, ``HandlerOutcome.ack(result)``, in the broker's
    codec; ``broker.wait(Row, id)`` reads it back, decoded into the field's type. NULL until
    the row settles (and for a drop). Needs a ProcessedAt field: the row is kept after its
    ack, so there is a result to read. Declare it ``Annotated[T | None, Result()] = None``."""

    role: ClassVar[str] = "result"


@dataclass(frozen=True, slots=True)
class Generated(Role):
    """A data column the database fills (a default); the generated insert leaves it out."""

    generated: bool = True
    role: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class Column:
    """The column's name in the table, when it differs from the field's name."""

    name: str


ROLE_NAMES = (
    "id",
    "group",
    "origin_group",
    "priority",
    "retry_after",
    "attempt",
    "locked_until",
    "processed_at",
    "dead_lettered_at",
    "progress",
    "payload",
    "headers",
    "unique",
    "result",
)
ROLE_CLASSES: dict[str, str] = {
    cls.role: cls.__name__
    for cls in (
        Id,
        Group,
        OriginGroup,
        Priority,
        RetryAfter,
        Attempt,
        LockedUntil,
        ProcessedAt,
        DeadLetteredAt,
        Progress,
        Payload,
        Headers,
        Unique,
        Result,
    )
}
"""How messages name a role: by the class a declaration writes (``attempt`` -> ``Attempt``)."""
