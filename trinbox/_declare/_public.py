"""The type parameters of ``Inbox`` as users subclass it: constrained, for mypy only.

The class itself is declared in ``trinbox/__init__.py`` (under ``TYPE_CHECKING``; at runtime
``trinbox.Inbox`` is ``_inbox.Inbox``), so that mypy's notes name the module users import it
from: "__init_subclass__" defined in "trinbox".

A table has one claim form and one opening, so ``class Job(Inbox[Lease | Advisory])`` and
``Inbox[Lease, Default | Serializable]`` are type errors (mypy: Invalid type argument value
for "Inbox"  [type-var]), and ``DeclarationError`` at runtime. Inside trinbox the same class is
named with bound type parameters (``_inbox.Inbox``), because a dialect's capabilities are unions
(``App.include`` asks for an ``Inbox[Lease | Advisory, ...]`` on SQLite, and a row class
``Inbox[Lease]`` is one by covariance): the public subclass exists for the type checker only.

The constraints also hold the bases the markers share (``Form``, ``Opening``, ``Isolation``,
``SqliteMode``): mypy joins two rows' types through them (``[job_subscriber, keyed_subscriber]``
is a list of ``Subscriber[Inbox[Form, Default], Plain]``), and a join whose type argument is no
constraint is ``object``. ``Inbox[Form]`` thus passes mypy; no row class declares it (runtime:
``DeclarationError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["F", "O"]

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from ._markers import (
        Advisory,
        Default,
        Deferred,
        Exclusive,
        Form,
        Immediate,
        Isolation,
        Lease,
        Opening,
        ReadCommitted,
        ReadUncommitted,
        RepeatableRead,
        RowLock,
        Serializable,
        SqliteMode,
    )

    F = TypeVar("F", RowLock, Lease, Advisory, Form, covariant=True)
    O = TypeVar(  # noqa: E741
        "O",
        Default,
        Opening,
        Isolation,
        SqliteMode,
        ReadUncommitted,
        ReadCommitted,
        RepeatableRead,
        Serializable,
        Deferred,
        Immediate,
        Exclusive,
        covariant=True,
        default=Default,
    )
