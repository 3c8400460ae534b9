"""The runtime half of what tests/typing/check_declarations.py and check_publish.py pin for mypy
(issue 11, items 3, 4 and 6): class keywords of the wrong type, a union as the form or isolation
level, generated fields left out of a row's constructor, and the ``Publisher`` refusals that need no
database."""

from __future__ import annotations

import copy
import pickle
import re
import types
import typing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest

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
    Lease,
    LockedUntil,
    Payload,
    Publisher,
    RetryAfter,
    RowLock,
    Serializable,
    SqlBroker,
)
from trinbox._declare._inbox import row_fields
from trinbox.errors import Closed, DeclarationError


def declare(base: Any, **keywords: Any) -> type:
    """A row class with an ``id`` field, declared as ``class Job(base, **keywords)``."""

    def body(namespace: dict[str, Any]) -> None:
        namespace["__annotations__"] = {"id": Annotated[int, Id()]}

    return types.new_class("Job", (base,), keywords, body)


def refused(message: str) -> pytest.RaisesExc[DeclarationError]:
    return pytest.raises(DeclarationError, match=f"^{re.escape(message)}$")


# -- class keywords of the wrong type --------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "value", "shown", "example"),
    [
        ("advisory_lock", 123, "int 123", "'job-{id}'"),
        ("table", 7, "int 7", "'jobs'"),
        ("schema", b"app", "bytes b'app'", "'jobs'"),
    ],
)
def test_a_class_keyword_of_the_wrong_type_is_refused(
    keyword: str, value: object, shown: str, example: str
) -> None:
    keywords: dict[str, Any] = {"table": "jobs", keyword: value}
    # Before: advisory_lock=123 raised a bare TypeError from the key template's parser.
    with refused(f"class Job: {keyword}= takes a string, found {shown}; write {keyword}={example}"):
        declare(Inbox[Advisory], **keywords)


# -- one claim form and one isolation level --------------------------------------------------------


@pytest.mark.parametrize("form", [Lease | Advisory, typing.Union[RowLock, Lease]])  # noqa: UP007
def test_a_union_form_is_refused(form: Any) -> None:
    names = " | ".join(f.__name__ for f in typing.get_args(form))
    with refused(
        f"class Job: a table has one claim form, found the union {names} as a type argument "
        f"of Inbox; name one, like Inbox[Lease] (declare a row class per claim form)"
    ):
        declare(Inbox[form], table="j")


def test_a_union_isolation_is_refused() -> None:
    isolation: Any = Default | Serializable
    with refused(
        "class Job: a table has one isolation level, found the union Default | Serializable as a "
        "type argument of Inbox; name one, like Inbox[Lease, Serializable] (declare a row class "
        "per isolation level)"
    ):
        declare(Inbox[Lease, isolation], table="j")


# -- generated fields are optional in the constructor ----------------------------------------


class Outbox(Inbox[Lease], table="outbox"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)] = GENERATED
    created: Annotated[datetime, Generated()] = datetime(2000, 1, 1, tzinfo=UTC)
    locked_until: Annotated[datetime | None, LockedUntil()]
    retry_after: Annotated[datetime, RetryAfter()]
    queue: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_generated_fields_may_be_left_out() -> None:
    # ``id`` has no default in the class statement: the class gives it GENERATED.
    row = Outbox(locked_until=None, retry_after=NOW, queue="q", payload=b"{}")  # type: ignore[call-arg]
    assert row.id is GENERATED
    assert row.attempt is GENERATED
    assert row.created == datetime(2000, 1, 1, tzinfo=UTC)  # a default of its own is kept
    assert repr(row).startswith("Outbox(id=trinbox.GENERATED, attempt=trinbox.GENERATED, ")
    filled = Outbox(id=3, attempt=2, locked_until=None, retry_after=NOW, queue="q", payload=b"")
    assert (filled.id, filled.attempt) == (3, 2)


def test_data_and_role_fields_stay_required() -> None:
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'queue'"):
        Outbox(locked_until=None, retry_after=NOW, payload=b"")  # type: ignore[call-arg]


def test_generated_is_one_value_through_copies_and_pickles() -> None:
    assert repr(GENERATED) == "trinbox.GENERATED"
    assert pickle.loads(pickle.dumps(GENERATED)) is GENERATED
    assert copy.deepcopy(GENERATED) is GENERATED


def test_row_fields_leave_generated_fields_to_the_database() -> None:
    row = Outbox(id=GENERATED, locked_until=None, retry_after=NOW, queue="q", payload=b"x")
    assert row_fields(row) == {
        "locked_until": None,
        "retry_after": NOW,
        "queue": "q",
        "payload": b"x",
    }
    assert "retry_after" not in row_fields(row, delay=True)


# -- Publisher refusals ------------------------------------------------------------------------


@dataclass
class Email:
    to: str


class Plain(Inbox[Advisory], table="plain", advisory_lock="plain-{id}"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    channel: str


def test_a_publisher_needs_a_payload_field() -> None:
    with refused(
        "a Publisher encodes its message into the table's Payload field, found plain (Plain) "
        "without one; publish its rows with broker.publish(Plain, field=...) or "
        "broker.publish_row(Plain(...))"
    ):
        Publisher(InboxQueue(Plain, "p"), Email)


async def test_a_publisher_writes_into_its_own_group_only() -> None:
    emails = Publisher(InboxQueue(Outbox, "emails"), Email)
    assert repr(emails) == "<Publisher of Email into 'emails' of Outbox>"
    broker = SqlBroker.sqlite("sqlite:///never-opened.db")
    with refused(
        "a Publisher writes into its queue's group, found queue='sms' for the queue 'emails'; "
        "leave queue= out, or publish with a Publisher of InboxQueue(Outbox, 'sms')"
    ):
        await emails.publish(broker, Email("a"), queue="sms")


async def test_a_publisher_refuses_another_message_type_at_runtime() -> None:
    emails = Publisher(InboxQueue(Outbox, "emails"), Email)
    broker = SqlBroker.sqlite("sqlite:///never-opened.db")
    message: Any = "hello"
    with refused(
        "a Publisher of Email publishes Email messages into 'emails' of Outbox, found str; "
        "publish an instance of Email, or make a Publisher of the queue's message type"
    ):
        await emails.publish(broker, message)


class Mail(typing.TypedDict):
    to: str


async def test_a_typed_dict_publisher_leaves_the_check_to_mypy() -> None:
    mails = Publisher(InboxQueue(Outbox, "mails"), Mail)
    broker = SqlBroker.sqlite("sqlite:///never-opened.db")
    # Past the message check, the broker refuses to publish before it is open.
    with pytest.raises(Closed, match="the broker is not open"):
        await mails.publish(broker, {"to": "a"})
