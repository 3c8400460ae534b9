"""The typed publishing forms (issue 11, item 3) write what ``broker.publish`` writes, on every
stand: a ``Publisher`` fills its queue's group and encodes its message, through the broker and
inside ``broker.transaction()``; ``publish_row`` writes a row instance's fields, leaves its
generated id to the database, and a ``delay`` replaces the row's RetryAfter value."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated

import pytest

from trinbox import (
    GENERATED,
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Message,
    Payload,
    Publisher,
    RetryAfter,
)
from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import DeclarationError

from .conftest import Case
from .kit import cells


@dataclass
class Note:
    text: str


class Outgoing(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)] = GENERATED
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


LONG_AGO = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


def row(customer: str) -> Outgoing:
    return Outgoing(
        name="rows",
        customer=customer,
        retry_after=LONG_AGO,
        attempt=1,
        locked_until=None,
        payload=b'{"text":"raw"}',
    )


@cells(forms=["lease"])
async def test_a_publisher_fills_its_group_and_encodes_its_message(case: Case) -> None:
    stand = case.stand
    notes = Publisher(InboxQueue(Outgoing, "notes"), Note)
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            await notes.publish(broker, Note("one"), customer="c1")
            async with broker.transaction() as tx:
                await notes.publish(tx, Note("two"), customer="c2", delay=timedelta(hours=1))
        finally:
            await broker.aclose()
    assert stand.rows("SELECT name, customer, payload FROM email_jobs ORDER BY job_id") == [
        ("notes", "c1", b'{"text":"one"}'),
        ("notes", "c2", b'{"text":"two"}'),
    ]


@cells(forms=["lease"])
async def test_a_publishers_batch_fills_its_group_through_the_broker_and_a_transaction(
    case: Case,
) -> None:
    stand = case.stand
    notes = Publisher(InboxQueue(Outgoing, "notes"), Note)
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            found = await notes.publish_many(
                broker, [Note("one"), Message(Note("two"), customer="c2")], customer="c1"
            )
            async with broker.transaction() as tx:
                await notes.publish_many(tx, [Note("three")], delay=timedelta(hours=1))
        finally:
            await broker.aclose()
    assert len(found) == 2
    assert stand.rows("SELECT name, customer, payload FROM email_jobs ORDER BY job_id") == [
        ("notes", "c1", b'{"text":"one"}'),
        ("notes", "c2", b'{"text":"two"}'),
        ("notes", None, b'{"text":"three"}'),
    ]


@cells(stands=["sqlite"], forms=["lease"])
async def test_a_publishers_batch_refuses_another_group_or_message_type(case: Case) -> None:
    notes = Publisher(InboxQueue(Outgoing, "notes"), Note)
    broker = case.stand.broker()
    await broker.open()
    try:
        with pytest.raises(DeclarationError, match=r"found name='other' for the queue 'notes'"):
            await notes.publish_many(broker, [Note("a"), Message(Note("b"), name="other")])
        with pytest.raises(DeclarationError, match=r"publishes Note messages .* found str"):
            # A Message is not typed by its message: checked at runtime only.
            await notes.publish_many(broker, [Note("a"), Message("b")])
    finally:
        await broker.aclose()
    assert case.stand.rows("SELECT job_id FROM email_jobs") == []  # nothing of either batch


@cells(forms=["lease"])
async def test_publish_row_writes_the_instance(case: Case) -> None:
    stand = case.stand
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            await broker.publish_row(row("c1"))
            await broker.publish_row(row("c2"), delay=timedelta(hours=1))
            async with broker.transaction() as tx:
                await tx.publish_row(row("c3"))
        finally:
            await broker.aclose()
    found = stand.rows("SELECT job_id, name, customer, retry_after, payload FROM email_jobs")
    found.sort(key=lambda r: r[0])
    ids = [r[0] for r in found]
    assert len(set(ids)) == 3 and all(isinstance(i, int) for i in ids)  # the database's ids
    assert [(r[1], r[2], r[4]) for r in found] == [
        ("rows", c, b'{"text":"raw"}') for c in ("c1", "c2", "c3")
    ]
    years = [str(r[3])[:4] for r in found]
    # The row's own RetryAfter value, except where a delay replaced it with now + 1 h.
    assert years[0] == years[2] == "2001"
    assert int(years[1]) >= 2026
