"""Dialects as types: what each database serves, so that type checkers refuse what it cannot.

A dialect type derives from ``Serves[tuple[Forms, Isolations]]``, contravariant: ``Sqlite``
serves ``tuple[Lease | Advisory, ...]`` and so is a ``Serves[tuple[Lease, Default]]`` but not a
``Serves[tuple[RowLock, Default]]``; publishing reads it (``broker.publish``'s self type).

What a dialect mounts, the (row, mode) pairs ``App.include`` takes, is spelt out beside it
(``SQLITE_MOUNTS``...): a union of ``tuple[RowOf[Forms, Isolations], Modes]``, where a rule may
tie the three together (PostgreSQL mounts a lease table at RepeatableRead or Serializable in
plain mode only: a transactional lease handler must see the lease extensions committed after it
began). ``App.include`` has one overload per dialect that asks for a subscriber whose ``Needs``
(_api/queue.py) are among them; tests/typing/check_matrix.py has every cell.

The row's slot is the protocol ``RowOf``, not the class ``Inbox``: ``Inbox``'s type parameters
are constrained (one form, one isolation level per table), and a dialect's capabilities are unions.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeAlias, TypeVar, final

from ._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Form,
    Immediate,
    Isolation,
    Lease,
    Plain,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
    Transactional,
)

__all__ = [
    "AnyDatabase",
    "ANY_DATABASE_MOUNTS",
    "MYSQL_MOUNTS",
    "POSTGRES_MOUNTS",
    "SQLITE_MOUNTS",
    "MySql",
    "Postgres",
    "RowOf",
    "Serves",
    "Sqlite",
]

Capability = TypeVar("Capability", contravariant=True)
F = TypeVar("F", bound=Form, covariant=True)
O = TypeVar("O", bound=Isolation, covariant=True)  # noqa: E741


class RowOf(Protocol[F, O]):
    """A row of a table whose claim form is ``F`` and isolation level ``O``: every ``Inbox[F, O]``
    row class is one (for type checkers; nothing is checked against it at runtime)."""

    def __trinbox_form__(self) -> tuple[F, O]: ...


class Serves(Generic[Capability]):
    """A dialect that serves the (form, isolation level) pairs its argument names."""


_PgIsolations: TypeAlias = Default | ReadCommitted | RepeatableRead | Serializable
_MySqlIsolations: TypeAlias = (
    Default | ReadUncommitted | ReadCommitted | RepeatableRead | Serializable
)
_SqliteIsolations: TypeAlias = Default | Deferred | Immediate | Exclusive
_Modes: TypeAlias = Plain | Transactional


@final
class Postgres(Serves[tuple[RowLock | Lease | Advisory, _PgIsolations]]):
    """PostgreSQL (asyncpg): every form; read committed, repeatable read, serializable (a
    transactional lease table at read committed only)."""


@final
class MySql(Serves[tuple[RowLock | Lease | Advisory, _MySqlIsolations]]):
    """MySQL 8.0.1+ and MariaDB 10.6+ (aiomysql): every form; every isolation level."""


@final
class Sqlite(Serves[tuple[Lease | Advisory, _SqliteIsolations]]):
    """SQLite: the lease and advisory forms (no row locks); deferred/immediate/exclusive."""


@final
class AnyDatabase(Serves[tuple[Lease | Advisory, Default]]):
    """Whichever database a URL names (``SqlBroker.from_url``), known only when the program
    runs: what every dialect serves, the lease and advisory forms at the default isolation level."""


POSTGRES_MOUNTS: TypeAlias = (
    tuple[RowOf[RowLock | Advisory, _PgIsolations], _Modes]
    | tuple[RowOf[Lease, _PgIsolations], Plain]
    | tuple[RowOf[Lease, Default | ReadCommitted], Transactional]
)
MYSQL_MOUNTS: TypeAlias = tuple[RowOf[RowLock | Lease | Advisory, _MySqlIsolations], _Modes]
SQLITE_MOUNTS: TypeAlias = tuple[RowOf[Lease | Advisory, _SqliteIsolations], _Modes]
ANY_DATABASE_MOUNTS: TypeAlias = tuple[RowOf[Lease | Advisory, Default], _Modes]
