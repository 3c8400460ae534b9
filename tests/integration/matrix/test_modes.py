"""Payloads byte for byte, row mode, and delayed publishes on every stand and form
(docs/reference.md#payload-mode, docs/reference.md#row-mode, docs/reference.md#publish-api,
docs/reference.md#scenarios-modes).

Codecs decoding into dataclasses, msgspec, pydantic and TypedDicts, and the refusals of
publish, differ in no database: they are in tests/integration/sqlite/test_modes.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

import trio

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.testing import settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, as_utc
from .schema import MAIL, MAIL_JOBS, LeasedMail, LockedMail, RowLockedMail


@dataclass
class Email:
    to: str


async def test_bytes_handler_gets_the_payload_byte_for_byte(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    raw = bytes(range(256)) + b"\x00\xff not json \x80"
    got: list[bytes] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(payload: bytes) -> None:
        got.append(payload)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        await broker.publish(case.email, raw, name="emails", customer="c")
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert got == [raw]
    assert type(got[0]) is bytes
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_row_mode_hands_the_row_itself(case: Case) -> None:
    stand = case.stand
    stand.script(MAIL_JOBS[stand.name])
    broker = stand.broker(poll_interval=HOUR)
    row = MAIL[case.form]
    got: list[Any] = []

    @subscriber(InboxQueue(RowLockedMail, "mail"))
    async def row_locked(mail: RowLockedMail, attempt: keys.Attempt) -> HandlerOutcome:
        got.append(mail)
        return HandlerOutcome.ack()

    @subscriber(InboxQueue(LeasedMail, "mail"))
    async def leased(mail: LeasedMail, attempt: keys.Attempt) -> HandlerOutcome:
        got.append(mail)
        return HandlerOutcome.ack()

    @subscriber(InboxQueue(LockedMail, "mail"))
    async def locked(mail: LockedMail, attempt: keys.Attempt) -> HandlerOutcome:
        got.append(mail)
        return HandlerOutcome.ack()

    handlers: dict[str, Subscriber[Any, Any]] = {
        "row_lock": row_locked,
        "lease": leased,
        "advisory": locked,
    }
    handle = handlers[case.form]
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        published = broker.clock()
        await broker.publish(row, recipient="a@example.com", note=None)
        await broker.publish(row, recipient="b@example.com", note="hello")
        with trio.fail_after(10):
            await settled(app, handle, 2)
    assert stand.rows("SELECT * FROM mail_jobs") == []
    got.sort(key=lambda mail: mail.id)
    assert [type(mail) for mail in got] == [row, row]
    assert [(m.id, m.recipient, m.note, m.attempt) for m in got] == [
        (1, "a@example.com", None, 1),
        (2, "b@example.com", "hello", 1),
    ]
    for mail in got:
        # Every stand hands aware UTC times, whatever its column type.
        assert mail.retry_after.tzinfo is UTC
        assert published <= mail.retry_after <= published + timedelta(seconds=60)
        if isinstance(mail, LeasedMail) and case.name == "sqlite":
            # SQLite's claim returns the stamped row (its attempt uncounted): the lease, the
            # delivery's token, is in the column.
            assert mail.locked_until is not None
            assert mail.locked_until.tzinfo is UTC
            assert mail.locked_until > mail.retry_after
        elif isinstance(mail, LeasedMail):
            # The servers' claims return the row as it was before the stamp
            # (docs/reference.md#lease-form): a fresh row has no lease yet.
            assert mail.locked_until is None


async def test_publish_with_a_delay_makes_the_row_due_later(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        before = broker.clock()
        await broker.publish(
            case.email, Email("a@example.com"), name="emails", delay=timedelta(hours=2)
        )
        after = broker.clock()
    # Not due: nothing claimed it.
    [(retry_after, attempt, customer)] = case.stand.rows(
        "SELECT retry_after, attempt, customer FROM email_jobs"
    )
    assert (attempt, customer) == (1, None)
    due = as_utc(retry_after)
    assert before + timedelta(hours=2) <= due <= after + timedelta(hours=2)
