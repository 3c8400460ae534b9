"""Outcomes on SQLite, for the lease and advisory forms (REFERENCE.md §10.2 outcomes.rs)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import trio

from trinbox import HandlerOutcome, Inbox, InboxQueue, keys, subscriber

from .harness import Db, make_app, serving
from .tables import EMAIL_FORMS, EMAIL_JOBS, attempts_after


@dataclass
class Email:
    to: str


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_acked_row_is_deleted(db: Db, row: type[Inbox]) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    got: list[str] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    assert got == ["a@example.com"]
    assert db.rows("SELECT * FROM email_jobs") == []


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_retry_counts_the_attempt_and_releases_at_once(db: Db, row: type[Inbox]) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry() if len(attempts) == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(2)
    assert attempts == [1, 2]
    assert db.rows("SELECT * FROM email_jobs") == []
    assert attempts_after(row, 2) == 3
