"""The statements of a cancel of one row (``broker.cancel(Row, id)``), per form and dialect.
Pure text, no I/O.

A cancel finds the row in one of four states, and only a queued row changes:

- **queued** (unfinished and not in work): settled as cancelled, as a drop settles it (the
  ack's statement: deleted, or ProcessedAt stamped with a NULL Result, which ``broker.wait``
  reads as ``"drop"``), in one statement or one transaction that first makes sure the row is
  not in work, so a claim racing the cancel either has the row (the cancel changes nothing)
  or never gets it (its take is guarded on the row being claimable);
- **in work**, **finished** or **not found**: the settlement changes nothing, and ``state``
  reads which.

Not in work, by form:

- row lock: ``probe``, ``SELECT ... FOR UPDATE SKIP LOCKED`` of the row in ``begin``'s
  transaction, finds it (a handler's transaction holds the row it works on); the
  ``settle`` then runs in the same transaction;
- lease: the ``settle`` alone (autocommit), guarded on the lease being free on the
  broker's clock (the database's where the broker reads it);
- advisory: the ``settle`` alone, guarded on the row's key being free (``Dialect.key_free``);
  on SQLite it binds ``held``, the keys in work in this process, and runs in a write
  transaction (``begin``) on the connection's thread, read under the registry's lock.

Unfinished: ProcessedAt NULL, and OriginGroup NULL (a row in its dead letter group has
finished for its queue); ``state`` reads the two (NULL where the table has no such field).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._declare._markers import Advisory, Lease, RowLock
from .._declare._spec import TableSpec
from ._base import Dialect
from ._statement import Frag, P, Sql, Statement, join

__all__ = ["CancelPlan", "RequestPlan", "cancel_plan", "request_plan"]


@dataclass(frozen=True, slots=True)
class CancelPlan:
    """``begin``: the transaction around ``probe`` and ``settle`` (``None``: the settle runs
    alone, in autocommit); ``probe``: a locking select that returns the row while it is
    unfinished and free; ``settle``: the guarded settlement, whose row count says the row was
    cancelled while queued; ``state``: the row's (processed, dead-lettered) columns, or no
    row; ``keys``: the settle binds ``held``, the keys this process holds (SQLite)."""

    begin: Statement | None
    probe: Statement | None
    settle: Statement
    state: Statement

    @property
    def keys(self) -> bool:
        return "held" in self.settle.params


def cancel_plan(dialect: Dialect, spec: TableSpec) -> CancelPlan:
    """The cancel statements of a row of ``spec`` on ``dialect``."""
    d = dialect
    d.check(spec)  # a form the dialect cannot serve: UnsupportedForm
    t = d.table(spec)
    ident = d.column(spec.id) + " = " + P("id")
    unfinished: list[Frag] = [ident]
    if spec.processed_at is not None:
        unfinished.append(f"{d.column(spec.processed_at)} IS NULL")
    if spec.origin_group is not None:
        unfinished.append(f"{d.column(spec.origin_group)} IS NULL")
    guards = list(unfinished)
    begin: Statement | None = None
    probe: Statement | None = None
    if spec.form is RowLock:
        begin = d.plain_begin()
        probe = d.render(
            "cancel probe",
            f"SELECT {d.column(spec.id)} FROM {t}"
            + d.where(unfinished)
            + " FOR UPDATE SKIP LOCKED",
        )
    elif spec.form is Lease:
        guards.append(d.lease_free(spec))
    else:
        assert spec.form is Advisory
        guards.append(d.key_free(spec))
    where = d.where(guards)
    if spec.processed_at is not None:
        sets: list[Frag] = [d.column(spec.processed_at) + " = " + P("now")]
        if spec.result is not None:
            sets.append(d.column(spec.result) + " = " + d.result_slot())
        settle = d.render("cancel", "UPDATE " + t + " SET " + join(", ", sets) + where)
    else:
        settle = d.render("cancel", "DELETE FROM " + t + where)
    if "held" in settle.params:
        begin = d.redrive_begin()  # SQLite's write lock at BEGIN: the registry read holds
    columns = [
        "NULL" if col is None else d.column(col) for col in (spec.processed_at, spec.origin_group)
    ]
    state = d.render("cancel state", f"SELECT {', '.join(columns)} FROM {t}" + d.where([ident]))
    return CancelPlan(begin=begin, probe=probe, settle=settle, state=state)


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """The statements of a cancel request table (``CancelRequests``): ``request`` writes one
    (table, row id) unless it is there, lapsing at ``retry_at`` (the broker's now plus the
    table's ``expire_after``: the server's now plus ``delay`` on the database clock);
    ``lapsed`` deletes the requests of every table that lapsed, before each ``request`` and
    in ``trinbox prune`` (``lapsed_count`` counts them, ``--dry-run``);
    ``pending`` reads the row ids asked for one table that have not lapsed (one statement per
    subscription and poll interval, only while it has rows in work); ``served`` deletes one
    once its handler was cancelled; ``ddl`` creates the table;
    ``channel``: where PostgreSQL's NOTIFY announces a request (its payload: the queue
    table), with ``listen_notify``."""

    request: Statement
    lapsed: Statement
    lapsed_count: Statement
    pending: Statement
    served: Statement
    ddl: tuple[str, ...]
    channel: str = ""  # the NOTIFY channel of its requests: the table's qualified name

    @property
    def checked(self) -> tuple[Statement, ...]:
        return (self.request, self.lapsed, self.lapsed_count, self.pending, self.served)

    @property
    def label(self) -> str:
        """The request table's qualified name (its NOTIFY channel is the same)."""
        return self.channel


def request_plan(dialect: Dialect, table: str, schema: str | None, where: str) -> RequestPlan:
    """The statements of the cancel request table ``[schema.]table`` on ``dialect``."""
    d = dialect
    for name in (table, schema):
        if name is not None:
            d.check_identifier(name, where)
    name = d.qualified(table, schema)
    before, after = d.insert_if_absent
    request = d.render(
        "cancel request",
        f"{before} {name} (queue_table, row_id, expires_at) VALUES ("
        + P("table")
        + ", "
        + P("row_id")
        + ", "
        + P("retry_at")
        + ")"
        + after,
    )
    # Only the requests of the last expire_after, one each per row in work then: no batches.
    gone = Sql("expires_at <= ", P("now"))
    lapsed = d.render("cancel requests lapsed", f"DELETE FROM {name} WHERE " + gone)
    lapsed_count = d.render("cancel requests lapsed", f"SELECT count(*) FROM {name} WHERE " + gone)
    pending = d.render(
        "cancel requests",
        f"SELECT row_id FROM {name} WHERE queue_table = "
        + P("table")
        + " AND expires_at > "
        + P("now"),
    )
    served = d.render(
        "cancel served",
        f"DELETE FROM {name} WHERE queue_table = " + P("table") + " AND row_id = " + P("row_id"),
    )
    rules = d.ddl_rules
    text = rules.indexed_text
    create = (
        f"CREATE TABLE IF NOT EXISTS {name} (\n"
        f"    queue_table {text} NOT NULL,\n"
        f"    row_id {text} NOT NULL,\n"
        f"    expires_at {rules.time} NOT NULL,\n"
        f"    PRIMARY KEY (queue_table, row_id)\n"
        f"){rules.table_options}"
    )
    channel = f"{schema}.{table}" if schema else table
    return RequestPlan(
        request=request,
        lapsed=lapsed,
        lapsed_count=lapsed_count,
        pending=pending,
        served=served,
        ddl=(create,),
        channel=channel,
    )
