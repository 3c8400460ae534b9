"""Marker types that put a table's claim form, its transaction isolation level and a
subscription's mode into the type system. They are never instantiated; their names are read at
runtime too."""

from __future__ import annotations

from typing import Final, final

__all__ = [
    "Advisory",
    "Default",
    "Deferred",
    "Exclusive",
    "Form",
    "Immediate",
    "Lease",
    "Mode",
    "Isolation",
    "Plain",
    "ReadCommitted",
    "ReadUncommitted",
    "RepeatableRead",
    "RowLock",
    "Serializable",
    "Transactional",
    "form_name",
    "isolation_name",
]


class _Marker:
    """A phantom type: it exists to be named in a type, never to be created."""

    name: str = ""

    def __new__(cls) -> _Marker:
        msg = f"{cls.__name__} is a marker type for Inbox[...] and is never instantiated"
        raise TypeError(msg)


class Form(_Marker):
    """Base of the three claim forms."""


@final
class RowLock(Form):
    """FOR UPDATE SKIP LOCKED in a transaction held while the handler runs (PostgreSQL, MySQL)."""

    name = "row_lock"


@final
class Lease(Form):
    """The claim writes a lease expiry into the row (a ``LockedUntil`` field) and commits."""

    name = "lease"


@final
class Advisory(Form):
    """Each row is held by a lock on its key (``advisory_lock=``), kept by its own session."""

    name = "advisory"


class Isolation(_Marker):
    """Base of what a table's transactions begin at: the SQL isolation levels and SQLite's
    begin modes."""


@final
class Default(Isolation):
    """The dialect's default isolation level: PostgreSQL plain BEGIN, MySQL READ COMMITTED, SQLite
    deferred."""

    name = "default"


class IsolationLevel(Isolation):
    """An SQL isolation level (PostgreSQL, MySQL/MariaDB)."""


@final
class ReadUncommitted(IsolationLevel):
    name = "read_uncommitted"


@final
class ReadCommitted(IsolationLevel):
    name = "read_committed"


@final
class RepeatableRead(IsolationLevel):
    name = "repeatable_read"


@final
class Serializable(IsolationLevel):
    name = "serializable"


class SqliteMode(Isolation):
    """A SQLite transaction mode (every SQLite transaction is serializable)."""


@final
class Deferred(SqliteMode):
    name = "deferred"


@final
class Immediate(SqliteMode):
    name = "immediate"


@final
class Exclusive(SqliteMode):
    name = "exclusive"


class Mode(_Marker):
    """Base of the subscription modes."""


@final
class Plain(Mode):
    """The handler leaves the delivery's transaction alone."""

    name = "plain"


@final
class Transactional(Mode):
    """The handler writes through the delivery's transaction (``keys.Tx``); ack commits them."""

    name = "transactional"


FORMS: Final = (RowLock, Lease, Advisory)
ISOLATION_LEVELS: Final = (ReadUncommitted, ReadCommitted, RepeatableRead, Serializable)
SQLITE_MODES: Final = (Deferred, Immediate, Exclusive)
ISOLATIONS: Final = (Default, *ISOLATION_LEVELS, *SQLITE_MODES)


def form_name(form: type[Form]) -> str:
    return form.name


def isolation_name(isolation: type[Isolation]) -> str:
    return isolation.name
