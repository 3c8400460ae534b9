"""The ``Outbox`` base: a row class statement declares an outbox record table.

    class OrderEvents(Outbox, table="order_outbox"):
        id: Annotated[int, Id(generated=True)]
        name: Annotated[str, Group()]
        retry_after: Annotated[datetime, RetryAfter(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]
        payload: Annotated[bytes, Payload()]

A record is a row of a lease table whose ``Group`` field holds the record's name: the service
writes it in its own transaction like any row (``tx.publish``, ``insert_statement``), and a
relay (``trinbox.outbox.relay``) is a lease subscription of the table that serves each record
to a sink outside the database. So the relay's claims, retries, leases and shutdown are the
lease form's; the class statement checks what a relay needs of the table, beyond the lease
form's own rules.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, ClassVar

from ..errors import DeclarationError
from ._inbox import Inbox, declared_roles, spec_of
from ._markers import Lease
from ._spec import TableSpec

__all__ = ["Outbox", "check_record"]


class Outbox(Inbox[Lease]):
    """Base of an outbox record table: a lease table whose rows are records a relay serves to
    a sink outside the database, at least once.

    Fields: an ``Id``, the record's name in a ``Group`` field (a ``str``: the name a relay
    serves), its message's bytes in a ``Payload`` field, and what the relay's claim needs, a
    ``LockedUntil`` field (the lease) and a ``RetryAfter`` field (a record whose sink failed
    waits out its backoff there). Optional: ``Attempt`` (the record's deliveries),
    ``ProcessedAt`` (a relayed record is marked instead of deleted), data columns.
    """

    __trinbox_base__: ClassVar[bool] = True

    if not TYPE_CHECKING:

        def __init_subclass__(cls, **keywords):
            where = f"class {cls.__qualname__}"
            if "spec" not in keywords and "locked_until" not in declared_roles(cls):
                # Said here, before the lease form's own rule would say it in its words.
                _refuse_missing(where, "locked_until")
            super().__init_subclass__(**keywords)
            check_record(where, spec_of(cls))


_NEEDS = {
    "group": (
        "an outbox record names the message it carries in a Group field (the name a relay serves)",
        "name: Annotated[str, Group()]",
    ),
    "payload": (
        "an outbox record carries its message's bytes in a Payload field",
        "payload: Annotated[bytes, Payload()]",
    ),
    "locked_until": (
        "a relay claims an outbox's records under a lease, which it writes into a LockedUntil "
        "field (trinbox's addition to the record table)",
        "locked_until: Annotated[datetime | None, LockedUntil()]",
    ),
    "retry_after": (
        "a record whose sink failed waits out its backoff in a RetryAfter field",
        "retry_after: Annotated[datetime, RetryAfter(generated=True)]",
    ),
}


def _refuse_missing(where: str, role: str) -> None:
    rule, example = _NEEDS[role]
    msg = f"{where}: {rule}, found none; add one, like {example}"
    raise DeclarationError(msg)


def check_record(where: str, spec: TableSpec) -> None:
    """What a relay needs of an outbox record table, beyond the lease form's own rules, or
    ``DeclarationError`` naming the rule, what was found and the fix."""
    for role in ("group", "payload", "locked_until", "retry_after"):
        if spec.role(role) is None:
            _refuse_missing(where, role)
    name = spec.group
    assert name is not None
    hint = name.python_type
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if hint is not str:
        found = hint.__qualname__ if isinstance(hint, type) else repr(hint).replace("typing.", "")
        msg = (
            f"{where}: an outbox record's name is a str (its Group field, the name a relay "
            f"serves), found {name.field!r} of type {found}; declare {name.field}: "
            f"Annotated[str, Group()]"
        )
        raise DeclarationError(msg)
    if spec.fifo:
        msg = (
            f"{where}: a relay serves an outbox's records side by side, whatever their name, "
            f"found Group(fifo=True) on {name.field!r}; drop fifo=True"
        )
        raise DeclarationError(msg)
