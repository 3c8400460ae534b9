"""The lease form on SQLite (REFERENCE.md §3.3, §10.2 forms/lease.rs): the claim commits and
counts, the lease is the delivery's token, the keeper extends it, a drop clears it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import trio

from trinbox import (
    FailurePolicy,
    HandlerFailed,
    HandlerOutcome,
    InboxQueue,
    LeaseLost,
    OnFailure,
    SqlBroker,
    Sqlite,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import DeadLetter
from trinbox._forms._base import (
    Ack,
    DeadLetterStep,
    Drop,
    FormContext,
    Retry,
    RetryAt,
    Step,
    lease_expiry,
    whole_seconds,
)
from trinbox._forms.lease import LeaseForm
from trinbox.testing import TrioClock, VirtualClock

from .harness import Db, make_app, serving
from .tables import EMAIL_JOBS, PLAIN_JOBS, LeasedEmail, LeasedPlain, ticking

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DEAD = DeadLetter(group="emails.dead")


@dataclass
class Email:
    to: str


class ManualClock:
    """A broker clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def stored(at: datetime) -> str:
    """A time as the SQLite driver stores it."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@asynccontextmanager
async def lease_forms(
    db: Db,
    clock: ManualClock,
    row: type = LeasedEmail,
    dead: DeadLetter = DEAD,
    group: str | None = "emails",
) -> AsyncIterator[tuple[SqlBroker[Sqlite], FormContext]]:
    """An open broker on ``db`` and the context a subscription to ``group`` of ``row``'s table
    gives its form (as ``Subscription.open`` builds it), spent rows going to ``dead``."""
    broker = SqlBroker.sqlite(db.url, clock=clock)
    await broker.open()
    try:
        spec = spec_of(row)
        ctx = FormContext(
            spec=spec,
            dialect=broker.dialect,
            statements=broker.dialect.statements(spec, dead),
            pool=broker.pool,
            clock=broker.clock,
            group=group,
            lease=whole_seconds(broker.lease),
        )
        yield broker, ctx
    finally:
        await broker.aclose()


def lost(row_id: int, label: str = "email_jobs (LeasedEmail)") -> str:
    return (
        "^"
        + re.escape(
            f"{label}: a settlement holds only while its lease does, found the "
            f"lease of row {row_id} ran out and another claim took it; the settlement had no "
            f"effect (keep handlers within the lease, or lengthen it)"
        )
        + "$"
    )


# -- the lease's length and expiry -----------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "whole"),
    [(1.5, 2), (0, 1), (1, 1), (0.001, 1), (30, 30), (29.2, 30)],
)
def test_a_lease_is_whole_seconds_rounded_up(given: float, whole: int) -> None:
    assert whole_seconds(timedelta(seconds=given)) == timedelta(seconds=whole)


def test_the_broker_rounds_its_lease_up() -> None:
    broker = SqlBroker.sqlite("sqlite:///unused.db", lease=1.5)
    assert broker.lease == timedelta(seconds=2)
    assert SqlBroker.sqlite("sqlite:///unused.db", lease=0).lease == timedelta(seconds=1)


@pytest.mark.parametrize(
    ("now", "expiry"),
    [
        (T0, T0 + timedelta(seconds=2)),
        (T0 + timedelta(microseconds=1), T0 + timedelta(seconds=3)),
        (T0 + timedelta(seconds=0.5), T0 + timedelta(seconds=3)),
        (T0 + timedelta(seconds=0.999999), T0 + timedelta(seconds=3)),
    ],
)
def test_the_lease_expiry_is_rounded_up_to_the_next_whole_second(
    now: datetime, expiry: datetime
) -> None:
    assert lease_expiry(now, timedelta(seconds=2)) == expiry


# -- the claim ------------------------------------------------------------------------------


async def test_the_claim_commits_at_once_and_counts_the_attempt(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=3600, lease=30)
    attempts: list[int] = []
    in_work = trio.Event()
    finish = trio.Event()

    @subscriber(InboxQueue(LeasedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        in_work.set()
        await finish.wait()
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        published_at = TrioClock()()
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(10):
            await in_work.wait()
        # Another connection sees the claim's writes while the handler runs: no transaction
        # is open, the attempt is counted and the lease is set (30 s, rounded up).
        claimed_by = TrioClock()()
        ((attempt, locked_until),) = db.rows("SELECT attempt, locked_until FROM email_jobs")
        assert attempt == 2
        assert isinstance(locked_until, str)
        assert stored(published_at + timedelta(seconds=30)) <= locked_until
        assert locked_until <= stored(claimed_by + timedelta(seconds=31))
        assert locked_until.endswith(".000000")
        # Stop claiming first, so the retried row stays in the table to be looked at.
        app.shutdown()
        finish.set()
        with trio.fail_after(10):
            await app.subscription(send).wait_finished(1)
    assert attempts == [1]
    # The retry released the row without counting again.
    assert db.rows("SELECT attempt, locked_until FROM email_jobs") == [(2, None)]


# -- the lease as the delivery's token ---------------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [Ack(), Drop(), Retry(), RetryAt(T0 + timedelta(hours=1)), DeadLetterStep(DEAD)],
    ids=["ack", "drop", "retry", "retry_after", "dead_letter"],
)
async def test_a_late_holder_cannot_settle_after_its_lease_ran_out(db: Db, step: Step) -> None:
    db.script(EMAIL_JOBS)
    clock = ManualClock()
    async with lease_forms(db, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        stalled = LeaseForm(ctx)
        (late,) = await stalled.claim(1)
        assert (late.attempt, late.token) == (1, T0 + timedelta(seconds=30))
        # The stalled holder's lease runs out and another claim takes the row.
        clock.now = T0 + timedelta(seconds=31)
        current = LeaseForm(ctx)
        (held,) = await current.claim(1)
        assert (held.id, held.attempt, held.token) == (late.id, 2, T0 + timedelta(seconds=61))
        before = db.rows("SELECT * FROM email_jobs")
        with pytest.raises(LeaseLost, match=lost(1)) as caught:
            await stalled.settle(late, step)
        assert caught.value.id == 1
        # Nothing changed: the new holder's lease, attempt and group stand.
        assert db.rows("SELECT * FROM email_jobs") == before
        assert db.rows("SELECT name, attempt, locked_until FROM email_jobs") == [
            ("emails", 3, stored(T0 + timedelta(seconds=61)))
        ]
        assert db.rows("SELECT * FROM email_jobs_dead") == []
        await current.settle(held, Ack())
    assert db.rows("SELECT * FROM email_jobs") == []


async def test_a_late_holder_moves_nothing_into_the_dead_letter_table(db: Db) -> None:
    db.script(PLAIN_JOBS)
    clock = ManualClock()
    dead = DeadLetter(table="plain_jobs_dead")
    async with lease_forms(db, clock, LeasedPlain, dead, None) as (broker, ctx):
        await broker.publish(LeasedPlain, Email("a@example.com"), tenant="t1")
        stalled = LeaseForm(ctx)
        (late,) = await stalled.claim(1)
        clock.now = T0 + timedelta(seconds=31)
        current = LeaseForm(ctx)
        (held,) = await current.claim(1)
        with pytest.raises(LeaseLost, match=lost(1, "plain_jobs (LeasedPlain)")):
            await stalled.settle(late, DeadLetterStep(dead))
        # The copy found no row under the stale token: the move was undone, nothing copied.
        assert db.rows("SELECT * FROM plain_jobs_dead") == []
        assert db.rows("SELECT id, attempt, locked_until FROM plain_jobs") == [
            (1, 3, stored(T0 + timedelta(seconds=61)))
        ]
        await current.settle(held, DeadLetterStep(dead))
    assert db.rows("SELECT * FROM plain_jobs") == []
    assert db.rows("SELECT id, attempt, tenant, locked_until FROM plain_jobs_dead") == [
        (1, 3, "t1", None)
    ]


async def test_a_keeper_round_that_finds_the_lease_gone_fails_the_settlement(db: Db) -> None:
    db.script(EMAIL_JOBS)
    clock = ManualClock()
    async with lease_forms(db, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        stalled = LeaseForm(ctx)
        (late,) = await stalled.claim(1)
        clock.now = T0 + timedelta(seconds=31)
        current = LeaseForm(ctx)
        (held,) = await current.claim(1)
        await stalled.extend_all()
        assert late.lease_lost
        assert late.token == T0 + timedelta(seconds=30)
        with pytest.raises(LeaseLost, match=lost(1)):
            await stalled.settle(late, Ack())
        assert stalled.in_work == 0
        # The current holder's round moves its own lease forward.
        clock.now = T0 + timedelta(seconds=40)
        await current.extend_all()
        assert held.token == T0 + timedelta(seconds=70)
        assert db.value("SELECT locked_until FROM email_jobs") == stored(held.token)
        await current.settle(held, Ack())
    assert db.rows("SELECT * FROM email_jobs") == []


# -- the keeper ---------------------------------------------------------------------------------


async def test_the_keeper_extends_the_lease_of_a_long_handler(db: Db, clock: VirtualClock) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.5, lease=1)
    calls: list[int] = []

    # A second worker is free and claims every 0.5 s: it would take the row once its lease
    # of one second ran out.
    @subscriber(InboxQueue(LeasedEmail, "emails").workers(2))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        calls.append(attempt)
        await trio.sleep(2.5)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with ticking(), serving(app):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await app.subscription(send).wait_finished(1)
        assert app.subscription(send).settle_errors == []
    assert calls == [1]
    assert db.rows("SELECT * FROM email_jobs") == []


# -- drops ------------------------------------------------------------------------------------


async def test_a_dropped_unsettled_delivery_returns_its_row_at_once(db: Db) -> None:
    db.script(EMAIL_JOBS)
    publisher = db.broker()
    await publisher.open()
    try:
        await publisher.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
    finally:
        await publisher.aclose()
    # A ten-minute lease: the row is back long before it would end.
    broker = db.broker(lease=600)
    attempts: list[int] = []

    queue = InboxQueue(LeasedEmail, "emails").on_failure(OnFailure(handler=FailurePolicy.FAIL_FAST))

    @subscriber(queue)
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        assert db.value("SELECT locked_until FROM email_jobs") is not None
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, send)
    failed = r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$"
    with trio.fail_after(10), pytest.raises(HandlerFailed, match=failed) as caught:
        await app.serve()
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert attempts == [1]
    assert db.rows("SELECT attempt, locked_until FROM email_jobs") == [(2, None)]
