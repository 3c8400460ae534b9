"""The database's clock in the statements (``DatabaseClock``): "now", due times and lease
expiries computed by the server in the statement itself, instead of bound from the host.

Hosts' clocks differ; the server's is one. On a dialect made with ``database_clock=True``:

- the ``now`` slot renders as the server's now (PostgreSQL ``statement_timestamp()``, MySQL
  ``UTC_TIMESTAMP(6)``, SQLite ``'now'`` written as trinbox writes its times), so due checks,
  lease checks and processed marks read the server's clock;
- the ``retry_at`` slot renders as that now plus the ``delay`` slot (microseconds);
- the lease claims write ``lease_at`` (now plus the ``lease_seconds`` slot, rounded up to
  the next whole second as the host's token is) and return it as their last column, the
  delivery's token (``token_column``); the keeper's round writes ``lease_at`` too and
  returns what it wrote (MySQL: its locking select reads it, the update binds it), so every
  token is one the server made;
- the publish writes a row's RetryAfter field as the server's now plus the delay slot, unless
  the publish gives the field (``insert_slot``).

The host clock's statements are left exactly as they are. Pure text, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._declare._spec import ColumnSpec, TableSpec
from ._statement import Frag, P, Param, Sql, join

if TYPE_CHECKING:
    from ._base import Dialect

__all__ = [
    "ServerClock",
    "insert_slot",
    "lease_at",
    "lease_stamp",
    "on_server_clock",
    "server_clock",
    "token_column",
    "delay_slot",
]


@dataclass(frozen=True, slots=True)
class ServerClock:
    """One dialect's clock expressions: ``now`` as the stored times compare with it, ``due``
    of a delay slot in microseconds, ``expiry`` of a lease slot in whole seconds."""

    now: str
    due: Callable[[Sql], Sql]
    expiry: Callable[[Sql], Sql]


# MySQL: UTC_TIMESTAMP is UTC whatever the session's time_zone (NOW() would follow it); it is
# read once per statement, so its three reads below agree. The expiry is rounded up to the
# next whole second: a DATETIME without fractions then stores the token exactly.
_MY_NOW = "UTC_TIMESTAMP(6)"
_MY_FRACTION = f"MICROSECOND({_MY_NOW})"
# SQLite: 'now' is read once per statement step (the claim's UPDATE stamps every row in its
# first step) and has milliseconds, padded to the six digits of the text trinbox writes.
_LITE_DAY = "%Y-%m-%d %H:%M"

_CLOCKS: dict[str, ServerClock] = {
    "PostgreSQL": ServerClock(
        now="statement_timestamp()",
        due=lambda d: "(statement_timestamp() + " + d + "::bigint * interval '1 microsecond')",
        # The epoch, not date_trunc: date_trunc works in the session's TimeZone.
        expiry=lambda s: (
            "to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + " + s + "::integer))"
        ),
    ),
    "MySQL": ServerClock(
        now=_MY_NOW,
        due=lambda d: f"({_MY_NOW} + INTERVAL " + d + " MICROSECOND)",
        expiry=lambda s: (
            f"({_MY_NOW} - INTERVAL {_MY_FRACTION} MICROSECOND + INTERVAL ("
            + s
            + f" + ({_MY_FRACTION} > 0)) SECOND)"
        ),
    ),
    "SQLite": ServerClock(
        now=f"(strftime('{_LITE_DAY}:%f', 'now') || '000')",
        due=lambda d: (
            f"(strftime('{_LITE_DAY}:%f', 'now', '+' || ("
            + d
            + " / 1000000.0) || ' seconds') || '000')"
        ),
        # Whole seconds of now + lease + 0.999 s: the next whole second ('now' has ms).
        expiry=lambda s: (
            f"(strftime('{_LITE_DAY}:%S', 'now', '+' || "
            + s
            + " || ' seconds', '+0.999 seconds') || '.000000')"
        ),
    ),
}


def server_clock(dialect: Dialect) -> ServerClock:
    return _CLOCKS[dialect.name]


_NOW = Param("now")
_RETRY_AT = Param("retry_at")


def on_server_clock(dialect: Dialect, sql: Frag) -> Frag:
    """``sql`` with its ``now`` and ``retry_at`` slots written as the server's clock, on a
    dialect of the database clock; as it is on the host clock."""
    if not dialect.database_clock or isinstance(sql, str):
        return sql
    if _NOW not in sql.parts and _RETRY_AT not in sql.parts:
        return sql
    clock = server_clock(dialect)
    parts: list[str | Param | Sql] = []
    for part in sql.parts:
        if part == _NOW:
            parts.append(clock.now)
        elif part == _RETRY_AT:
            parts.append(clock.due(P("delay")))
        else:
            parts.append(part)
    return Sql(*parts)


def lease_at(dialect: Dialect) -> Sql:
    """What a lease claim writes into the lease column: the host's token (``lease``), or
    the server's now plus ``lease_seconds``."""
    if not dialect.database_clock:
        return P("lease")
    return server_clock(dialect).expiry(P("lease_seconds"))


def lease_stamp(dialect: Dialect, spec: TableSpec, *, lease: Sql, row: str = "") -> Sql:
    """A lease claim's SET list: the lease column gets ``lease``, and the attempt (read from
    ``row``, an alias of the table, when the update names one) is counted."""
    sets: list[Frag] = [dialect.c(spec.locked_until) + " = " + lease]
    if spec.attempt is not None:
        attempt = dialect.c(spec.attempt)
        source = f"{row}.{attempt}" if row else attempt
        sets.append(f"{attempt} = {source} + 1")
    return join(", ", sets)


def token_column(dialect: Dialect, spec: TableSpec, *, stored: bool = False) -> Sql:
    """The lease claim's last column on the database clock, the token it wrote: the lease
    column itself where the claim returns the row after its stamp (``stored``, SQLite's
    RETURNING), else the expiry again (the same value within one statement). Nothing on the
    host clock, whose token the host made."""
    if not dialect.database_clock:
        return Sql()
    name = dialect.q(dialect.internal(spec, "__token"))
    value = Sql(dialect.c(spec.locked_until)) if stored else lease_at(dialect)
    return ", " + value + " AS " + name


def delay_slot(dialect: Dialect, spec: TableSpec) -> str:
    """The publish's slot of the delay in microseconds, named clear of the columns' slots."""
    return dialect.internal(spec, "delay_us")


def insert_slot(dialect: Dialect, spec: TableSpec, col: ColumnSpec) -> Sql:
    """A publish's value of ``col``: its slot; on the database clock the RetryAfter field is
    the given value or else the server's now plus the delay."""
    slot = P(col.column)
    if not dialect.database_clock or col.role != "retry_after":
        return slot
    due = server_clock(dialect).due(P(delay_slot(dialect, spec)))
    return "COALESCE(" + slot + ", " + due + ")"
