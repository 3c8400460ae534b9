"""Row class declarations as type checkers check them: the class keywords, one claim form and
one isolation level per row, the broker's type argument, and generated fields in the row's
constructor.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy's
code; ``warn_unused_ignores``: a line that stops failing breaks the build) and ``# pyright:
ignore[<rule>]`` (pyright's), which tests/unit/test_typing_behaviour.py checks under both. The
comment above a refused line shows the gist of the message. pytest never collects this file.
"""

from __future__ import annotations

import typing
from datetime import datetime
from typing import Annotated, Any, assert_type

from trinbox import (
    GENERATED,
    Advisory,
    Attempt,
    Default,
    Generated,
    Group,
    Id,
    Inbox,
    InboxQueue,
    InboxSpec,
    Lease,
    LockedUntil,
    Payload,
    RowLock,
    Serializable,
    SqlBroker,
    subscriber,
)
from trinbox.typing import Form, Isolation, MySql, Plain, Postgres, Sqlite, Subscriber

# -- class keywords ------------------------------------------------------------------------------


class Named(Inbox[Lease], table="named", schema="app"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id()]


class Manual(Inbox[Lease], spec=InboxSpec("manual", "id").lease("locked_until")):
    id: int
    locked_until: datetime | None


# A FIFO group: Group takes fifo= (a bool), by hand too.
class Ledger(Inbox[RowLock], table="ledger"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]


assert_type(Group(fifo=True).fifo, bool)
assert_type(InboxSpec("ledger", "id").group("account", fifo=True), InboxSpec[RowLock])
# Ordered by due time: delayed rows move behind the rows due before them.
assert_type(Group(fifo=True, delayed_rows_move_behind=True).delayed_rows_move_behind, bool)
assert_type(
    InboxSpec("ledger", "id").group("account", fifo=True, delayed_rows_move_behind=True),
    InboxSpec[RowLock],
)


def fifo_takes_a_bool() -> None:
    # Argument "fifo" to "Group" has incompatible type "str"; expected "bool"
    Group(fifo="yes")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# Unexpected keyword argument "tabel" for "__init_subclass__" of "Inbox"; did you mean "table"?
# (mypy notes where __init_subclass__ is defined)
class Misspelt(Inbox[Lease], tabel="x"):  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue, reportGeneralTypeIssues]
    id: Annotated[int, Id()]


# Argument "advisory_lock" to "__init_subclass__" of "Inbox" has incompatible type "int";
# expected "str | None"
class LockNumber(Inbox[Advisory], table="n", advisory_lock=123):  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportGeneralTypeIssues]
    id: Annotated[int, Id()]


# Argument "table" to "__init_subclass__" of "Inbox" has incompatible type "int"; expected
# "str | None"
class TableNumber(Inbox[Lease], table=7):  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportGeneralTypeIssues]
    id: Annotated[int, Id()]


# Argument "spec" to "__init_subclass__" of "Inbox" has incompatible type "str"; expected
# "InboxSpec[Any] | None"
class SpecText(Inbox[Lease], spec="jobs"):  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportGeneralTypeIssues]
    id: int


# -- one claim form and one isolation level per row ------------------------------------------------


class Strict(Inbox[Lease, Serializable], table="strict"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]


def rows_are_inboxes_of_their_form(strict: Strict, named: Named, keyed: Keyed) -> None:
    assert_type(strict, Strict)
    _inbox: Inbox[Lease, Serializable] = strict
    _default: Inbox[Lease, Default] = named
    _advisory: Inbox[Advisory] = keyed
    _anything: Inbox[Any, Any] = keyed


def joined_rows(named: Named, keyed: Keyed, strict: Strict) -> None:
    # A list of subscribers of two row classes is a list of subscribers (mypy joins their rows
    # into object, pyright keeps the union).
    subscribers = [on_named, on_keyed]
    _mounted: Subscriber[object, Plain, object, Any] = subscribers[0]


# A row names one form and one isolation level, never their bases.
def takes_a_form_base(row: Inbox[Form]) -> None:  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    pass


def takes_an_isolation_base(row: Inbox[Lease, Isolation]) -> None:  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    pass


@subscriber(InboxQueue(Named, "named"))
async def on_named(row: Named) -> None:
    pass


@subscriber(InboxQueue(Keyed, "keyed"))
async def on_keyed(row: Keyed) -> None:
    pass


# Invalid type argument value for "Inbox"
class EitherForm(Inbox[Lease | Advisory], table="either"):  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    id: Annotated[int, Id()]


# Invalid type argument value for "Inbox"
class EitherIsolation(Inbox[Lease, Default | Serializable], table="eo"):  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    id: Annotated[int, Id()]


# Invalid type argument value for "Inbox"
class OldUnion(Inbox[typing.Union[RowLock, Lease]], table="ou"):  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]  # noqa: UP007
    id: Annotated[int, Id()]


# Value of type variable "F" of "Inbox" cannot be "int"
class NotAForm(Inbox[int], table="nf"):  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    id: Annotated[int, Id()]


# Invalid type argument value for "Inbox"
def takes_a_union_row(row: Inbox[RowLock | Advisory]) -> None:  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    pass


# -- the broker's type argument is a dialect -----------------------------------------------------


def brokers(sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres], my: SqlBroker[MySql]) -> None:
    _any_broker: SqlBroker[Any] = sqlite
    assert_type(SqlBroker.sqlite("sqlite:///x.db"), SqlBroker[Sqlite])


# Type argument "int" of "SqlBroker" must be a subtype of "Serves[Any]"
def int_broker(broker: SqlBroker[int]) -> None:  # type: ignore[type-var]  # pyright: ignore[reportInvalidTypeArguments]
    pass


# -- generated fields are optional in the constructor ----------------------------------------


class Outbox(Inbox[Lease], table="outbox"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    attempt: Annotated[int, Attempt(generated=True)] = GENERATED
    created: Annotated[datetime, Generated()] = GENERATED
    locked_until: Annotated[datetime | None, LockedUntil()]
    queue: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


def build_rows(now: datetime) -> None:
    row = Outbox(locked_until=None, queue="emails", payload=b"{}")
    assert_type(row.id, int)
    filled = Outbox(id=1, attempt=2, created=now, locked_until=now, queue="q", payload=b"")
    assert_type(filled.created, datetime)


def unknown_field() -> None:
    # Unexpected keyword argument "queu" for "Outbox"; did you mean "queue"?
    Outbox(locked_until=None, queu="emails", payload=b"")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def mistyped_field() -> None:
    # Argument "queue" to "Outbox" has incompatible type "int"; expected "str"
    Outbox(locked_until=None, queue=1, payload=b"")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def generated_without_default() -> None:
    # Missing named argument "id" for "Named" (mypy reads no Annotated metadata: a generated
    # field is optional under mypy when it is declared ``= GENERATED``)
    Named(locked_until=None)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
