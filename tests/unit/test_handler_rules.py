"""Every handler rule mypy refuses (tests/typing/check_handlers.py) holds at runtime too, for
untyped callers: the startup checks (no database needed) refuse the handler with a message
that names the rule, what was found and the fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, cast

import pytest

from trinbox import (
    Advisory,
    Attempt,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._engine import startup
from trinbox.errors import DeclarationError
from trinbox.typing import Subscriber


class Mail(Inbox[Lease], table="mail"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


class Ticket(Inbox[Advisory], table="tickets", advisory_lock="ticket-{id}"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]


def check(sub: object) -> None:
    """The startup checks that need no database, on a SQLite broker nothing connects to."""
    mounted = cast("Subscriber[Any, Any]", sub)
    where = f"subscription {mounted.queue.name!r} ({mounted!r})"
    startup.check(
        where, SqlBroker.sqlite("sqlite:///never.db"), mounted, max_attempts=None, dead_letter=None
    )


def refused(sub: object, message: str) -> None:
    with pytest.raises(DeclarationError, match=re.escape(message)):
        check(sub)


async def takes_mail(mail: Mail) -> None:
    pass


async def takes_mails(mails: list[Mail]) -> None:
    pass


async def takes_ticket(ticket: Ticket) -> None:
    pass


async def takes_bytes(raw: bytes) -> None:
    pass


def test_a_payload_handler_takes_the_message_not_the_row() -> None:
    refused(
        subscriber(InboxQueue(Mail, "mail"))(takes_mail),
        "mail (Mail) has a Payload field, so its handler takes the decoded payload, found the "
        "row class Mail; annotate the message with the payload's type",
    )
    refused(
        subscriber(InboxQueue(Mail, "mail").batch(5))(takes_mails),
        "found the row class Mail",
    )
    check(subscriber(InboxQueue(Mail, "mail"))(takes_bytes))


def test_a_row_mode_handler_takes_its_own_row() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t"))(takes_mail),
        "tickets (Ticket) has no Payload field, so its handler takes the row itself, found "
        "Mail; annotate the message as Ticket",
    )
    check(subscriber(InboxQueue(Ticket, "t"))(takes_ticket))


async def takes_tickets(tickets: list[Ticket]) -> None:
    pass


def test_a_list_of_rows_needs_a_batch() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t"))(takes_tickets),
        "a handler takes one row per call unless its queue batches them, found list[Ticket]; "
        "add .batch(n) to the queue or take one Ticket",
    )
    refused(subscriber(InboxQueue(Mail, "mail"))(takes_mails), "add .batch(n) to the queue")
    check(subscriber(InboxQueue(Ticket, "t").batch(5))(takes_tickets))


def test_a_batch_handler_takes_a_list() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t").batch(5))(takes_ticket),
        "a batch handler takes a list, found Ticket; annotate the first parameter as list[...]",
    )


async def batch_with_attempt(tickets: list[Ticket], attempt: keys.Attempt) -> None:
    pass


async def batch_with_tx(tickets: Sequence[Ticket], tx: keys.Tx) -> None:
    pass


async def batch_with_row_id(tickets: list[Ticket], pool: keys.Pool, row_id: keys.RowId) -> None:
    pass


def test_a_batch_handler_takes_no_per_row_key() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t").batch(5))(batch_with_attempt),
        "a batch handler takes no per-row key, found keys.Attempt; read it from the rows or "
        "drop .batch(..)",
    )
    # A batch has a row id per row: read it from the rows.
    refused(
        subscriber(InboxQueue(Ticket, "t").batch(5))(batch_with_row_id),
        "a batch handler takes no per-row key, found keys.RowId; read it from the rows or "
        "drop .batch(..)",
    )
    # keys.Tx on a batch is refused as a plain queue's Tx first: batches are never transactional.
    refused(subscriber(InboxQueue(Ticket, "t").batch(5))(batch_with_tx), "keys.Tx")


async def returns_outcomes(ticket: Ticket) -> list[HandlerOutcome]:
    return [HandlerOutcome.ack()]


async def returns_outcomes_in_batch(tickets: list[Ticket]) -> list[HandlerOutcome]:
    return [HandlerOutcome.ack() for _ in tickets]


def test_a_list_of_outcomes_needs_a_batch() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t"))(returns_outcomes),
        "a handler returns one outcome per delivery unless its queue batches, found -> "
        "list[HandlerOutcome]; return a HandlerOutcome (or None), or add .batch(n)",
    )
    check(subscriber(InboxQueue(Ticket, "t").batch(3))(returns_outcomes_in_batch))


async def optional_tx(ticket: Ticket, tx: keys.Tx | None = None) -> None:
    pass


async def twice(ticket: Ticket, attempt: keys.Attempt, again: keys.Attempt) -> None:
    pass


def test_context_keys_are_never_optional_and_taken_once() -> None:
    refused(
        subscriber(InboxQueue(Ticket, "t").transactional())(optional_tx),
        "a handler's further parameters are context keys (keys.Attempt, keys.RowId, "
        "keys.Headers, keys.Pool, keys.Tx, keys.CancelRequested, keys.Progress, keys.Out), "
        "found tx: ",
    )
    refused(
        subscriber(InboxQueue(Ticket, "t"))(twice),
        "a handler takes each context key once, found keys.Attempt twice; drop again",
    )


def test_batches_never_run_in_transactional_mode_where_the_queue_is_set() -> None:
    untyped: Any = InboxQueue(Ticket, "t")
    with pytest.raises(
        DeclarationError,
        match=re.escape(
            "batches never run in transactional mode, found .transactional().batch(5) on "
            "queue 't' of Ticket; drop one of them"
        ),
    ):
        untyped.transactional().batch(5)
    with pytest.raises(
        DeclarationError,
        match=re.escape(
            "batches never run in transactional mode, found .batch(5).transactional() on "
            "queue 't' of Ticket; drop one of them"
        ),
    ):
        untyped.batch(5).transactional()


def test_a_subscriber_is_made_by_decorating_its_handler() -> None:
    untyped: Any = Subscriber
    with pytest.raises(
        TypeError,
        match=r"^a Subscriber is made by decorating its handler, found Subscriber\(.*, "
        r"'takes_ticket'\); write @subscriber\(InboxQueue\(Row, name\)\) above the async def$",
    ):
        untyped(InboxQueue(Ticket, "t"), takes_ticket)
    made = subscriber(InboxQueue(Ticket, "t"))(takes_ticket)
    assert isinstance(made, Subscriber)
    assert made.handler is takes_ticket


class Renamed(Inbox[Lease], table="renamed"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    body: Annotated[bytes, Payload()]


async def takes_renamed(row: Renamed) -> None:
    pass


def test_a_payload_field_of_another_name_is_refused_at_startup() -> None:
    # mypy reads payload mode off a field named payload; startup reads the Payload() role.
    refused(
        subscriber(InboxQueue(Renamed, "r"))(takes_renamed),
        "renamed (Renamed) has a Payload field, so its handler takes the decoded payload, "
        "found the row class Renamed",
    )
