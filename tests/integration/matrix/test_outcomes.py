"""Outcomes in every form on every stand (docs/reference.md#outcome-mapping,
docs/reference.md#scenarios-outcomes): ack and drop finish the row, retry counts the attempt and
returns it at once, a delayed retry waits in the table until it is due, and payloads arrive byte for
byte."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

from trinbox import HandlerOutcome, InboxQueue, RawCodec, keys, subscriber
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, insert_emails

# Where TrioClock's "now" starts: the virtual clock's time zero.
START = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Email:
    to: str


def as_utc(value: object) -> datetime:
    """A time read back from any stand (SQLite text, PostgreSQL aware, MariaDB naive UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


async def test_acked_row_is_deleted(case: Case) -> None:
    broker = case.stand.broker()
    got: list[str] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert got == ["a@example.com"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_acked_row_is_marked_processed_and_not_claimed_again(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=0.25)
    got: list[str] = []

    @subscriber(InboxQueue(case.finished, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.finished, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 1)
        # Claims go on every 0.25 s; none of them may take the finished row.
        await trio.sleep(2)
        assert app.statistics(send).finished == 1
    assert got == ["a@example.com"]
    assert case.stand.rows(
        "SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs"
    ) == [(case.attempts_after(1), None, True)]


async def test_dropped_row_is_deleted(case: Case) -> None:
    broker = case.stand.broker()
    got: list[str] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.drop()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert got == ["a@example.com"]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_dropped_row_is_finished_and_never_returns(case: Case, clock: VirtualClock) -> None:
    broker = case.stand.broker(poll_interval=0.25)
    got: list[str] = []

    @subscriber(InboxQueue(case.finished, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        got.append(email.to)
        return HandlerOutcome.drop()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.finished, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 1)
        await trio.sleep(2)
        assert app.statistics(send).finished == 1
    assert got == ["a@example.com"]
    assert case.stand.rows(
        "SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs"
    ) == [(case.attempts_after(1), None, True)]


async def test_retry_counts_the_attempt_and_releases_at_once(case: Case) -> None:
    # A poll interval of an hour: the retried row comes back at once, not at the next poll.
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.finished, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry() if len(attempts) == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.finished, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 2)
    assert attempts == [1, 2]
    assert case.stand.rows(
        "SELECT attempt, locked_until, processed_at IS NOT NULL FROM email_jobs"
    ) == [(case.attempts_after(2), None, True)]


async def test_delayed_retry_comes_back_when_due(case: Case, clock: VirtualClock) -> None:
    broker = case.stand.broker(poll_interval=0.5)
    called_at: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        called_at.append(trio.current_time())
        if attempt == 1:
            return HandlerOutcome.retry_after(timedelta(seconds=10))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 1)
        # The row waits in the table, due ten seconds after its retry.
        ((attempt, locked_until, retry_after),) = case.stand.rows(
            "SELECT attempt, locked_until, retry_after FROM email_jobs"
        )
        assert (attempt, locked_until) == (2, None)
        assert as_utc(retry_after) >= START + timedelta(seconds=called_at[0] + 10)
        await trio.sleep_until(called_at[0] + 9)
        assert len(called_at) == 1
        with trio.fail_after(60):
            await settled(app, send, 2)
    assert len(called_at) == 2
    assert called_at[1] - called_at[0] >= 10
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_a_queue_that_never_runs_dry_forgets_the_due_times_its_claims_passed(
    case: Case, clock: VirtualClock
) -> None:
    # The claim loop keeps when each delayed retry comes due, to end its wait for rows then
    # (an hour's poll here). A queue that never runs dry never waits: each claim forgets the
    # due times it passed, or they pile up, one per retry (read from the loop itself).
    broker = case.stand.broker(poll_interval=HOUR)
    kept: list[int] = []
    called_at: dict[str, list[float]] = {}

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        kept.append(len(app._subscription(send)._claims._due))  # type: ignore[union-attr]
        called_at.setdefault(email.to, []).append(trio.current_time())
        if email.to == "late" and attempt == 1:
            return HandlerOutcome.retry_after(timedelta(seconds=10))
        if email.to != "late" and attempt < 5:
            return HandlerOutcome.retry_after(timedelta(0))
        return HandlerOutcome.ack()

    insert_emails(case.stand, [json.dumps({"to": f"{n}"}).encode() for n in range(20)])
    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(60):
            await settled(app, send, 100)
        assert max(kept) <= 2, kept
        # And a retry's due time still ends the wait for rows: ten seconds, not the hour.
        await broker.publish(case.email, Email("late"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 102)
    first, second = called_at["late"]
    assert 10 <= second - first < 11


async def test_delayed_retry_without_retry_after_column_comes_back_at_once(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.plain, "jobs"))
    async def work(job: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        if attempt == 1:
            return HandlerOutcome.retry_after(timedelta(hours=1))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        await broker.publish(case.plain, Email("a@example.com"), tenant="t1")
        with trio.fail_after(10):
            await settled(app, work, 2)
    assert attempts == [1, 2]
    assert case.stand.rows("SELECT * FROM plain_jobs") == []


@pytest.mark.parametrize("payload", [bytes(range(256)), b""], ids=["all-bytes", "empty"])
async def test_binary_payload_arrives_byte_for_byte(case: Case, payload: bytes) -> None:
    broker = case.stand.broker()
    got: list[bytes] = []
    stored: list[tuple[Any, ...]] = []

    @subscriber(InboxQueue(case.email, "blobs").codec(RawCodec()))
    async def take(data: bytes, pool: keys.Pool) -> None:
        got.append(data)
        # Bytes, not text and not NULL, as the table holds them.
        stored.extend(await pool.fetch("SELECT payload, length(payload) FROM email_jobs"))

    app = make_app()
    app.include(broker, take)
    async with serving(app):
        await broker.publish(case.email, payload, name="blobs", customer="c1")
        with trio.fail_after(10):
            await settled(app, take, 1)
    assert got == [payload]
    assert type(got[0]) is bytes
    assert [(bytes(data), size) for data, size in stored] == [(payload, len(payload))]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_publish_to_one_group_is_not_delivered_to_another(case: Case) -> None:
    broker = case.stand.broker()
    got: list[str] = []

    @subscriber(InboxQueue(case.email, "b"))
    async def send(email: Email) -> None:
        got.append(email.to)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.email, Email("to-a@example.com"), name="a", customer="c1")
        await broker.publish(case.email, Email("to-b@example.com"), name="b", customer="c2")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert got == ["to-b@example.com"]
    # The row of group a was never claimed: its attempt is uncounted and it holds no lease.
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [("a", 1, None)]
