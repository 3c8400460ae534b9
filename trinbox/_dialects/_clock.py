"""The database's clock in the statements (``DatabaseClock``): "now", due times and lease
expiries computed by the server in the statement itself, instead of bound from the host.

Hosts' clocks differ; the server's is one. On a dialect made with ``database_clock=True``
(the methods of the clock on ``Dialect``):

- the ``now`` slot renders as the server's now (``Dialect.server_clock.now``: PostgreSQL
  ``statement_timestamp()``, MySQL ``UTC_TIMESTAMP(6)``, SQLite ``'now'`` written as trinbox
  writes its times), so due checks, lease checks and processed marks read the server's clock;
- the ``retry_at`` slot renders as that now plus the ``delay`` slot (microseconds);
- the lease claims write ``lease_at`` (now plus the ``lease_seconds`` slot, rounded up to
  the next whole second as the host's token is) and return it as their last column, the
  delivery's token (``token_column``); the keeper's round writes ``lease_at`` too and
  returns what it wrote (MySQL: its locking select reads it, the update binds it), so every
  token is one the server made;
- the publish writes a row's RetryAfter field as the server's now plus the delay slot, unless
  the publish gives the field (``insert_slot``).

The host clock's statements are left exactly as they are. The same ``now`` is the DDL's
default and the inspection queries' now, whichever clock the broker uses. Pure text, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._statement import Sql

__all__ = ["ServerClock"]


@dataclass(frozen=True, slots=True)
class ServerClock:
    """One dialect's clock expressions: ``now`` as the stored times compare with it, ``due``
    of a delay slot in microseconds, ``expiry`` of a lease slot in whole seconds, ``age`` the
    seconds from a stored time (``{t}``) to now."""

    now: str
    due: Callable[[Sql], Sql]
    expiry: Callable[[Sql], Sql]
    age: str
