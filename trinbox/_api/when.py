"""When a schedule ticks: ``Cron`` (five-field cron, in a time zone, through the ``cronsim``
library: ``pip install "trinbox[cron]"``) or ``Every`` (a fixed interval, no library).

A tick is a discrete instant, the same on every host: ``Every(timedelta(minutes=5))`` ticks
at the multiples of five minutes since the Unix epoch (UTC), ``Cron("0 2 * * *",
tz="Europe/Oslo")`` at 02:00 Oslo time. Each tick is named by its UTC instant in the tick
table, so processes whose clocks differ name the same tick alike.

Daylight saving time, for a ``Cron`` in a zone that has it (Debian cron's rules, which
cronsim follows):

- an expression whose minute and hour fields are both fixed (``30 2 * * *``) runs by the wall
  clock: on the spring-forward day a time the clock skips runs at the first minute after the
  gap (02:30 runs at 03:00), and on the fall-back day a time the clock shows twice runs once,
  at its first occurrence (02:30 summer time);
- an expression with a ``*`` (or ``*/n``) in the minute or hour field runs by elapsed time:
  ``30 * * * *`` runs twice in the hour the clock repeats, and not at all in the hour it
  skips.

Five fields only: peers disagree on where a sixth (seconds) field goes, first (pg-boss,
Hatchet) or last (pgqueuer, procrastinate), so one is refused; ``Every`` ticks sub-minute.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol, TypeAlias, final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import DeclarationError, MissingExtra

__all__ = ["EPOCH", "Cron", "Every", "When"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _CronIterator(Protocol):
    def __next__(self) -> datetime: ...


class _CronSim(Protocol):
    def __call__(self, expr: str, dt: datetime) -> _CronIterator: ...


def _cronsim() -> tuple[_CronSim, type[Exception]]:
    """cronsim's ``CronSim`` and ``CronSimError``, or ``MissingExtra`` naming the extra."""
    try:
        module = importlib.import_module("cronsim")
    except ModuleNotFoundError as exc:
        if exc.name != "cronsim":
            raise
        msg = (
            "a Cron schedule reads its expression with the cronsim library, found no module "
            "named 'cronsim'; install the extra: pip install \"trinbox[cron]\" (or tick by "
            "Every(timedelta(...)), which needs no library)"
        )
        raise MissingExtra(msg, name="cronsim") from None
    return module.CronSim, module.CronSimError


@final
@dataclass(frozen=True, slots=True)
class Every:
    """A tick every ``interval`` (whole seconds, one or more), at its multiples since the
    Unix epoch (UTC): ``Every(timedelta(minutes=5))`` ticks at :00, :05, :10..."""

    interval: timedelta

    def __post_init__(self) -> None:
        interval: object = self.interval  # untyped callers pass anything
        if (
            not isinstance(interval, timedelta)
            or interval < timedelta(seconds=1)
            or interval.microseconds
        ):
            msg = (
                f"Every ticks at an interval of whole seconds, one or more, found {interval!r}; "
                f"pass a timedelta like timedelta(seconds=30)"
            )
            raise DeclarationError(msg)

    @property
    def zone(self) -> tzinfo:
        return UTC

    def after(self, instant: datetime) -> datetime:
        """The first tick strictly after ``instant`` (aware), in UTC."""
        step = int(self.interval.total_seconds())
        seconds = (instant - EPOCH) // timedelta(seconds=1)
        return EPOCH + timedelta(seconds=(seconds // step + 1) * step)

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """The ticks in ``(start, end]``, oldest first, in UTC."""
        tick = self.after(start)
        while tick <= end:
            yield tick
            tick += self.interval

    def __str__(self) -> str:
        return f"every {self.interval}"


@final
@dataclass(frozen=True, slots=True)
class Cron:
    """A five-field cron expression (minute, hour, day of month, month, day of week) read by
    cronsim, in the time zone ``tz`` (an IANA name or a ``tzinfo``; UTC by default). The
    module's docstring states the daylight-saving rules."""

    expression: str
    tz: str | tzinfo = "UTC"
    _zone: tzinfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        expression: object = self.expression  # untyped callers pass anything
        if not isinstance(expression, str):
            msg = (
                f"a cron expression is a str of five fields, found {expression!r}; pass one "
                f"like Cron('0 2 * * *')"
            )
            raise DeclarationError(msg)
        fields = expression.split()
        if len(fields) == 6:
            msg = (
                f"a cron expression has five fields (minute hour day month weekday), found six "
                f"in {expression!r}: peers disagree on whether seconds come first or last; "
                f"drop the seconds field, or tick by Every(timedelta(seconds=...))"
            )
            raise DeclarationError(msg)
        if len(fields) != 5 or expression.lstrip().startswith("@"):
            msg = (
                f"a cron expression has five fields (minute hour day month weekday), found "
                f"{expression!r}; write five, like Cron('0 2 * * *')"
            )
            raise DeclarationError(msg)
        object.__setattr__(self, "_zone", _zone_of(self.tz))
        cron_sim, error = _cronsim()
        try:
            next(cron_sim(expression, datetime.now(self._zone)))
        except error as exc:
            msg = (
                f"a cron expression is one cronsim reads, found {expression!r}: {exc}; fix "
                f"the field it names"
            )
            raise DeclarationError(msg) from None
        except StopIteration:
            msg = (
                f"a cron expression matches a time within fifty years, found {expression!r}, "
                f"which matches none; fix its day and month fields"
            )
            raise DeclarationError(msg) from None

    @property
    def zone(self) -> tzinfo:
        return self._zone

    def after(self, instant: datetime) -> datetime:
        """The first tick strictly after ``instant`` (aware), in UTC."""
        return next(self.between(instant, datetime.max.replace(tzinfo=UTC)))

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """The ticks in ``(start, end]``, oldest first, in UTC."""
        cron_sim, _ = _cronsim()
        # cronsim walks wall-clock time: a start inside a repeated hour may give a tick
        # before it (the hour's first pass), which is not in the range.
        found = cron_sim(self.expression, start.astimezone(self._zone))
        while True:
            try:
                tick = next(found).astimezone(UTC)
            except StopIteration:
                return
            if tick > end:
                return
            if tick > start:
                yield tick

    def __str__(self) -> str:
        return f"cron {self.expression!r} ({self._zone})"


def _zone_of(tz: object) -> tzinfo:
    if isinstance(tz, tzinfo):
        return tz
    if isinstance(tz, str):
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    msg = (
        f"a cron schedule's time zone is an IANA name or a tzinfo, found {tz!r}; pass one "
        f"like tz='Europe/Oslo' (on a system without zone data: pip install tzdata)"
    )
    raise DeclarationError(msg)


When: TypeAlias = Cron | Every
"""When a schedule ticks."""
