"""Retries and dead letters in every form on every stand
(docs/reference.md#max-attempts-and-dead-letters, docs/reference.md#scenarios-retries): at the cap a
row moves to its dead letter group, or into its dead letter table (one statement on PostgreSQL, a
copy and a delete in one transaction on MariaDB and SQLite), and the two halves of the declaration
come together."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

import pytest
import trio

from trinbox import (
    Advisory,
    Backoff,
    FailurePolicy,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    OnFailure,
    Payload,
    keys,
    subscriber,
)
from trinbox.errors import DeclarationError
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells


@dataclass
class Email:
    to: str


async def test_at_the_cap_the_row_moves_to_the_dead_letter_group(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 3)
    assert attempts == [1, 2, 3]
    # The row lock form does not count the move itself: its column stays at 3.
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", case.attempts_after(3), None)
    ]


async def test_at_the_cap_the_row_moves_into_the_dead_letter_table(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.plain, "jobs"))
    async def work(job: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, work).max_attempts(2).dead_letter("plain_jobs_dead")
    async with serving(app):
        await broker.publish(case.plain, Email("a@example.com"), tenant="t1")
        with trio.fail_after(10):
            await settled(app, work, 2)
    assert attempts == [1, 2]
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
    # Every column kept, the lease column empty.
    moved = case.stand.rows(
        "SELECT id, attempt, tenant, locked_until, payload FROM plain_jobs_dead"
    )
    assert [(*row[:4], bytes(row[4])) for row in moved] == [
        (1, case.attempts_after(2), "t1", None, b'{"to":"a@example.com"}')
    ]


async def test_max_attempts_one_moves_at_the_first_failure(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert attempts == [1]
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", case.attempts_after(1), None)
    ]


async def test_delayed_retry_obeys_the_cap(case: Case, clock: VirtualClock) -> None:
    broker = case.stand.broker(poll_interval=1)
    called_at: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> HandlerOutcome:
        called_at.append(trio.current_time())
        return HandlerOutcome.retry_after(timedelta(seconds=5))

    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 2)
        # The second failure moved the row: no third delivery comes when it would be due.
        await trio.sleep(7)
    assert len(called_at) == 2
    assert called_at[1] - called_at[0] >= 5
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", case.attempts_after(2), None)
    ]


async def test_undecodable_row_counts_its_attempts_toward_the_cap(
    case: Case,
    clock: VirtualClock,  # the backoff between attempts passes in virtual time
) -> None:
    broker = case.stand.broker(poll_interval=3600)
    called: list[Email] = []

    queue = InboxQueue(case.email, "emails").on_failure(OnFailure(decode=FailurePolicy.RETRY))

    @subscriber(queue)
    async def send(email: Email) -> None:
        called.append(email)

    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, b"not json", name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 2)
    assert called == []
    found = case.stand.rows("SELECT name, attempt, locked_until, payload FROM email_jobs")
    assert [(*row[:3], bytes(row[3])) for row in found] == [
        ("emails.dead", case.attempts_after(2), None, b"not json")
    ]


async def test_handler_exception_counts_toward_the_cap_by_default(
    case: Case,
    clock: VirtualClock,  # the backoff between attempts passes in virtual time
) -> None:
    broker = case.stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        raise RuntimeError("smtp down")

    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 3)
    assert attempts == [1, 2, 3]
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails.dead", case.attempts_after(3), None)
    ]


# -- the declaration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cap", "dest", "rule"),
    [
        (
            3,
            None,
            "found max_attempts(3) without dead_letter; name where spent rows go with "
            ".dead_letter(..)",
        ),
        (
            None,
            "emails.dead",
            "found dead_letter('emails.dead') without max_attempts; name the cap, "
            "max_attempts(1) moves at the first failure",
        ),
    ],
    ids=["cap-alone", "destination-alone"],
)
async def test_half_a_retry_declaration_stops_serve_and_claims_nothing(
    case: Case, cap: int | None, dest: str | None, rule: str
) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        raise AssertionError("never delivered")

    # The row is there before serve: a subscription that opened would claim it.
    case.stand.execute(
        "INSERT INTO email_jobs (name, customer, retry_after, attempt, payload) "
        "VALUES ('emails', 'c1', '2000-01-01 00:00:00', 1, ?)",
        b"{}",
    )
    app = make_app()
    mount = app.include(broker, send)
    if cap is not None:
        mount.max_attempts(cap)
    if dest is not None:
        mount.dead_letter(dest)
    expected = (
        f"subscription 'emails' ({send!r}): max_attempts and dead_letter are declared "
        f"together, {rule}"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()
    assert case.stand.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
        ("emails", 1, None)
    ]


class Uncounted(Inbox[Advisory], table="plain_jobs", advisory_lock="plain_jobs-{id}"):
    """A row class that declares no Attempt field (the table has the column)."""

    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


async def test_the_cap_needs_an_attempt_field(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(Uncounted, "jobs"))
    async def work(job: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, work).max_attempts(3).dead_letter("plain_jobs_dead")
    expected = (
        f"subscription 'jobs' ({work!r}): max_attempts counts the table's Attempt field, "
        f"found none on plain_jobs (Uncounted); add one, like attempt: "
        f"Annotated[int, Attempt()]"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()


async def test_a_dead_letter_table_name_has_at_most_one_schema(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.plain, "jobs"))
    async def work(job: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, work).max_attempts(3).dead_letter("a.b.c")
    expected = (
        f"subscription 'jobs' ({work!r}): a dead letter table is named [schema.]table, found "
        f"'a.b.c'; give one table name, with at most one schema"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()


# -- a table without a RetryAfter field -----------------------------------------------------


def backoff_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cannot wait out" in r.getMessage()]


async def test_without_a_retry_after_field_a_failed_row_comes_back_at_once_with_a_warning(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The row cannot wait in the table: the worker does not wait out the backoff holding the
    # row either (the default waits 0.5 to 1 s after a first failure, up to five minutes).
    # Three failures, one warning.
    caplog.set_level(logging.WARNING, logger="trinbox")
    broker = case.stand.broker(poll_interval=3600)
    called_at: list[float] = []

    @subscriber(InboxQueue(case.plain, "jobs"))
    async def work(job: Email, attempt: keys.Attempt) -> None:
        called_at.append(trio.current_time())
        if attempt <= 3:
            raise RuntimeError("a failure")

    app = make_app()
    app.include(broker, work)
    async with serving(app):
        await broker.publish(case.plain, Email("a@example.com"), tenant="t1")
        with trio.fail_after(10):
            await settled(app, work, 4)
    assert len(called_at) == 4
    assert called_at[3] - called_at[0] < 0.5
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
    # Said once, at the first failure, with the fixes.
    assert backoff_warnings(caplog) == [
        f"plain_jobs ({case.plain.__name__}) has no RetryAfter field, so a failed delivery "
        f"cannot wait out its backoff there and is retried at once (said once); add a "
        f"RetryAfter field (retry_after: Annotated[datetime, RetryAfter()]) to back off, give "
        f"the mount max_attempts(n) so a failing row leaves, or set .backoff(Backoff.none()) "
        f"to say so [subscription=jobs table=plain_jobs]"
    ]


@cells(stands=["sqlite", "postgres"])
async def test_without_a_retry_after_field_a_backoff_set_is_refused_at_startup(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")

    @subscriber(InboxQueue(case.plain, "jobs").backoff(Backoff.linear(2.0)))
    async def work(job: Email) -> None:
        pass

    app = make_app()
    app.include(case.stand.broker(), work)
    with trio.fail_after(10), pytest.raises(DeclarationError) as refused:
        await app.serve()
    assert str(refused.value) == (
        f"subscription 'jobs' ({work!r}): a backoff holds a failed row back in its "
        f"RetryAfter field, found Backoff.linear (2.0 s a failure, at most 300.0 s) on "
        f"plain_jobs ({case.plain.__name__}), which has none; add a RetryAfter field "
        f"(retry_after: Annotated[datetime, RetryAfter()]), or pass Backoff.none() to retry "
        f"at once"
    )
    # Backoff.none() says so: served, and nothing to warn about.
    none = subscriber(InboxQueue(case.plain, "jobs").backoff(Backoff.none()))(work.handler)
    app = make_app()
    app.include(case.stand.broker(), none)
    async with serving(app):
        pass
    assert backoff_warnings(caplog) == []
