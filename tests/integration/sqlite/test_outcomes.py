"""Outcomes on SQLite, for the lease and advisory forms (REFERENCE.md §10.2 outcomes.rs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

from trinbox import HandlerOutcome, Inbox, InboxQueue, RawCodec, keys, subscriber
from trinbox.testing import VirtualClock

from .harness import Db, make_app, serving
from .tables import (
    EMAIL_FORMS,
    EMAIL_JOBS,
    FINISHED_FORMS,
    PLAIN_FORMS,
    PLAIN_JOBS,
    attempts_after,
    ticking,
)

# Where TrioClock's "now" starts: the mock clock's time zero.
START = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Email:
    to: str


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_acked_row_is_deleted(db: Db, row: type[Inbox[Any, Any]]) -> None:
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
async def test_retry_counts_the_attempt_and_releases_at_once(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
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


@pytest.mark.parametrize("row", FINISHED_FORMS)
async def test_acked_row_is_marked_processed_and_not_claimed_again(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.25)
    got: list[str] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with ticking(), serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(1)
        # Claims go on every 0.25 s; none of them may take the finished row.
        await trio.sleep(2)
        assert app.subscription(send).finished == 1
    assert got == ["a@example.com"]
    assert db.rows("SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs") == [
        (2, None, 1)
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_dropped_row_is_deleted(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    got: list[str] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.drop()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    assert got == ["a@example.com"]
    assert db.rows("SELECT * FROM email_jobs") == []


@pytest.mark.parametrize("row", FINISHED_FORMS)
async def test_dropped_row_is_finished_and_never_returns(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.25)
    got: list[str] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.drop()

    app = make_app()
    app.include(broker, send)
    async with ticking(), serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(1)
        await trio.sleep(2)
        assert app.subscription(send).finished == 1
    assert got == ["a@example.com"]
    assert db.rows("SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs") == [
        (2, None, 1)
    ]


@pytest.mark.parametrize("row", FINISHED_FORMS)
async def test_retry_counts_the_attempt_in_the_column(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(EMAIL_JOBS)
    # A poll interval of an hour: the retried row comes back at once, not at the next poll.
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
    assert db.rows("SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs") == [
        (attempts_after(row, 2), None, 1)
    ]


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_delayed_retry_comes_back_when_due(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.5)
    called_at: list[float] = []

    @subscriber(InboxQueue(row, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        called_at.append(trio.current_time())
        if attempt == 1:
            return HandlerOutcome.retry_after(timedelta(seconds=10))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with ticking(), serving(app):
        await broker.publish(row, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(1)
        # The row waits in the table, due ten seconds after its retry.
        (attempt, locked_until, retry_after) = db.rows(
            "SELECT attempt, locked_until, retry_after FROM email_jobs"
        )[0]
        assert (attempt, locked_until) == (2, None)
        due = datetime.fromisoformat(str(retry_after)).replace(tzinfo=UTC)
        assert due >= START + timedelta(seconds=called_at[0] + 10)
        await trio.sleep_until(called_at[0] + 9)
        assert len(called_at) == 1
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(2)
    assert len(called_at) == 2
    assert called_at[1] - called_at[0] >= 10
    assert db.rows("SELECT * FROM email_jobs") == []


@pytest.mark.parametrize("row", PLAIN_FORMS)
async def test_delayed_retry_without_retry_after_column_comes_back_at_once(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(PLAIN_JOBS)
    broker = db.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def work(job: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        if attempt == 1:
            return HandlerOutcome.retry_after(timedelta(hours=1))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        await broker.publish(row, Email("a@example.com"), tenant="t1")
        with trio.fail_after(10):
            await app.subscription(work).wait_finished(2)
    assert attempts == [1, 2]
    assert db.rows("SELECT * FROM plain_jobs") == []


@pytest.mark.parametrize("payload", [bytes(range(256)), b""], ids=["all-bytes", "empty"])
@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_binary_payload_arrives_byte_for_byte(
    db: Db, row: type[Inbox[Any, Any]], payload: bytes
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    got: list[bytes] = []
    stored: list[tuple[object, ...]] = []

    @subscriber(InboxQueue(row, "blobs").codec(RawCodec()))
    async def take(data: bytes, pool: keys.Pool) -> None:
        got.append(data)
        stored.extend(await pool.fetch("SELECT payload, typeof(payload) FROM email_jobs"))

    app = make_app()
    app.include(broker, take)
    async with serving(app):
        await broker.publish(row, payload, name="blobs", customer="c1")
        with trio.fail_after(10):
            await app.subscription(take).wait_finished(1)
    assert got == [payload]
    assert type(got[0]) is bytes
    assert stored == [(payload, "blob")]
    assert db.rows("SELECT * FROM email_jobs") == []


@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_publish_to_one_group_is_not_delivered_to_another(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    got: list[str] = []

    @subscriber(InboxQueue(row, "b"))
    async def send(email: Email) -> None:
        got.append(email.to)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(row, Email("to-a@example.com"), name="a", customer="c1")
        await broker.publish(row, Email("to-b@example.com"), name="b", customer="c2")
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    assert got == ["to-b@example.com"]
    # The row of group a was never claimed: its attempt is uncounted and it holds no lease.
    assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [("a", 1, None)]
