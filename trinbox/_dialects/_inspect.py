"""The read-only statistics and dead-letter statements of ``trinbox inspect`` and
``trinbox dead-letters`` (and of the queue-depth gauge), rendered per dialect. Pure text.

Times are read in the database's own clock, the dialect's one now (``server_clock``:
``statement_timestamp()``, ``UTC_TIMESTAMP(6)``, SQLite's ``'now'`` written as trinbox writes
its times), so the numbers do not depend on the clock of the host that asks. Every name is
quoted by the dialect, every value is a parameter.

Parameters: ``g0, g1, ...`` the groups counted, ``dest`` a dead letter group, ``origin`` the
queue's own group (its dead letters in ``dest`` are the rows whose OriginGroup holds it),
``group`` the group a redrive returns rows to, ``i0, i1, ...`` the ids of a chunk, ``limit``
rows listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._declare._markers import RowLock
from .._declare._spec import ColumnSpec, TableSpec
from ._base import DeadLetter, Dialect
from ._statement import Frag, P, Sql, Statement, join

__all__ = [
    "DepthColumns",
    "count_rows",
    "bind_ids",
    "dead_ids",
    "dead_keys",
    "dead_origins",
    "live_keys",
    "deliveries_made",
    "depth",
    "list_dead",
    "redrive",
    "redrive_begin",
]


@dataclass(frozen=True, slots=True)
class DepthColumns:
    """What each row of the depth statement holds, in order: the group (when the table has
    one), then total, due, scheduled, in work (lease tables) and the oldest due row's age."""

    grouped: bool
    in_work: bool


def _sum(cond: str) -> str:
    return f"COALESCE(SUM(CASE WHEN {cond} THEN 1 ELSE 0 END), 0)"


def depth(dialect: Dialect, spec: TableSpec, groups: int) -> tuple[Statement, DepthColumns]:
    """One statement over the table: per group (``groups`` of them, bound ``g0``...), its
    unfinished rows, those due now (not leased), scheduled for later, leased, and the age in
    seconds of the oldest due row. Unfinished: not marked processed."""
    clock = dialect.server_clock
    now = clock.now
    t = dialect.table(spec)
    due_conds: list[str] = []
    if spec.retry_after is not None:
        due_conds.append(f"{dialect.column(spec.retry_after)} <= {now}")
    free = None
    if spec.locked_until is not None:
        lu = dialect.column(spec.locked_until)
        free = f"({lu} IS NULL OR {lu} <= {now})"
        due_conds.append(free)
    due = " AND ".join(due_conds)
    cols: list[str] = []
    if spec.group is not None:
        cols.append(dialect.column(spec.group))
    cols.append("COUNT(*)")
    cols.append(_sum(due) if due else "COUNT(*)")  # without a time or a lease, every row
    if spec.retry_after is not None:
        later = f"{dialect.column(spec.retry_after)} > {now}"
        cols.append(_sum(later if free is None else f"{later} AND {free}"))
    else:
        cols.append("0")  # nothing can be scheduled
    if spec.locked_until is not None:
        cols.append(_sum(f"{dialect.column(spec.locked_until)} > {now}"))
    if spec.retry_after is not None:
        oldest = f"MIN(CASE WHEN {due} THEN {dialect.column(spec.retry_after)} END)"
        cols.append(clock.age.format(t=oldest))
    else:
        cols.append("NULL")
    conds: list[Frag] = []
    if spec.group is not None and groups:
        slots = join(", ", (P(f"g{n}") for n in range(groups)))
        conds.append(dialect.column(spec.group) + " IN (" + slots + ")")
    if spec.processed_at is not None:
        conds.append(f"{dialect.column(spec.processed_at)} IS NULL")
    sql = f"SELECT {', '.join(cols)} FROM {t}" + dialect.where(conds)
    if spec.group is not None:
        sql = sql + f" GROUP BY {dialect.column(spec.group)}"
    columns = DepthColumns(grouped=spec.group is not None, in_work=spec.locked_until is not None)
    return dialect.render("depth", sql), columns


PROGRESS_SHOWN = 100
"""Rows in work a progress read lists at most, per queue (by id)."""


def in_work_progress(dialect: Dialect, spec: TableSpec, grouped: bool) -> Statement:
    """The ids and Progress values of a lease table's rows in work (leased now, in the
    database's clock) that reported one, of the group ``g0`` (``grouped``) or of every group,
    ``PROGRESS_SHOWN`` at most by id. Unfinished: not marked processed."""
    assert spec.progress is not None and spec.locked_until is not None
    now = dialect.server_clock.now
    ident, value = dialect.column(spec.id), dialect.column(spec.progress)
    conds: list[Frag] = [
        f"{dialect.column(spec.locked_until)} > {now}",
        f"{value} IS NOT NULL",
    ]
    if grouped:
        assert spec.group is not None
        conds.append(dialect.column(spec.group) + " = " + P("g0"))
    if spec.processed_at is not None:
        conds.append(f"{dialect.column(spec.processed_at)} IS NULL")
    sql = (
        f"SELECT {ident}, {value} FROM {dialect.table(spec)}"
        + dialect.where(conds)
        + f" ORDER BY {ident} LIMIT {PROGRESS_SHOWN}"
    )
    return dialect.render("progress", sql)


def _dest(
    dialect: Dialect,
    spec: TableSpec,
    dead: DeadLetter,
    *,
    own: bool = True,
    every_group: bool = False,
) -> tuple[str, list[Frag]]:
    """The table that holds a destination's rows, and the conditions that pick them: in a
    dead letter group, those that came from the queue's group (``own``), from any group
    (``every_group``: a queue over every group of a FIFO table), or every one."""
    if dead.group is not None:
        conds: list[Frag] = [dialect.column(spec.group) + " = " + P("dest")]
        if own and spec.origin_group is not None:
            origin = dialect.column(spec.origin_group)
            conds.append(f"{origin} IS NOT NULL" if every_group else origin + " = " + P("origin"))
        if spec.processed_at is not None:
            conds.append(f"{dialect.column(spec.processed_at)} IS NULL")
        return dialect.table(spec), conds
    return dialect.qualified(str(dead.table), dead.schema), []


def _in_ids(dialect: Dialect, spec: TableSpec, count: int) -> Sql:
    return dialect.column(spec.id) + " IN (" + join(", ", (P(f"i{n}") for n in range(count))) + ")"


def count_rows(
    dialect: Dialect, spec: TableSpec, dead: DeadLetter, *, every_group: bool = False
) -> Statement:
    """The rows of a dead letter destination."""
    table, conds = _dest(dialect, spec, dead, every_group=every_group)
    return dialect.render("dead_count", f"SELECT COUNT(*) FROM {table}" + dialect.where(conds))


def list_dead(
    dialect: Dialect, spec: TableSpec, dead: DeadLetter, *, every_group: bool = False
) -> Statement:
    """The first ``limit`` rows of a destination by id, every declared column."""
    table, conds = _dest(dialect, spec, dead, every_group=every_group)
    return dialect.render(
        "dead_list",
        f"SELECT {dialect.select_list(spec)} FROM {table}"
        + dialect.where(conds)
        + f" ORDER BY {dialect.column(spec.id)} LIMIT "
        + P("limit"),
    )


def dead_ids(
    dialect: Dialect,
    spec: TableSpec,
    dead: DeadLetter,
    count: int | None,
    *,
    every_group: bool = False,
) -> Statement:
    """Inside a redrive's transaction, the ids of the destination's rows (``count`` None:
    all of them; else those among ``i0``...), locked where the database locks rows."""
    table, conds = _dest(dialect, spec, dead, every_group=every_group)
    if count is not None:
        conds = [*conds, _in_ids(dialect, spec, count)]
    return dialect.render(
        "dead_ids",
        f"SELECT {dialect.column(spec.id)} FROM {table}"
        + dialect.where(conds)
        + f" ORDER BY {dialect.column(spec.id)}"
        + dialect.lock_suffix,
    )


def dead_origins(dialect: Dialect, spec: TableSpec, dead: DeadLetter, count: int) -> Statement:
    """The id and OriginGroup of the rows among ``i0``... in the dead letter group, whatever
    queue they came from (a redrive names those that are another queue's)."""
    assert dead.group is not None and spec.origin_group is not None
    table, conds = _dest(dialect, spec, dead, own=False)
    return dialect.render(
        "dead_origins",
        f"SELECT {dialect.column(spec.id)}, {dialect.column(spec.origin_group)} FROM {table}"
        + dialect.where([*conds, _in_ids(dialect, spec, count)])
        + f" ORDER BY {dialect.column(spec.id)}",
    )


def dead_keys(dialect: Dialect, spec: TableSpec, dead: DeadLetter, count: int) -> Statement:
    """The id and dedup key of the destination's rows among ``i0``..., by id: a redrive
    returns no row whose key a live row holds (its return would break the unique index)."""
    assert spec.unique is not None
    table, _ = _dest(dialect, spec, dead, own=False)
    return dialect.render(
        "dead_keys",
        f"SELECT {dialect.column(spec.id)}, {dialect.column(spec.unique)} FROM {table}"
        + dialect.where([_in_ids(dialect, spec, count)])
        + f" ORDER BY {dialect.column(spec.id)}",
    )


def live_keys(dialect: Dialect, spec: TableSpec, count: int) -> Statement:
    """Which of the keys ``k0``... a row of the queue's table holds (unfinished, not a dead
    letter in a group)."""
    assert spec.unique is not None
    keys = join(", ", (P(f"k{n}") for n in range(count)))
    conds: list[Frag] = [
        dialect.column(spec.unique) + " IN (" + keys + ")",
        *dialect.unique_holds(spec),
    ]
    return dialect.render(
        "live_keys",
        f"SELECT {dialect.column(spec.unique)} FROM {dialect.table(spec)}"
        + dialect.where(conds)
        + dialect.lock_suffix,
    )


def _reset(dialect: Dialect, col: ColumnSpec) -> str | None:
    """What a redriven row's column becomes: the first delivery's attempt, due now, free, no
    longer a dead letter."""
    if col.role == "attempt":
        return "1"
    if col.role == "retry_after":
        return dialect.server_clock.now
    if col.role in ("locked_until", "processed_at", "origin_group", "dead_lettered_at", "progress"):
        return "NULL"
    return None


def redrive(
    dialect: Dialect,
    spec: TableSpec,
    dead: DeadLetter,
    count: int,
    *,
    every_group: bool = False,
) -> tuple[Statement, ...]:
    """Return ``count`` rows (ids ``i0``...) to their queue as a first delivery due now: a
    dead letter group's rows (those from ``origin``) by one update of their group (to
    ``group``; over every group of a FIFO table, each row to the group it came from unless
    ``group`` names one); a dead letter table's by a copy into the queue's table and a
    delete. Run in one transaction."""
    ids = _in_ids(dialect, spec, count)
    if dead.group is not None:
        table, conds = _dest(dialect, spec, dead, every_group=every_group)
        into: Frag = P("group")
        if every_group and spec.origin_group is not None:
            # First in the SET list: MySQL assigns left to right, and the origin is reset.
            into = "COALESCE(" + P("group") + f", {dialect.column(spec.origin_group)})"
        sets: list[Frag] = [dialect.column(spec.group) + " = " + into]
        for col in spec.columns:
            value = _reset(dialect, col)
            if value is not None:
                sets.append(f"{dialect.column(col)} = {value}")
        return (
            dialect.render(
                "redrive",
                f"UPDATE {table} SET " + join(", ", sets) + dialect.where([*conds, ids]),
            ),
        )
    source = dialect.qualified(str(dead.table), dead.schema)
    names = ", ".join(dialect.column(c) for c in spec.columns)
    values = ", ".join(_reset(dialect, c) or dialect.column(c) for c in spec.columns)
    overriding = dialect.overriding_identity
    return (
        dialect.render(
            "redrive",
            f"INSERT INTO {dialect.table(spec)} ({names}){overriding} SELECT {values} "
            f"FROM {source} WHERE " + ids,
        ),
        dialect.render("redrive", f"DELETE FROM {source} WHERE " + ids),
    )


def redrive_begin(dialect: Dialect) -> str:
    """The text that opens a redrive's transaction."""
    return dialect.redrive_begin().sql


def deliveries_made(spec: TableSpec, attempt: int, *, counted_at_claim: bool = False) -> int:
    """The deliveries a row has had, from its Attempt column: the row lock form counts a
    failed delivery when it settles; the lease and advisory forms, and the row lock form
    with ``count_attempt_at_claim()`` (``counted_at_claim``), count at the claim, so their
    column reads one ahead."""
    if spec.form is RowLock and not counted_at_claim:
        return attempt
    return max(0, attempt - 1)


def bind_ids(ids: Sequence[object]) -> dict[str, object]:
    return {f"i{n}": value for n, value in enumerate(ids)}
