"""Dialects as types: what each database serves, so that mypy refuses a mount it cannot serve.

A dialect type derives from ``Serves[tuple[Forms, Openings]]``, contravariant in its argument:
``Sqlite`` serves ``tuple[Lease | Advisory, ...]`` and so is a ``Serves[tuple[Lease, Default]]``
but not a ``Serves[tuple[RowLock, Default]]``. A broker is covariant in its dialect.
``App.include(broker, subscriber)`` reads the forms and openings a broker serves off its type
and asks for a subscriber whose row is an ``Inbox`` of one of each, so that mypy says, for a row
lock table on SQLite: Argument 2 to "include" of "App" has incompatible type
"Subscriber[Job, Plain]"; expected "Subscriber[Inbox[Lease | Advisory, Default | Deferred |
Immediate | Exclusive], Any] | ..." (tests/typing/check_matrix.py has every pair).
"""

from __future__ import annotations

from typing import Generic, TypeVar, final

from ._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Immediate,
    Lease,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
)

__all__ = ["MySql", "Postgres", "Serves", "Sqlite"]

Capability = TypeVar("Capability", contravariant=True)


class Serves(Generic[Capability]):
    """A dialect that serves the (form, opening) pairs its argument names."""


@final
class Postgres(
    Serves[
        tuple[
            RowLock | Lease | Advisory,
            Default | ReadCommitted | RepeatableRead | Serializable,
        ]
    ]
):
    """PostgreSQL (asyncpg): every form; read committed, repeatable read, serializable."""


@final
class MySql(
    Serves[
        tuple[
            RowLock | Lease | Advisory,
            Default | ReadUncommitted | ReadCommitted | RepeatableRead | Serializable,
        ]
    ]
):
    """MySQL 8.0.1+ and MariaDB 10.6+ (aiomysql): every form; every isolation level."""


@final
class Sqlite(Serves[tuple[Lease | Advisory, Default | Deferred | Immediate | Exclusive]]):
    """SQLite: the lease and advisory forms (no row locks); deferred/immediate/exclusive."""
