"""The lease form on every stand (docs/reference.md#lease-form, docs/reference.md#scenarios-lease):
the claim commits and counts, the lease is the delivery's token (whole seconds, so a MariaDB
DATETIME without fractions holds it exactly), the keeper extends it, a drop clears it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

from trinbox import (
    FailurePolicy,
    HandlerOutcome,
    InboxQueue,
    OnFailure,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import DeadLetter
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._holders._base import (
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
from trinbox.errors import HandlerFailed, LeaseLost
from trinbox.testing import TrioClock, VirtualClock, idle, settled

from ..serving import make_app, serving
from ..stands import STANDS, Stand
from .conftest import Case
from .kit import ClaimWatch, lease_form
from .schema import LeasedEmail, LeasedPlain

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DEAD = DeadLetter(group="emails.dead")

# The lease form on every stand.
LEASE_CELLS = pytest.mark.parametrize(
    "case",
    [(stand, "lease") for stand in STANDS],
    ids=[f"{stand}-lease" for stand in STANDS],
    indirect=True,
)


@dataclass
class Email:
    to: str


class ManualClock:
    """A broker clock the test moves by hand; it counts its reads."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now
        self.reads = 0

    def __call__(self) -> datetime:
        self.reads += 1
        return self.now


def as_utc(value: object) -> datetime:
    """A time read back from any stand (SQLite text, PostgreSQL aware, MariaDB naive UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def broker_on(stand: Stand, clock: ManualClock) -> SqlBroker[Any]:
    if stand.name == "sqlite":
        return SqlBroker.sqlite(stand.url, clock=clock)
    if stand.name == "postgres":
        return SqlBroker.postgres(stand.url, clock=clock)
    return SqlBroker.mysql(stand.url, clock=clock)


@asynccontextmanager
async def lease_forms(
    stand: Stand,
    clock: ManualClock,
    row: type = LeasedEmail,
    dead: DeadLetter = DEAD,
    group: str | None = "emails",
) -> AsyncIterator[tuple[SqlBroker[Any], FormContext]]:
    """An open broker on ``stand`` and the context a subscription to ``group`` of ``row``'s
    table gives its form (as ``Subscription.open`` builds it), spent rows going to ``dead``."""
    async with asyncio_loop(stand.name != "sqlite"):
        broker = broker_on(stand, clock)
        await broker.open()
        try:
            spec = spec_of(row)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=build_plan(broker.dialect, spec, dead),
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


# -- the lease's length and expiry (no database) -------------------------------------------


@pytest.mark.parametrize(
    ("given", "whole"),
    [(1.5, 2), (0, 1), (1, 1), (0.001, 1), (30, 30), (29.2, 30)],
)
def test_a_lease_is_whole_seconds_rounded_up(given: float, whole: int) -> None:
    assert whole_seconds(timedelta(seconds=given)) == timedelta(seconds=whole)


def test_the_broker_rounds_its_lease_up() -> None:
    assert SqlBroker.sqlite("sqlite:///unused.db", lease=1.5).lease == timedelta(seconds=2)
    assert SqlBroker.postgres("postgresql://x/y", lease=0.2).lease == timedelta(seconds=1)
    with pytest.raises(ValueError, match="a lease is positive, found 0:00:00"):
        SqlBroker.postgres("postgresql://x/y", lease=0)
    assert SqlBroker.mysql("mysql://x/y", lease=29.2).lease == timedelta(seconds=30)


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


@LEASE_CELLS
async def test_the_claim_commits_at_once_and_counts_the_attempt(case: Case) -> None:
    broker = case.stand.broker(poll_interval=3600, lease=30)
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
        ((attempt, locked_until),) = case.stand.rows("SELECT attempt, locked_until FROM email_jobs")
        assert attempt == 2
        token = as_utc(locked_until)
        assert published_at + timedelta(seconds=30) <= token
        assert token <= claimed_by + timedelta(seconds=31)
        assert token.microsecond == 0
        # Stop claiming first, so the retried row stays in the table to be looked at.
        app.shutdown()
        finish.set()
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert attempts == [1]
    # The retry released the row without counting again.
    assert case.stand.rows("SELECT attempt, locked_until FROM email_jobs") == [(2, None)]


@LEASE_CELLS
async def test_a_lease_claim_reads_the_clock_once(case: Case) -> None:
    clock = ManualClock()
    async with lease_forms(case.stand, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        form = lease_form(ctx)
        before = clock.reads
        (delivery,) = await form.claim(1)
        # The due check, the lease-ended check and the expiry start from one instant.
        assert clock.reads - before == 1
        await form.settle(delivery, Ack())
        assert clock.reads - before == 2
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@LEASE_CELLS
async def test_a_lease_token_survives_a_column_without_fractions(case: Case) -> None:
    # "Now" has fractions; the expiry written (and held by the delivery) does not, so MariaDB's
    # DATETIME keeps the token exactly and the ack by token finds the row.
    clock = ManualClock(T0 + timedelta(seconds=0.5))
    async with lease_forms(case.stand, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        form = lease_form(ctx)
        (delivery,) = await form.claim(1)
        assert delivery.token == T0 + timedelta(seconds=31)
        assert as_utc(case.stand.value("SELECT locked_until FROM email_jobs")) == delivery.token
        await form.settle(delivery, Ack())
    assert case.stand.rows("SELECT * FROM email_jobs") == []


# -- the lease as the delivery's token ---------------------------------------------------------


@LEASE_CELLS
@pytest.mark.parametrize(
    "step",
    [Ack(), Drop(), Retry(), RetryAt(T0 + timedelta(hours=1)), DeadLetterStep(DEAD)],
    ids=["ack", "drop", "retry", "retry_after", "dead_letter"],
)
async def test_a_late_holder_cannot_settle_after_its_lease_ran_out(case: Case, step: Step) -> None:
    clock = ManualClock()
    async with lease_forms(case.stand, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        stalled = lease_form(ctx)
        (late,) = await stalled.claim(1)
        assert (late.attempt, late.token) == (1, T0 + timedelta(seconds=30))
        # The stalled holder's lease runs out and another claim takes the row.
        clock.now = T0 + timedelta(seconds=31)
        current = lease_form(ctx)
        (held,) = await current.claim(1)
        assert (held.id, held.attempt, held.token) == (late.id, 2, T0 + timedelta(seconds=61))
        before = case.stand.rows("SELECT * FROM email_jobs")
        with pytest.raises(LeaseLost, match=lost(1)) as caught:
            await stalled.settle(late, step)
        assert caught.value.id == 1
        # Nothing changed: the new holder's lease, attempt and group stand.
        assert case.stand.rows("SELECT * FROM email_jobs") == before
        ((name, attempt, locked_until),) = case.stand.rows(
            "SELECT name, attempt, locked_until FROM email_jobs"
        )
        assert (name, attempt, as_utc(locked_until)) == ("emails", 3, T0 + timedelta(seconds=61))
        assert case.stand.rows("SELECT * FROM email_jobs_dead") == []
        await current.settle(held, Ack())
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@LEASE_CELLS
async def test_a_late_holder_moves_nothing_into_the_dead_letter_table(case: Case) -> None:
    clock = ManualClock()
    dead = DeadLetter(table="plain_jobs_dead")
    async with lease_forms(case.stand, clock, LeasedPlain, dead, None) as (broker, ctx):
        await broker.publish(LeasedPlain, Email("a@example.com"), tenant="t1")
        stalled = lease_form(ctx)
        (late,) = await stalled.claim(1)
        clock.now = T0 + timedelta(seconds=31)
        current = lease_form(ctx)
        (held,) = await current.claim(1)
        with pytest.raises(LeaseLost, match=lost(1, "plain_jobs (LeasedPlain)")):
            await stalled.settle(late, DeadLetterStep(dead))
        # The copy found no row under the stale token: the move was undone, nothing copied.
        assert case.stand.rows("SELECT * FROM plain_jobs_dead") == []
        ((row_id, attempt, locked_until),) = case.stand.rows(
            "SELECT id, attempt, locked_until FROM plain_jobs"
        )
        assert (row_id, attempt, as_utc(locked_until)) == (1, 3, T0 + timedelta(seconds=61))
        await current.settle(held, DeadLetterStep(dead))
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
    assert case.stand.rows("SELECT id, attempt, tenant, locked_until FROM plain_jobs_dead") == [
        (1, 3, "t1", None)
    ]


@LEASE_CELLS
async def test_a_keeper_round_that_finds_the_lease_gone_fails_the_settlement(case: Case) -> None:
    clock = ManualClock()
    async with lease_forms(case.stand, clock) as (broker, ctx):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        stalled = lease_form(ctx)
        (late,) = await stalled.claim(1)
        clock.now = T0 + timedelta(seconds=31)
        current = lease_form(ctx)
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
        assert as_utc(case.stand.value("SELECT locked_until FROM email_jobs")) == held.token
        await current.settle(held, Ack())
    assert case.stand.rows("SELECT * FROM email_jobs") == []


# -- the keeper ---------------------------------------------------------------------------------


@LEASE_CELLS
async def test_the_keeper_extends_the_lease_of_a_long_handler(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=0.5, lease=1)
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
    async with serving(app):
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, send, 1)
        assert app.statistics(send).settle_errors == ()
    assert calls == [1]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


# -- drops ------------------------------------------------------------------------------------


@LEASE_CELLS
async def test_a_dropped_unsettled_delivery_returns_its_row_at_once(case: Case) -> None:
    # A ten-minute lease: the row is back long before it would end.
    broker = case.stand.broker(lease=600)
    attempts: list[int] = []
    queue = InboxQueue(LeasedEmail, "emails").on_failure(OnFailure(handler=FailurePolicy.FAIL_FAST))

    @subscriber(queue)
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        assert case.stand.value("SELECT locked_until FROM email_jobs") is not None
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")

    failed = r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$"
    with trio.fail_after(10), pytest.raises(HandlerFailed, match=failed) as caught:
        await app.serve()
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert attempts == [1]
    assert case.stand.rows("SELECT attempt, locked_until FROM email_jobs") == [(2, None)]


# -- the settling worker's next claim ------------------------------------------------------------


@LEASE_CELLS
async def test_a_settling_worker_claims_its_next_row_in_the_same_round_trip(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = case.stand.broker(poll_interval=3600)
    watch = ClaimWatch(monkeypatch)
    handled: list[tuple[str, int]] = []

    @subscriber(InboxQueue(LeasedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        handled.append((email.to, attempt))

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n in range(5):
            await broker.publish(LeasedEmail, Email(f"{n}@x"), name="emails", customer="c1")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 5)
            await idle(app, send)
    assert handled == [(f"{n}@x", 1) for n in range(5)]
    assert case.stand.rows("SELECT * FROM email_jobs") == []
    if case.name != "mariadb":
        # The claim loop claimed the first row; each ack claimed the next with it, until one
        # found the queue empty.
        assert watch.count == 1
    else:
        # MySQL claims with several statements in a transaction, one claim at a time, from
        # the claim loop only: five rows, then the claim that found none.
        assert watch.count == 6


@LEASE_CELLS
async def test_a_lost_lease_fails_its_settlement_and_the_next_row_still_comes(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    handled: list[str] = []

    @subscriber(InboxQueue(LeasedEmail, "emails"))
    async def send(email: Email) -> None:
        handled.append(email.to)
        if email.to == "0@x":
            # Row 1's lease is gone: another claim took the row, for a long time.
            stand.execute(
                "UPDATE email_jobs SET locked_until = '2999-01-01 00:00:00' WHERE job_id = 1"
            )

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n in range(2):
            await broker.publish(LeasedEmail, Email(f"{n}@x"), name="emails", customer="c1")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 2)
        errors = list(app.statistics(send).settle_errors)
    assert handled == ["0@x", "1@x"]
    assert [(type(e), getattr(e, "id", None)) for e in errors] == [(LeaseLost, 1)]
    # Row 1's ack changed nothing; row 2 was acked.
    assert stand.rows("SELECT job_id FROM email_jobs") == [(1,)]
