"""The statements of a pause table (``trinbox.Pauses``): the queues paused on a broker's
database, one row per pause, which every serving process reads each poll interval. Pure
text, no I/O.

    tbl        the paused table's qualified name (part of the key)
    grp        the paused group, or ``WHOLE`` (``''``): every subscription of the table
               (part of the key)
    paused_at  when the pause was written (the broker's clock)

``pause`` inserts the pair unless it is there (a second pause changes nothing); ``resume``
deletes it; ``read`` reads every pause, one short statement whatever the number of
subscriptions; ``ddl`` creates the table where it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._base import Dialect
from ._statement import P, Statement

__all__ = ["WHOLE", "PausePlan", "pause_plan"]

WHOLE = ""
"""The ``grp`` of a pause of the whole table (no group is named by an empty string)."""


@dataclass(frozen=True, slots=True)
class PausePlan:
    pause: Statement
    resume: Statement
    read: Statement
    ddl: tuple[str, ...]

    @property
    def checked(self) -> tuple[Statement, ...]:
        """What startup prepares: each statement on the table, so a missing table (or a
        column of another name) stops it."""
        return (self.pause, self.resume, self.read)


def pause_plan(dialect: Dialect, table: str, schema: str | None, where: str) -> PausePlan:
    """The statements of the pause table ``[schema.]table`` on ``dialect``, or the dialect's
    refusal of the names (``IdentifierTooLong``) naming ``where``."""
    for name in (table, schema):
        if name is not None:
            dialect.check_identifier(name, where)
    name = dialect.qualified(table, schema)
    before, after = dialect.insert_if_absent
    pause = dialect.render(
        "pause",
        f"{before} {name} (tbl, grp, paused_at) VALUES ("
        + P("tbl")
        + ", "
        + P("grp")
        + ", "
        + P("now")
        + ")"
        + after,
    )
    resume = dialect.render(
        "resume", f"DELETE FROM {name} WHERE tbl = " + P("tbl") + " AND grp = " + P("grp")
    )
    read = dialect.render("read pauses", f"SELECT tbl, grp, paused_at FROM {name}")
    rules = dialect.ddl_rules
    text = rules.indexed_text
    create = (
        f"CREATE TABLE IF NOT EXISTS {name} (\n"
        f"    tbl {text} NOT NULL,\n"
        f"    grp {text} NOT NULL,\n"
        f"    paused_at {rules.time} NOT NULL,\n"
        f"    PRIMARY KEY (tbl, grp)\n"
        f"){rules.table_options}"
    )
    return PausePlan(pause=pause, resume=resume, read=read, ddl=(create,))
