"""Statistics, the event hook and the log lines, over real deliveries on every stand and form
(issue 10, items 3, 4 and 6): ``App.statistics()`` counts every outcome, the hook sees every
publish, claim, handler run and settlement, a hook that raises is logged once and changes
nothing, no hook means no event work at all, and each failure is one line with its fields and
one traceback."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import trio

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox._broker import broker as broker_module
from trinbox._engine import claim_loop, deliveries
from trinbox._forms.lease import LeaseForm
from trinbox._holders._base import Delivery, Step
from trinbox.events import (
    ClaimEvent,
    Events,
    HandleEnd,
    HandleEvent,
    LeaseEvent,
    PublishEvent,
    ReleaseEvent,
    SettleEvent,
)
from trinbox.testing import VirtualClock, settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, cells, stored


@dataclass
class Email:
    to: str


class Recorder(Events):
    """Every event, in order."""

    def __init__(self) -> None:
        self.published_events: list[PublishEvent] = []
        self.claims: list[ClaimEvent] = []
        self.started: list[tuple[HandleEvent, object]] = []
        self.ended: list[tuple[HandleEvent, object, HandleEnd]] = []
        self.settles: list[SettleEvent] = []
        self.releases: list[ReleaseEvent] = []

    def published(self, event: PublishEvent) -> None:
        self.published_events.append(event)

    def claimed(self, event: ClaimEvent) -> None:
        self.claims.append(event)

    def handle_started(self, event: HandleEvent) -> object:
        state = object()
        self.started.append((event, state))
        return state

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        self.ended.append((event, state, end))

    def settled(self, event: SettleEvent) -> None:
        self.settles.append(event)

    def released(self, event: ReleaseEvent) -> None:
        self.releases.append(event)


def outcome_handler(case: Case) -> Subscriber[Any, Any]:
    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        if email.to == "drop":
            return HandlerOutcome.drop()
        if email.to == "later" and attempt == 1:
            return HandlerOutcome.retry_after(timedelta(seconds=5))
        if email.to == "raise" and attempt == 1:
            raise RuntimeError("broken on the first attempt")
        if email.to == "dead":
            return HandlerOutcome.retry()
        return HandlerOutcome.ack()

    return send


async def test_statistics_and_events_follow_every_outcome(case: Case, clock: VirtualClock) -> None:
    broker = case.stand.broker()
    send = outcome_handler(case)
    recorder = Recorder()
    app = make_app()
    app.add_events(recorder)
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        for to in ("ack", "drop", "later", "raise", "dead"):
            await broker.publish(case.email, Email(to), name="emails", customer=to)
        with trio.fail_after(120):
            await settled(app, send, 8)
        stats = app.statistics(send)
        (only,) = app.statistics()
    assert only == stats
    assert (stats.queue, stats.table, stats.group, stats.serving) == (
        "emails",
        "email_jobs",
        "emails",
        True,
    )
    counts = (
        stats.claimed,
        stats.finished,
        stats.in_work,
        stats.acked,
        stats.dropped,
        stats.retried_after,
        stats.retried,
        stats.dead_lettered,
        stats.released,
        stats.settle_failures,
        stats.failed_claims,
    )
    assert counts == (8, 8, 0, 3, 1, 2, 1, 1, 0, 0, 0)
    assert stats.settle_errors == ()
    assert stats.claims >= stats.empty_claims >= 1
    # After serve, the last snapshot stands and says it stopped.
    assert app.statistics(send).serving is False

    # The hook saw the same: five publishes, every claimed row, eight handler runs.
    assert [(e.table, e.group, e.transactional, e.error) for e in recorder.published_events] == [
        ("email_jobs", "emails", False, None)
    ] * 5
    assert sum(e.count for e in recorder.claims) == 8
    assert len(recorder.claims) == stats.claims
    assert [e for e, _ in recorder.started] == [e for e, _, _ in recorder.ended]
    assert [s for _, s in recorder.started] == [s for _, s, _ in recorder.ended]
    ends = [end for _, _, end in recorder.ended]
    assert sorted(e.outcomes for e in ends) == sorted(
        [("ack",)] * 3 + [("drop",), ("retry_after",), ("retry",), ("retry",), ()]
    )
    (failed,) = [e for e in ends if e.error is not None]
    assert str(failed.error) == "broken on the first attempt"
    assert Counter(e.outcome for e in recorder.settles) == {
        "ack": 3,
        "drop": 1,
        "retry_after": 2,
        "retry": 1,
        "dead_letter": 1,
    }
    assert all(e.error is None and e.source.subscription == "emails" for e in recorder.settles)
    assert all(e.duration >= 0 and e.start_ns > 0 for e in recorder.settles)
    assert recorder.releases == []


class Raising(Events):
    """A hook that raises in every method."""

    def published(self, event: PublishEvent) -> None:
        raise RuntimeError("published")

    def claimed(self, event: ClaimEvent) -> None:
        raise RuntimeError("claimed")

    def handle_started(self, event: HandleEvent) -> object:
        raise RuntimeError("handle_started")

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        raise RuntimeError("handle_ended")

    def settled(self, event: SettleEvent) -> None:
        raise RuntimeError("settled")


async def test_a_raising_hook_is_logged_once_and_never_holds_a_row(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    broker = case.stand.broker()
    attempts: list[tuple[str, int]] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append((email.to, attempt))
        # The retry's settlement raises in the hook: the row must come back all the same.
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    recorder = Recorder()
    app = make_app()
    app.add_events(Raising())
    app.add_events(recorder)  # after the raising one: it still sees everything
    app.include(broker, send)
    caplog.set_level(logging.WARNING, logger="trinbox")
    async with serving(app):
        for n in range(3):
            await broker.publish(case.email, Email(f"{n}@x"), name="emails", customer=f"c{n}")
        with trio.fail_after(60):
            await settled(app, send, 6)
    assert sorted(attempts) == sorted((f"{n}@x", a) for n in range(3) for a in (1, 2))
    assert case.stand.rows("SELECT * FROM email_jobs") == []
    assert app.statistics(send).acked == 3
    assert len(recorder.settles) == 6
    hooks = [r for r in caplog.records if r.name == "trinbox.events"]
    # One line per method that raised, with its traceback, however often it raised.
    assert sorted(r.getMessage() for r in hooks) == sorted(
        f"the event hook Raising.{method} raised; trinbox goes on (further failures of it are "
        f"counted, not logged)"
        for method in ("published", "claimed", "handle_started", "handle_ended", "settled")
    )
    assert all(r.exc_info is not None for r in hooks)
    assert [r for r in caplog.records if r.name != "trinbox.events"] == []


@cells(forms=["lease"])
async def test_without_a_hook_no_event_is_timed_or_made(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every event path reads the wall clock first: with no hook, none may run.
    def never() -> int:
        raise AssertionError("an event was timed with no hook registered")

    for module in (deliveries, claim_loop, broker_module):
        monkeypatch.setattr(module, "now_ns", never)
    broker = case.stand.broker()
    send = outcome_handler(case)
    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        for to in ("ack", "raise", "dead"):
            await broker.publish(case.email, Email(to), name="emails", customer=to)
        with trio.fail_after(60):
            await settled(app, send, 5)
        assert broker.events is None
    assert app.statistics(send).acked == 2


# -- log lines ------------------------------------------------------------------------------------


def fields(record: logging.LogRecord) -> tuple[object, ...]:
    return (
        record.name,
        record.subscription,  # type: ignore[attr-defined]
        record.table,  # type: ignore[attr-defined]
        record.row_id,  # type: ignore[attr-defined]
        record.attempt,  # type: ignore[attr-defined]
    )


async def test_a_handler_failure_is_one_line_with_its_fields_and_one_traceback(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        if attempt == 1:
            raise RuntimeError("the mail server is down")

    app = make_app()
    app.include(broker, send)
    caplog.set_level(logging.DEBUG, logger="trinbox")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c")
        with trio.fail_after(60):
            await settled(app, send, 2)
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in lines] == [
        "the handler raised; policy retry [subscription=emails table=email_jobs row_id=1 attempt=1]"
    ]
    assert [fields(r) for r in lines] == [("trinbox.delivery", "emails", "email_jobs", 1, 1)]
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1


@cells(stands=["sqlite", "postgres", "mariadb"], forms=["lease"])
async def test_a_settlement_failing_after_a_handler_failure_repeats_no_traceback(
    case: Case,
    clock: VirtualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = case.stand.broker()
    original = LeaseForm.settle
    broken = True

    async def settle(form: LeaseForm, delivery: Delivery, step: Step) -> None:
        if broken:
            raise ValueError("the settlement broke")
        await original(form, delivery, step)

    monkeypatch.setattr(LeaseForm, "settle", settle)

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        nonlocal broken
        if attempt == 1:
            raise RuntimeError("the mail server is down")
        broken = False

    app = make_app()
    app.include(broker, send)
    caplog.set_level(logging.WARNING, logger="trinbox")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c")
        with trio.fail_after(60):
            await settled(app, send, 2)
    assert [(r.name, r.getMessage().split(" [")[0]) for r in caplog.records] == [
        ("trinbox.delivery", "the handler raised; policy retry"),
        (
            "trinbox.settle",
            "settling the row (retry_after) failed: ValueError('the settlement broke')",
        ),
    ]
    assert all(fields(r)[1:] == ("emails", "email_jobs", 1, 1) for r in caplog.records)
    formatter = logging.Formatter()
    texts = [formatter.formatException(r.exc_info) for r in caplog.records if r.exc_info]
    # Each traceback once: the handler's is not repeated under the settlement's.
    assert sum("the mail server is down" in t for t in texts) == 1
    assert sum("the settlement broke" in t for t in texts) == 1


class Leases(Events):
    def __init__(self) -> None:
        self.events: list[LeaseEvent] = []

    def lease_extended(self, event: LeaseEvent) -> None:
        self.events.append(event)


@cells(forms=["lease"])
async def test_lease_extensions_and_a_lost_lease_are_counted_reported_and_logged(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    broker = case.stand.broker(lease=2)

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        if email.to == "stolen":
            # Another claim took the row: the keeper's next extension finds its lease gone.
            case.stand.execute("UPDATE email_jobs SET locked_until = ? WHERE customer = ?",
                               stored(case.name, DUE), "stolen")  # fmt: skip
        await trio.sleep(3)  # past the lease: the keeper extends it every two thirds of a second

    leases = Leases()
    app = make_app()
    app.add_events(leases)
    app.include(broker, send)
    caplog.set_level(logging.WARNING, logger="trinbox")
    async with serving(app):
        await broker.publish(case.email, Email("kept"), name="emails", customer="kept")
        with trio.fail_after(60):
            await settled(app, send, 1)
        await broker.publish(case.email, Email("stolen"), name="emails", customer="stolen")
        with trio.fail_after(60):
            await settled(app, send, 2)
    stats = app.statistics(send)
    assert stats.lease_extensions >= 2  # twice or more in the first three seconds
    assert stats.leases_lost == 1
    assert (stats.acked, stats.settle_failures) == (1, 1)
    assert [e.extended for e in leases.events].count(False) == 1
    assert len(leases.events) == stats.lease_extensions + 1
    assert (caplog.records[0].getMessage(), caplog.records[0].exc_info) == (
        "the row's lease is gone (another claim took it); its settlement will fail "
        "[subscription=emails table=email_jobs row_id=2 attempt=1]",
        None,
    )
    assert [fields(r) for r in caplog.records] == [
        ("trinbox.settle", "emails", "email_jobs", 2, 1)
    ] * 2
    assert caplog.records[1].getMessage().startswith("settling the row (ack) failed: ")


async def test_a_delivery_stopped_by_shutdown_is_released_counted_and_reported(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker()
    started = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        started.set()
        await trio.sleep_forever()

    recorder = Recorder()
    app = make_app(grace=0.5)
    app.add_events(recorder)
    app.include(broker, send)
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c")
        with trio.fail_after(60):
            await started.wait()
        assert app.statistics(send).in_work == 1
    stats = app.statistics(send)
    assert (stats.claimed, stats.in_work, stats.released, stats.finished) == (1, 0, 1, 1)
    assert stats.acked + stats.dropped + stats.retried == 0
    assert [(e.row_id, e.attempt, e.shutdown, e.abandoned) for e in recorder.releases] == [
        (1, 1, True, False)
    ]
    ((_, _, end),) = recorder.ended
    assert isinstance(end.error, trio.Cancelled)
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 1
