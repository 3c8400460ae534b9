"""``Rate`` and ``Rates``: a limit on how many rows a queue's claims start per period, per key
or for the whole queue (``InboxQueue.limit(key=..., rate=Rate(100, per=...), rates=RATES)``),
and the table that keeps each key's state.

    RATES = Rates("app_rates")
    TENANTS = Rate(100, per=timedelta(seconds=10))
    InboxQueue(Sync, "sync").limit(key="tenant", rate=TENANTS, rates=RATES)

A rate counts **starts**: a row claimed counts when it is claimed, whether its handler then
runs for a millisecond or an hour, fails, or is given back at shutdown. It is GCRA (the generic
cell rate algorithm): one row per (table, group, key) holding the key's theoretical arrival
time on the broker's clock; a claim takes per key at most what the rate allows now (a burst of
``n`` at most, then one every ``per / n``) and advances the time in the same transaction. The
row is a time, not a counter: a crashed claimer leaves nothing to give back. Pure declaration:
the statements are the dialect's (``_dialects/_rated.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["Rate", "Rates"]

# The shortest period a rate takes: the broker's clocks are read to the microsecond, but a
# period below a millisecond limits nothing a poll could see.
SHORTEST = timedelta(milliseconds=1)


@final
@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``n`` starts per ``per``: a burst of ``n`` at once at most, then one every
    ``per / n``, counted across every process."""

    n: int
    per: timedelta

    def __post_init__(self) -> None:
        n: object = self.n  # untyped callers pass anything
        per: object = self.per
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            msg = (
                f"a rate lets one start or more per period, found Rate({n!r}, per={per!r}); "
                f"pass an int n >= 1, like Rate(100, per=timedelta(seconds=10))"
            )
            raise ValueError(msg)
        if not isinstance(per, timedelta) or per < SHORTEST:
            msg = (
                f"a rate's period is a timedelta of a millisecond or more, found "
                f"Rate({n!r}, per={per!r}); pass per=timedelta(seconds=10), say"
            )
            raise ValueError(msg)

    @property
    def per_us(self) -> int:
        """The period in microseconds."""
        return self.per // timedelta(microseconds=1)

    def advance_us(self, starts: int) -> int:
        """How far ``starts`` starts move the key's theoretical arrival time: ``starts``
        emission intervals (``per / n``), rounded up to the microsecond (never more starts
        than the rate allows)."""
        return -((-starts * self.per_us) // self.n)

    def __repr__(self) -> str:
        return f"Rate({self.n}, per={self.per!r})"


@final
@dataclass(frozen=True, slots=True)
class Rates:
    """The rate table ``[schema.]table`` of the rates of one or more queues, which
    ``broker.create_tables(rates)`` and ``trinbox schema`` create."""

    table: str = "trinbox_rates"
    schema: str | None = None

    def __post_init__(self) -> None:
        where = f"Rates({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a rate {what} is named by a non-empty str, found {name!r}; "
                    f"name it, like Rates('app_rates')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
