"""Retries and dead letters on SQLite, for the lease and advisory forms (REFERENCE.md §5.3,
§10.2 retries.rs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import trio

from trinbox import FailurePolicy, HandlerOutcome, Inbox, InboxQueue, OnFailure, keys, subscriber
from trinbox.testing import VirtualClock

from .harness import Db, make_app, serving
from .tables import EMAIL_FORMS, EMAIL_JOBS, PLAIN_FORMS, PLAIN_JOBS, attempts_after, ticking


@dataclass
class Email:
    to: str


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_at_the_cap_the_row_moves_to_the_dead_letter_group(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(3)
    assert attempts == [1, 2, 3]
    assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", attempts_after(row, 3), None)
    ]


@pytest.mark.parametrize("row", PLAIN_FORMS)
async def test_at_the_cap_the_row_moves_into_the_dead_letter_table(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(PLAIN_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def work(job: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, work).max_attempts(2).dead_letter("plain_jobs_dead")
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), tenant="t1")
        with trio.fail_after(10):
            await app.subscription(work).wait_finished(2)
    assert attempts == [1, 2]
    assert db.rows("SELECT * FROM plain_jobs") == []
    # Every column kept, the lease column empty.
    assert db.rows("SELECT id, attempt, tenant, locked_until, payload FROM plain_jobs_dead") == [
        (1, attempts_after(row, 2), "t1", None, b'{"to":"a@example.com"}')
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_max_attempts_one_moves_at_the_first_failure(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    assert attempts == [1]
    assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", attempts_after(row, 1), None)
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_delayed_retry_obeys_the_cap(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=1)
    called_at: list[float] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        called_at.append(trio.current_time())
        return HandlerOutcome.retry_after(timedelta(seconds=5))

    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with ticking(), serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(2)
        # The second failure moved the row: no third delivery comes when it would be due.
        await trio.sleep(7)
    assert len(called_at) == 2
    assert called_at[1] - called_at[0] >= 5
    assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", attempts_after(row, 2), None)
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_undecodable_row_counts_its_attempts_toward_the_cap(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    called: list[Email] = []

    queue = InboxQueue(row, "emails").on_failure(OnFailure(decode=FailurePolicy.RETRY))

    @subscriber(queue)
    async def send(email: Email) -> None:
        called.append(email)

    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(row, b"not json", name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(2)
    assert called == []
    assert db.rows("SELECT name, attempt, locked_until, payload FROM email_jobs") == [
        ("emails.dead", attempts_after(row, 2), None, b"not json")
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_handler_exception_counts_toward_the_cap_by_default(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        raise RuntimeError("smtp down")

    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(3)
    assert attempts == [1, 2, 3]
    assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", attempts_after(row, 3), None)
    ]
