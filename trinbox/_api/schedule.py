"""What a periodic schedule is made of besides its times (``when.py``): the tick it hands to
its function (``Tick``), the row that function returns (``Publish``), the policy for ticks
that came due while no scheduler ran (``Missed``) and the counts it keeps
(``ScheduleStatistics``). Pure records; the scheduler is the engine's (``_engine/schedules.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Literal, TypeAlias, TypeVar, final

from .._bounds import ON_TIME
from ..errors import DeclarationError

__all__ = ["Missed", "Outcome", "Publish", "ScheduleStatistics", "Tick"]

R = TypeVar("R", covariant=True)

Outcome: TypeAlias = Literal["published", "skipped", "taken", "missed", "failed"]
"""What became of one tick in one process: ``published`` (this process wrote its mark and
its row), ``skipped`` (its mark written, its row not: the previous tick's row still holds
the schedule's dedup key), ``taken`` (another process's mark was there: it fired it),
``missed`` (the missed-ticks policy let it go), ``failed`` (its transaction failed: the tick
is tried again while the policy still reaches it)."""


@final
@dataclass(frozen=True, slots=True)
class Tick:
    """One tick of a schedule: its name and the tick's time, in the schedule's zone (a
    ``Cron``'s ``tz``, UTC for ``Every``)."""

    schedule: str
    at: datetime


@final
class Publish(Generic[R]):
    """The row each tick publishes: ``Publish(Report, lambda tick: ReportRequest(
    day=tick.at.date()), channel="reports")``. ``message`` makes the tick's message (encoded
    into the Payload field; leave it out in row mode); ``headers`` and ``columns`` are
    written as ``broker.publish`` takes them. Written in the tick's transaction, beside the
    tick's mark: both commit, or neither. ``message`` runs before that transaction begins
    (keep it pure: no I/O, nothing to undo)."""

    __slots__ = ("columns", "headers", "message", "row")

    def __init__(
        self,
        row: type[R],
        message: Callable[[Tick], object] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        **columns: object,
    ) -> None:
        if message is not None and not callable(message):
            msg = (
                f"Publish({getattr(row, '__qualname__', row)!r}, message): the message is a "
                f"function of the tick, found {message!r}; pass lambda tick: {message!r}"
            )
            raise DeclarationError(msg)
        self.row: type[R] = row
        self.message = message
        self.headers = headers
        self.columns: Mapping[str, object] = dict(columns)

    def message_of(self, tick: Tick) -> object:
        """The tick's message (``None`` in row mode)."""
        return None if self.message is None else self.message(tick)

    def __repr__(self) -> str:
        columns = "".join(f", {k}={v!r}" for k, v in self.columns.items())
        return f"Publish({getattr(self.row, '__qualname__', self.row)}{columns})"


@final
@dataclass(frozen=True, slots=True)
class Missed:
    """What a scheduler does with ticks whose time has passed unfired (no process was
    serving, the database was away): ``Missed.skip()``, the default, fires a tick only up to
    a minute late (``ON_TIME``) and the latest only; ``Missed.latest(within=...)`` fires the
    latest tick at most ``within`` late; ``Missed.all(within=...)`` fires every tick at most
    ``within`` late, oldest first. Older ticks are counted missed, never fired."""

    policy: Literal["skip", "latest", "all"]
    within: timedelta

    def __post_init__(self) -> None:
        within: object = self.within  # untyped callers pass anything
        if not isinstance(within, timedelta) or within <= timedelta(0):
            msg = (
                f"Missed.{self.policy}(within=...) takes a positive timedelta, found "
                f"{within!r}; pass one like within=timedelta(minutes=10)"
            )
            raise DeclarationError(msg)

    @staticmethod
    def skip() -> Missed:
        """Fire a tick only when it is at most a minute late, and the latest only."""
        return Missed("skip", timedelta(seconds=ON_TIME))

    @staticmethod
    def latest(within: timedelta) -> Missed:
        """Fire the latest tick that is at most ``within`` late; older ones are missed."""
        return Missed("latest", within)

    @staticmethod
    def all(within: timedelta) -> Missed:
        """Fire every tick at most ``within`` late, oldest first; older ones are missed."""
        return Missed("all", within)

    def __str__(self) -> str:
        if self.policy == "skip":
            return "Missed.skip()"
        return f"Missed.{self.policy}(within={self.within})"


@final
@dataclass(frozen=True, slots=True)
class ScheduleStatistics:
    """One schedule's counts in this process since it began serving (Trio's
    ``statistics()`` shape: a frozen snapshot)."""

    name: str
    published: int
    """Ticks this process fired and published a row for."""
    skipped: int
    """Ticks this process fired without a row (the previous tick's row unfinished)."""
    taken: int
    """Ticks another process fired first (their marks were there)."""
    missed: int
    """Ticks the missed-ticks policy let go while this process served."""
    failed: int
    """Tick transactions that failed (each is tried again while the policy reaches it)."""
    last_tick: datetime | None
    """The latest tick known fired, by any process (UTC), or ``None``."""
    next_tick: datetime | None
    """The tick this scheduler waits for (UTC), or ``None`` before it serves."""
