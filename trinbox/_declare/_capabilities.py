"""Dialects as types: what each database serves, so that mypy refuses a mount it cannot serve.

A dialect type derives from ``Serves[tuple[Forms, Openings], Mounts]``, contravariant in both
arguments. The first names the claim forms and openings the dialect serves: ``Sqlite`` serves
``tuple[Lease | Advisory, ...]`` and so is a ``Serves[tuple[Lease, Default]]`` but not a
``Serves[tuple[RowLock, Default]]`` (publishing reads it). The second names the (row, mode)
pairs it mounts, ``tuple[RowOf[Forms, Openings], Modes]``, a union where a rule ties the three
together: PostgreSQL mounts a lease table at RepeatableRead or Serializable in plain mode only
(a transactional lease handler must see the lease extensions committed after it began).

``App.include(broker, subscriber)`` reads the second argument off the broker's type and asks
for a subscriber whose ``Needs`` (subscribers.py: the row, its form and opening, the mode) are
among them, so that mypy says, for a row lock table on SQLite: Argument 2 to "include" of "App"
has incompatible type "Subscriber[Job, Plain, ..., Needs[Job, RowLock, Default, Plain] |
None]"; expected "Subscriber[Any, Any, ..., tuple[RowOf[Lease | Advisory, Default | Deferred |
Immediate | Exclusive], Plain | Transactional] | None]" (tests/typing/check_matrix.py has every
cell).

The row's slot is the protocol ``RowOf``, not the class ``Inbox`` (whose subclasses satisfy
it): a list of subscribers of several row classes joins them into the public ``trinbox.Inbox``
(loops, subscribers.py), and two classes named ``Inbox`` in one message would make mypy print
both with their module paths.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, final

from typing_extensions import TypeVar

from ._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Form,
    Immediate,
    Lease,
    Opening,
    Plain,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
    Transactional,
)

__all__ = ["AnyDatabase", "MySql", "Postgres", "RowOf", "Serves", "Sqlite"]

Capability = TypeVar("Capability", contravariant=True)
Mounts = TypeVar("Mounts", contravariant=True, default=Any)
F = TypeVar("F", bound=Form, covariant=True)
O = TypeVar("O", bound=Opening, covariant=True)  # noqa: E741


class RowOf(Protocol[F, O]):
    """A row of a table whose claim form is ``F`` and opening ``O``: every ``Inbox[F, O]``
    row class is one (for mypy; nothing is checked against it at runtime)."""

    def __trinbox_form__(self) -> tuple[F, O]: ...


class Serves(Generic[Capability, Mounts]):
    """A dialect that serves the (form, opening) pairs its first argument names, and mounts
    the (row, mode) pairs its second names."""


_PgOpenings = Default | ReadCommitted | RepeatableRead | Serializable
_MySqlOpenings = Default | ReadUncommitted | ReadCommitted | RepeatableRead | Serializable
_SqliteOpenings = Default | Deferred | Immediate | Exclusive
_Modes = Plain | Transactional


@final
class Postgres(
    Serves[
        tuple[RowLock | Lease | Advisory, _PgOpenings],
        tuple[RowOf[RowLock | Advisory, _PgOpenings], _Modes]
        | tuple[RowOf[Lease, _PgOpenings], Plain]
        | tuple[RowOf[Lease, Default | ReadCommitted], Transactional],
    ]
):
    """PostgreSQL (asyncpg): every form; read committed, repeatable read, serializable (a
    transactional lease table at read committed only)."""


@final
class MySql(
    Serves[
        tuple[RowLock | Lease | Advisory, _MySqlOpenings],
        tuple[RowOf[RowLock | Lease | Advisory, _MySqlOpenings], _Modes],
    ]
):
    """MySQL 8.0.1+ and MariaDB 10.6+ (aiomysql): every form; every isolation level."""


@final
class Sqlite(
    Serves[
        tuple[Lease | Advisory, _SqliteOpenings],
        tuple[RowOf[Lease | Advisory, _SqliteOpenings], _Modes],
    ]
):
    """SQLite: the lease and advisory forms (no row locks); deferred/immediate/exclusive."""


@final
class AnyDatabase(
    Serves[
        tuple[Lease | Advisory, Default],
        tuple[RowOf[Lease | Advisory, Default], _Modes],
    ]
):
    """Whichever database a URL names (``SqlBroker.from_url``), known only when the program
    runs: what every dialect serves, the lease and advisory forms at the default opening."""
