"""The statements of a tick table (``trinbox.schedules.Ticks``): where every process serving
a schedule records the ticks it fired, one row per (schedule, tick), so a tick commits once
whichever process, clock or pooler fires it. Pure text, no I/O.

    schedule  the schedule's name (text, part of the key)
    tick      the tick's instant, UTC (part of the key)
    fired_at  when the firing process wrote it (its clock, or the database's)
    outcome   ``published`` (its row written) or ``skipped`` (its row not: the schedule's
              previous row still held its dedup key)

``mark`` inserts the pair unless it is there, and its row count says which (1: this
transaction fires the tick; 0: another did, or its transaction holds the key until it
ends); ``skipped`` sets a marked tick's outcome; ``last`` reads a schedule's latest tick;
``prune`` deletes a schedule's oldest ticks before a time, ``PRUNE_BATCH`` at a time;
``now`` reads the server's clock; ``ddl`` creates the table where it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._base import Dialect
from ._statement import P, Statement

__all__ = ["PRUNE_BATCH", "TickPlan", "tick_plan"]

PRUNE_BATCH = 100
"""Ticks one prune statement deletes at most: a short statement, repeated while it finds
that many."""


@dataclass(frozen=True, slots=True)
class TickPlan:
    mark: Statement
    skipped: Statement
    last: Statement
    prune: Statement
    now: Statement
    ddl: tuple[str, ...]

    @property
    def checked(self) -> tuple[Statement, ...]:
        """What startup prepares: each statement on the table, so a missing table (or a
        column of another name) stops it."""
        return (self.mark, self.skipped, self.last, self.prune)


def tick_plan(dialect: Dialect, table: str, schema: str | None, where: str) -> TickPlan:
    """The statements of the tick table ``[schema.]table`` on ``dialect``, or the dialect's
    refusal of the names (``IdentifierTooLong``) naming ``where``."""
    for name in (table, schema):
        if name is not None:
            dialect.check_identifier(name, where)
    name = dialect.qualified(table, schema)
    before, after = dialect.insert_if_absent
    one = " WHERE schedule = " + P("schedule") + " AND tick = " + P("tick")
    mark = dialect.render(
        "tick",
        f"{before} {name} (schedule, tick, fired_at, outcome) VALUES ("
        + P("schedule")
        + ", "
        + P("tick")
        + ", "
        + P("now")
        + ", 'published')"
        + after,
    )
    skipped = dialect.render("tick skipped", f"UPDATE {name} SET outcome = 'skipped'" + one)
    last = dialect.render(
        "last tick", f"SELECT max(tick) FROM {name} WHERE schedule = " + P("schedule")
    )
    older = "schedule = " + P("schedule") + " AND tick < " + P("before")
    prune = dialect.render("prune ticks", dialect.delete_first(name, older, "tick", PRUNE_BATCH))
    now = dialect.render("now", f"SELECT {dialect.server_clock.now}")
    rules = dialect.ddl_rules
    text = rules.indexed_text
    create = (
        f"CREATE TABLE IF NOT EXISTS {name} (\n"
        f"    schedule {text} NOT NULL,\n"
        f"    tick {rules.time} NOT NULL,\n"
        f"    fired_at {rules.time} NOT NULL,\n"
        f"    outcome {text} NOT NULL,\n"
        f"    PRIMARY KEY (schedule, tick)\n"
        f"){rules.table_options}"
    )
    return TickPlan(mark=mark, skipped=skipped, last=last, prune=prune, now=now, ddl=(create,))
