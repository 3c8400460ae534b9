"""Whose clock says "now": the public clock types a broker takes (``clock=``).

``DatabaseClock()``, the default on PostgreSQL and MySQL: every due time, processed mark and
lease is computed by the database server in the statement that writes or compares it, so
hosts whose clocks differ still agree. ``SystemClock()``, the default on SQLite: the host's
clock, bound into the statements as a value. Any other callable returning an aware UTC
``datetime`` is a host clock too (``trinbox.testing.TrioClock`` follows Trio's virtual time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from .._util import HostClock

__all__ = ["DatabaseClock", "SystemClock", "host_clock", "uses_database_clock"]


@dataclass(frozen=True, slots=True)
class SystemClock:
    """The host's system clock: ``datetime.now(UTC)``, bound into the statements. Each host
    stamps leases and due times by its own clock, so hosts sharing a queue must agree on the
    time (NTP) to well within half a lease."""

    def __call__(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class DatabaseClock:
    """The database server's clock, written into the statements: PostgreSQL
    ``statement_timestamp()``, MySQL ``UTC_TIMESTAMP(6)``, SQLite ``'now'``. Due times,
    processed marks and leases are computed by the server; a lease claim returns the expiry
    it wrote as the delivery's token, so no host's clock enters a lease."""


def host_clock(clock: HostClock | DatabaseClock | None) -> HostClock:
    """The callable a broker reads for host-side "now": the clock given, or the system clock
    (also under the database clock, where it only bounds delays and serves events)."""
    if clock is None or isinstance(clock, DatabaseClock):
        return SystemClock()
    if not callable(clock):
        msg = (
            f"a broker's clock is DatabaseClock(), SystemClock() or a callable returning an "
            f"aware UTC datetime, found {type(clock).__name__} {clock!r}; pass one of those, "
            f"or leave it out (the database's clock on PostgreSQL and MySQL, the system clock "
            f"on SQLite)"
        )
        raise TypeError(msg)
    return clock


def uses_database_clock(clock: object, *, default: bool) -> bool:
    """Whether ``clock`` (a broker's argument) is the database's; ``None`` is the default."""
    if clock is None:
        return default
    return isinstance(clock, DatabaseClock)
