"""``Ticks``: the table where every process serving a schedule records the ticks it fired.

    TICKS = Ticks("report_ticks")
    app.schedule(broker, "nightly-report", Cron("0 2 * * *"), nightly, ticks=TICKS)

One row per (schedule, tick), written in the transaction that publishes the tick's row: the
primary key lets one transaction per tick commit, whichever process, clock or pooler is
behind it. Pure declaration: the statements are the dialect's (``_dialects/ticks.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["KEEP", "Ticks"]

KEEP = timedelta(days=7)
"""How long a tick's row is kept by default."""


@final
@dataclass(frozen=True, slots=True)
class Ticks:
    """The tick table ``[schema.]table`` of one or more schedules, which
    ``broker.create_tables(ticks)`` and ``trinbox schema`` create. ``keep``: how long a
    fired tick's row stays before the schedulers prune it; a schedule's missed-ticks window
    is shorter, so a pruned tick is never fired again."""

    table: str
    schema: str | None = None
    keep: timedelta = field(default=KEEP)

    def __post_init__(self) -> None:
        where = f"Ticks({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a tick {what} is named by a non-empty str, found {name!r}; "
                    f"name it, like Ticks('app_ticks')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)
        keep: object = self.keep  # untyped callers pass anything
        if not isinstance(keep, timedelta) or keep < timedelta(hours=1):
            msg = (
                f"{where}: ticks are kept for an hour or more (a timedelta), found keep={keep!r}; "
                f"pass keep=timedelta(days=7), or leave it out for a week"
            )
            raise DeclarationError(msg)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
