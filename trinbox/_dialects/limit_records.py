"""The statements of a limit record table (``LimitRecords``), per dialect. Pure text, no I/O.

One row per (queue table, group or '', process): ``declared``, the limits' label, and
``seen_at``, when the process last wrote it (the broker's host clock). ``others`` reads the
rows of one queue seen since ``since`` of every other process; ``refresh`` stamps this
process's row, and ``insert`` writes it where ``refresh`` found none.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._base import Dialect
from ._statement import P, Statement

__all__ = ["RecordPlan", "record_plan"]


@dataclass(frozen=True, slots=True)
class RecordPlan:
    """``others``: (declared, seen_at) of the other processes' rows of (table, grp) seen
    since ``since``; ``refresh``: this process's row stamped ``seen``, with its ``declared``;
    ``insert``: the row written where there is none; ``gone``: the rows of (table, grp) not
    seen since ``since`` deleted (processes gone: a serving one writes its row again well
    within it); ``ddl`` creates the table."""

    others: Statement
    refresh: Statement
    insert: Statement
    gone: Statement
    ddl: tuple[str, ...]
    label: str

    @property
    def checked(self) -> tuple[Statement, ...]:
        return (self.others, self.refresh, self.insert, self.gone)


def record_plan(dialect: Dialect, table: str, schema: str | None, where: str) -> RecordPlan:
    """The statements of the limit record table ``[schema.]table`` on ``dialect``."""
    d = dialect
    for name in (table, schema):
        if name is not None:
            d.check_identifier(name, where)
    name = d.qualified(table, schema)
    mine = " WHERE queue_table = " + P("table") + " AND grp = " + P("grp") + " AND process = "
    others = d.render(
        "limit records",
        f"SELECT declared, seen_at FROM {name} WHERE queue_table = "
        + P("table")
        + " AND grp = "
        + P("grp")
        + " AND process <> "
        + P("process")
        + " AND seen_at > "
        + P("since"),
    )
    refresh = d.render(
        "limit record",
        f"UPDATE {name} SET declared = "
        + P("declared")
        + ", seen_at = "
        + P("seen")
        + mine
        + P("process"),
    )
    before, after = d.insert_if_absent
    insert = d.render(
        "limit record",
        f"{before} {name} (queue_table, grp, process, declared, seen_at) VALUES ("
        + P("table")
        + ", "
        + P("grp")
        + ", "
        + P("process")
        + ", "
        + P("declared")
        + ", "
        + P("seen")
        + ")"
        + after,
    )
    gone = d.render(
        "limit records gone",
        f"DELETE FROM {name} WHERE queue_table = "
        + P("table")
        + " AND grp = "
        + P("grp")
        + " AND seen_at <= "
        + P("since"),
    )
    rules = d.ddl_rules
    text = rules.indexed_text
    create = (
        f"CREATE TABLE IF NOT EXISTS {name} (\n"
        f"    queue_table {text} NOT NULL,\n"
        f"    grp {text} NOT NULL,\n"
        f"    process {text} NOT NULL,\n"
        f"    declared {rules.types[str]} NOT NULL,\n"
        f"    seen_at {rules.time} NOT NULL,\n"
        f"    PRIMARY KEY (queue_table, grp, process)\n"
        f"){rules.table_options}"
    )
    label = f"{schema}.{table}" if schema else table
    return RecordPlan(
        others=others, refresh=refresh, insert=insert, gone=gone, ddl=(create,), label=label
    )
