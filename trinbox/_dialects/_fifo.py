"""The statements of a FIFO group (``Group(fifo=True)``, REFERENCE.md §3.6): the claim of the
group's head and the group guard, per dialect.

The claim takes only the group's **head**, its first unfinished row in the group's order, and
only while it is due and (lease form) no row of the group is in work. So nothing is claimed
while the head is in work or not yet due: not the row behind it, nor a row that enters the
group ahead of it later (a smaller priority). The group's order is priority, then id: a head
whose retry is delayed (a backoff, ``retry_after(d)``) stays the head and holds its group
until it is due. With ``delayed_rows_move_behind`` the order is the claim's, priority, due
time, id: such a row moves behind the rows due before it.

The guard runs first in the claim's transaction, so claimers on other connections, brokers or
processes keep the order: it answers 1 when this transaction holds the group, 0 when another
one does (then the claim takes nothing and rolls back).

* PostgreSQL: a transaction-level advisory lock on ``'<schema.table>:' || group``. The row lock
  form holds it until the delivery settles (its transaction is the delivery's); the lease form
  until the claim commits, and from then on the lease holds the group.
* MySQL and MariaDB: the count of the group's unfinished rows equals the count this
  transaction can lock (``FOR UPDATE SKIP LOCKED``): true only if no other transaction holds
  one of them. The locks are held as the PostgreSQL lock is. At ``SERIALIZABLE`` the plain
  count would wait on the rows another claim holds, so a row lock FIFO table is refused there
  (``FifoAtSerializable``).
* SQLite: none, one writer at a time.

A subscription over every group of the table (``InboxQueue(..).every_group()``) first reads
the groups whose head is due and has no row of its group in work (``heads``), in the
group order of their heads, then claims each group's head as a subscription to that group
does: its guard first, so its snapshot is taken once the guard is held. On SQLite, one writer,
one statement claims the heads of several groups at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._declare._markers import Lease, RowLock, Serializable
from .._declare._spec import TableSpec
from ..errors import FifoAtSerializable
from ._clock import lease_at, lease_stamp, token_column
from ._statement import Frag, P, Sql, Statement

if TYPE_CHECKING:
    from ._base import Dialect

__all__ = [
    "check_fifo_opening",
    "fifo_order",
    "head_claim",
    "heads",
    "lease_head_claim",
    "mysql_guard",
    "mysql_lease_head_claim",
    "postgres_guard",
    "postgres_lease_head_claim",
    "sqlite_lease_head_claim",
    "sqlite_lease_heads_claim",
]


def _unfinished(d: Dialect, spec: TableSpec) -> list[Frag]:
    """The group's rows not finished yet: due or not, in work or not."""
    conds: list[Frag] = [d.c(spec.group) + " = " + P("group")]
    if spec.processed_at is not None:
        conds.append(f"{d.c(spec.processed_at)} IS NULL")
    return conds


def fifo_order(d: Dialect, spec: TableSpec, *, prefix: str = "") -> str:
    """A FIFO group's order: priority (smaller first), then id; with
    ``delayed_rows_move_behind``, the claim's order (priority, due time, id)."""
    if spec.delayed_rows_move_behind:
        return d.order_by(spec, prefix=prefix)
    keys = [] if spec.priority is None else [f"{prefix}{d.c(spec.priority)}"]
    return ", ".join([*keys, f"{prefix}{d.c(spec.id)}"])


def _head(d: Dialect, spec: TableSpec) -> list[Frag]:
    """``id`` is the group's head, and the head is due. The row itself is of the group and
    unfinished too: at READ COMMITTED a row another transaction changed after this
    statement's snapshot is locked as it is now, and only these outer conditions are checked
    again on it (the head's select ran on the snapshot). Without them, a head acked or moved
    to its dead letter group just as this claim locks it would be claimed again."""
    t = d.table(spec)
    head = (
        f"SELECT {d.c(spec.id)} FROM {t}"
        + d.where(_unfinished(d, spec))
        + f" ORDER BY {fifo_order(d, spec)} LIMIT 1"
    )
    conds: list[Frag] = [d.c(spec.id) + " = (" + head + ")", *_unfinished(d, spec)]
    if spec.retry_after is not None:
        conds.append(d.c(spec.retry_after) + " <= " + P("now"))
    return conds


def _lease_head(d: Dialect, spec: TableSpec) -> list[Frag]:
    """The head, due, its lease free, and no row of the group in work (a row that entered
    ahead of the head in work is the head now: the head in work still holds the group)."""
    t = d.table(spec)
    work = d.internal(spec, "__work")
    busy = (
        f"SELECT 1 FROM {t} AS {work} WHERE {work}.{d.c(spec.group)} = "
        + P("group")
        + f" AND {work}.{d.c(spec.locked_until)} > "
        + P("now")
    )
    return [*_head(d, spec), d.lease_free(spec), "NOT EXISTS (" + busy + ")"]


def _every_head(d: Dialect, spec: TableSpec, skip: str | None) -> tuple[str, Sql, str]:
    """Every group's head that is due, while (lease form) no row of its group is in work:
    the alias of the head rows; the ``FROM ... WHERE`` of the table's groups but ``skip``
    (the dead letter group; ``DISTINCT``, one pass over the claim index), each joined to its
    head; and the heads' order."""
    t = d.table(spec)
    ident, group = d.c(spec.id), d.c(spec.group)
    groups, name = d.internal(spec, "__groups"), d.internal(spec, "__group")
    row, first = d.internal(spec, "__head"), d.internal(spec, "__first")
    # The groups with an unfinished row, but the dead letter group.
    which = [] if spec.processed_at is None else [f"{d.c(spec.processed_at)} IS NULL"]
    if skip is not None:
        which.append(f"{group} <> {d.literal(skip)}")
    # The group's first unfinished row in the group's order.
    first_row = (
        f"SELECT {first}.{ident} FROM {t} AS {first} WHERE {first}.{group} = {groups}.{name}"
    )
    if spec.processed_at is not None:
        first_row += f" AND {first}.{d.c(spec.processed_at)} IS NULL"
    first_row += f" ORDER BY {fifo_order(d, spec, prefix=f'{first}.')} LIMIT 1"
    source = (
        f" FROM (SELECT DISTINCT {group} AS {name} FROM {t}"
        + d.where(which)
        + f") AS {groups} JOIN {t} AS {row} ON {row}.{ident} = ({first_row})"
    )
    conds: list[Frag] = []
    if spec.retry_after is not None:
        conds.append(f"{row}.{d.c(spec.retry_after)} <= " + P("now"))
    if spec.form is Lease:
        work = d.internal(spec, "__work")
        conds.append(
            f"NOT EXISTS (SELECT 1 FROM {t} AS {work} WHERE {work}.{group} = {groups}.{name} "
            f"AND {work}.{d.c(spec.locked_until)} > " + P("now") + ")"
        )
    return row, source + d.where(conds), fifo_order(d, spec, prefix=f"{row}.")


def heads(d: Dialect, spec: TableSpec, skip: str | None = None) -> Statement:
    """The groups but ``skip`` whose head is due and (lease form) has no row of its group in
    work, in the order of their heads, ``limit`` at most: what a subscription over every
    group reads before it claims each group's head. It locks nothing (each claim does)."""
    row, source, order = _every_head(d, spec, skip)
    return d.r(
        "heads",
        f"SELECT {row}.{d.c(spec.group)}" + source + f" ORDER BY {order} LIMIT " + P("limit"),
    )


def sqlite_lease_heads_claim(d: Dialect, spec: TableSpec, skip: str | None = None) -> Statement:
    """SQLite's lease claim over every group but ``skip``: one UPDATE ... RETURNING stamps
    the heads of up to ``limit`` groups (the single writer is every group's guard)."""
    row, source, order = _every_head(d, spec, skip)
    t = d.table(spec)
    return d.r(
        "claim",
        f"UPDATE {t} SET "
        + lease_stamp(d, spec, lease=lease_at(d))
        + f" WHERE {d.c(spec.id)} IN (SELECT {row}.{d.c(spec.id)}"
        + source
        + f" ORDER BY {order} LIMIT "
        + P("limit")
        + f") RETURNING {d.select_list(spec, attempt_before=True)}"
        + token_column(d, spec, stored=True),
    )


def head_claim(d: Dialect, spec: TableSpec) -> Statement:
    """Row lock (PostgreSQL, MySQL): lock the group's head while it is due."""
    return d.r(
        "claim",
        f"SELECT {d.select_list(spec)} FROM {d.table(spec)}"
        + d.where(_head(d, spec))
        + " FOR UPDATE SKIP LOCKED",
    )


def lease_head_claim(d: Dialect, spec: TableSpec, token: Sql | None = None) -> Sql:
    """Lease (PostgreSQL's CTE, MySQL's select): the locking select of the head while no row
    of the group is in work; ``token``, MySQL's on the database clock, the expiry its stamp
    writes, read from the server as the select's last column."""
    return (
        f"SELECT {d.select_list(spec)}"
        + (token or Sql())
        + f" FROM {d.table(spec)}"
        + d.where(_lease_head(d, spec))
        + " FOR UPDATE SKIP LOCKED"
    )


def postgres_lease_head_claim(d: Dialect, spec: TableSpec) -> Statement:
    """PostgreSQL's lease claim of the head: lock, stamp, and read it as it was, in one
    statement of the guard's transaction."""
    t = d.table(spec)
    ident = d.c(spec.id)
    claimed = d.internal(spec, "__claimed")
    stamped = d.internal(spec, "__stamped")
    row = d.internal(spec, "__row")
    return d.r(
        "claim",
        f"WITH {claimed} AS ("
        + lease_head_claim(d, spec)
        + f"), {stamped} AS (UPDATE {t} AS {row} SET "
        + lease_stamp(d, spec, lease=lease_at(d), row=row)
        + f" FROM {claimed} WHERE {row}.{ident} = {claimed}.{ident}) SELECT *"
        + token_column(d, spec)
        + f" FROM {claimed}",
    )


def mysql_lease_head_claim(d: Dialect, spec: TableSpec, stamp: Statement) -> tuple[Statement, ...]:
    """MySQL's lease claim of the head: the locking select, then the form's own stamp."""
    return (d.r("claim", lease_head_claim(d, spec, token_column(d, spec))), stamp)


def sqlite_lease_head_claim(d: Dialect, spec: TableSpec) -> Statement:
    """SQLite's lease claim of the head: one UPDATE ... RETURNING (the single writer is the
    guard)."""
    t = d.table(spec)
    return d.r(
        "claim",
        f"UPDATE {t} SET "
        + lease_stamp(d, spec, lease=lease_at(d))
        + d.where(_lease_head(d, spec))
        + f" RETURNING {d.select_list(spec, attempt_before=True)}"
        + token_column(d, spec, stored=True),
    )


def postgres_guard(d: Dialect, spec: TableSpec) -> Statement:
    """1 when this transaction took the group's advisory lock, 0 when another holds it. The
    key is the table's name as declared (unquoted), a colon and the group."""
    prefix = d.literal(f"{spec.qualified_name}:")
    return d.r(
        "guard",
        f"SELECT pg_try_advisory_xact_lock(hashtextextended({prefix} || CAST("
        + P("group")
        + " AS text), 0))::int::bigint",
    )


def mysql_guard(d: Dialect, spec: TableSpec) -> Statement:
    """1 when this transaction could lock every unfinished row of the group (no other
    transaction holds one), 0 otherwise."""
    t = d.table(spec)
    where = d.where(_unfinished(d, spec))
    guard = d.internal(spec, "__guard")
    return d.r(
        "guard",
        f"SELECT CAST((SELECT COUNT(*) FROM {t}"
        + where
        + f") = (SELECT COUNT(*) FROM (SELECT {d.c(spec.id)} FROM {t}"
        + where
        + f" FOR UPDATE SKIP LOCKED) AS {guard}) AS SIGNED)",
    )


def check_fifo_opening(d: Dialect, spec: TableSpec) -> None:
    """MySQL: a row lock FIFO table at SERIALIZABLE is refused. There a plain read locks what
    it reads, so the guard's count waits on the row another claim holds until it settles."""
    if not spec.fifo or spec.form is not RowLock or spec.opening is not Serializable:
        return
    msg = (
        f"{spec.label}: a FIFO group's guard counts its rows without locking them, which "
        f"MySQL and MariaDB do not do at SERIALIZABLE, found a row lock FIFO table at "
        f"Serializable (the guard would wait for every delivery in work to settle); declare "
        f"Inbox[RowLock, ReadCommitted] (or leave the opening out), or use Inbox[Lease]"
    )
    raise FifoAtSerializable(msg)
