"""The row lock form's count at claim (``InboxQueue.count_attempt_at_claim()``): its statements
on PostgreSQL and MySQL/MariaDB.

A claim takes the queue's guard (a session lock), selects and locks its rows, counts their
attempt and commits, then locks them again by id in the deliveries' transaction and lets the
guard go. Between the count's commit and the relock the rows are locked by no transaction;
the guard keeps every other counting claim of the queue out of that gap, so it must really be
held: ``lock`` returns 1 when it is, and the form refuses to go on otherwise. (MariaDB reads
``GET_LOCK``'s timeout -1 as an error, returns NULL and takes nothing, where MySQL waits for
ever; a year's timeout means the same on both.)
"""

from __future__ import annotations

from .._declare._markers import RowLock
from .._declare._spec import TableSpec
from ._base import DeadLetter, Dialect, Statements
from ._statement import P, Statement
from .mysql import MySqlDialect
from .postgres import PostgresDialect

__all__ = ["GUARD_TAKEN", "counted_statements"]

GUARD_TAKEN = 1
"""What ``lock`` returns when the guard is held (``GET_LOCK`` says 0 on timeout, NULL on error)."""

# GET_LOCK's longest wait, in seconds: MariaDB refuses a negative timeout (no lock, NULL).
_YEAR = 365 * 24 * 3600


def counted_statements(
    dialect: Dialect, spec: TableSpec, dead_letter: DeadLetter | None
) -> Statements:
    """The row lock form counting the attempt at claim: ``take`` holds the count (its own
    committed transaction) and the relock of the counted row by id in the delivery's
    transaction, reading the attempt as it was before the count; ``lock``/``unlock`` the
    guard. A retry then counts nothing: it rolls back (the count stands), a delayed retry
    only sets the due time."""
    dialect.check(spec, dead_letter)
    assert spec.form is RowLock and spec.attempt is not None
    d = dialect
    t = d.table(spec)
    attempt = d.c(spec.attempt)
    count = d.r("count", f"UPDATE {t} SET {attempt} = {attempt} + 1" + d.by_id(spec, token=False))
    conds = [d.c(spec.id) + " = " + P("id"), *d.claimable(spec)]
    relock = d.r(
        "relock",
        f"SELECT {d.select_list(spec, attempt_before=True)} FROM {t}"
        + d.where(conds)
        + " FOR UPDATE SKIP LOCKED",
    )
    return Statements(
        claim=(d.row_lock_claim(spec),),
        ack=d.finish(spec, token=False),
        retry=None,
        retry_after=d.retry_after_statement(spec, token=False, count=False),
        dead_letter=d.dead_letter_statements(spec, dead_letter, token=False),
        insert=d.insert(spec),
        begin=d.begin(spec),
        take=(count, relock),
        lock=guard(d, unlock=False),
        unlock=guard(d, unlock=True),
    )


def guard(dialect: Dialect, *, unlock: bool) -> Statement:
    """Take (waiting) or let go of the session lock named by ``key``. Taking it returns
    ``GUARD_TAKEN`` once held."""
    if isinstance(dialect, PostgresDialect):
        if unlock:
            return dialect.r(
                "unlock", "SELECT pg_advisory_unlock(hashtextextended(" + P("key") + ", 0))"
            )
        # pg_advisory_lock returns void: as a row source it yields one row, once held.
        sql = f"SELECT {GUARD_TAKEN} FROM pg_advisory_lock(hashtextextended(" + P("key") + ", 0))"
        return dialect.r("lock", sql)
    if isinstance(dialect, MySqlDialect):
        # Lock names are the server's: the database's name goes in; SHA2 keeps 64 characters.
        name = "SHA2(CONCAT_WS('.', DATABASE(), " + P("key") + "), 256)"
        if unlock:
            return dialect.r("unlock", "SELECT RELEASE_LOCK(" + name + ")")
        return dialect.r("lock", "SELECT GET_LOCK(" + name + f", {_YEAR})")
    msg = f"{dialect.name} has no row lock form, so no count at claim"
    raise AssertionError(msg)
