"""Snooze on every stand and form (issue 20, item 4): ``HandlerOutcome.snooze(delay)`` puts the
row back, due after ``delay``, without spending an attempt — the lease and advisory forms (and
the row lock form counting at claim) give back the attempt their claim counted, the plain row
lock form counts none — so a row snoozed any number of times is never dead-lettered for its
snoozes. Statistics, the event hook and the Prometheus and OpenTelemetry adapters count snoozes
apart from retries. A table without a RetryAfter field refuses the outcome."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.events import Events, HandleEnd, HandleEvent, SettleEvent, SubscriptionStatistics
from trinbox.metrics.otel import OpenTelemetryEvents
from trinbox.metrics.prometheus import PrometheusMetrics
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells, insert_emails, native
from .schema import AUDIT

SNOOZE = timedelta(seconds=5)


@dataclass
class Email:
    to: str


class Outcomes(Events):
    """What the event hook reports of each handler run and settlement."""

    def __init__(self) -> None:
        self.handles: list[tuple[str, ...]] = []
        self.settles: list[str] = []

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        self.handles.append(end.outcomes)

    def settled(self, event: SettleEvent) -> None:
        self.settles.append(event.outcome)


async def snooze_five_times(
    case: Case, queue: InboxQueue[Any, Any]
) -> tuple[list[float], SubscriptionStatistics]:
    """Publish a row that a handler mounted with ``max_attempts(2)`` snoozes five times, then
    acks; when each delivery came (virtual seconds) and the subscription's statistics. Every
    delivery reports the first attempt."""
    broker = case.stand.broker(poll_interval=HOUR)
    attempts: list[int] = []
    called_at: list[float] = []

    @subscriber(queue)
    async def poll(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        called_at.append(trio.current_time())
        if len(attempts) <= 5:
            return HandlerOutcome.snooze(SNOOZE)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, poll).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(queue.row, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(120):
            await settled(app, poll, 6)
    # Every delivery is the first attempt: the snoozes spent none.
    assert attempts == [1] * 6
    stats = app.statistics(poll)
    assert (stats.snoozed, stats.acked, stats.retried, stats.retried_after) == (5, 1, 0, 0)
    assert stats.dead_lettered == 0
    return called_at, stats


async def test_five_snoozes_under_max_attempts_two_are_handled_and_acked(
    case: Case, clock: VirtualClock
) -> None:
    called_at, _ = await snooze_five_times(case, InboxQueue(case.finished, "emails"))
    # Each snooze waited its delay (a local snooze wakes its claim loop when due, whatever
    # the poll interval).
    gaps = [b - a for a, b in itertools.pairwise(called_at)]
    assert all(SNOOZE.total_seconds() <= gap < SNOOZE.total_seconds() + 1 for gap in gaps), gaps
    # Acked, not moved: the attempt column is the first delivery's.
    done = "SELECT name, attempt FROM email_jobs WHERE processed_at IS NOT NULL"
    assert case.stand.rows(done) == [("emails", case.attempts_after(1))]


async def test_between_snoozes_the_attempt_column_is_as_published(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails"))
    async def poll(email: Email) -> HandlerOutcome:
        return HandlerOutcome.snooze(timedelta(hours=1))

    app = make_app()
    app.include(broker, poll).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(60):
            await settled(app, poll, 1)
        assert case.stand.rows("SELECT name, attempt FROM email_jobs") == [("emails", 1)]
        await trio.sleep(HOUR + 1)  # due again: delivered again, still its first attempt
        with trio.fail_after(60):
            await settled(app, poll, 2)
    assert case.stand.rows("SELECT name, attempt FROM email_jobs") == [("emails", 1)]
    assert app.statistics(poll).snoozed == 2


async def test_retries_still_count_between_snoozes_and_reach_the_dead_letter(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    attempts: list[int] = []
    hook = Outcomes()

    @subscriber(InboxQueue(case.email, "emails"))
    async def poll(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        if len(attempts) % 2:
            return HandlerOutcome.snooze(SNOOZE)
        return HandlerOutcome.retry_after(SNOOZE)

    app = make_app()
    app.add_events(hook)
    app.include(broker, poll).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(120):
            await settled(app, poll, 4)
    assert attempts == [1, 1, 2, 2]
    stats = app.statistics(poll)
    assert (stats.snoozed, stats.retried_after, stats.dead_lettered) == (2, 1, 1)
    # The event hook tells a snooze from a retry, in the handler's end and its settlement.
    assert hook.handles == [("snooze",), ("retry_after",), ("snooze",), ("retry_after",)]
    assert hook.settles == ["snooze", "retry_after", "snooze", "dead_letter"]
    assert case.stand.rows("SELECT name, attempt FROM email_jobs") == [
        ("emails.dead", case.attempts_after(2))
    ]


@cells(forms=["row_lock"], stands=["postgres", "mariadb"])
async def test_counting_at_claim_a_snooze_gives_the_count_back(
    case: Case, clock: VirtualClock
) -> None:
    await snooze_five_times(case, InboxQueue(case.email, "emails").count_attempt_at_claim())
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_a_batch_snoozes_some_rows_and_acks_the_others(
    case: Case, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [b'{"to": "a"}', b'{"to": "b"}', b'{"to": "c"}'])
    broker = case.stand.broker(poll_interval=HOUR)
    seen: list[tuple[str, ...]] = []

    @subscriber(InboxQueue(case.email, "emails").batch(3))
    async def poll(emails: list[Email]) -> list[HandlerOutcome]:
        seen.append(tuple(sorted(e.to for e in emails)))
        return [
            HandlerOutcome.ack() if e.to == "b" or len(seen) > 1 else HandlerOutcome.snooze(SNOOZE)
            for e in emails
        ]

    app = make_app()
    app.include(broker, poll).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        with trio.fail_after(120):
            await settled(app, poll, 3)
            await trio.sleep(SNOOZE.total_seconds() + 1)
            await settled(app, poll, 5)
    assert seen[0] == ("a", "b", "c")
    assert sorted(to for batch in seen[1:] for to in batch) == ["a", "c"]
    stats = app.statistics(poll)
    assert (stats.snoozed, stats.acked, stats.dead_lettered) == (2, 3, 0)
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_a_transactional_snooze_discards_the_handlers_writes(
    case: Case, clock: VirtualClock
) -> None:
    case.stand.script(AUDIT[case.name])
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")
    runs: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").transactional().workers(1))
    async def poll(email: Email, tx: keys.Tx) -> HandlerOutcome:
        runs.append(len(runs) + 1)
        await tx.execute(insert, f"run {len(runs)}")
        return HandlerOutcome.snooze(SNOOZE) if len(runs) == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, poll)
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(120):
            await settled(app, poll, 2)
    assert [note for (note,) in case.stand.rows("SELECT note FROM audit")] == ["run 2"]
    assert app.statistics(poll).snoozed == 1


@cells(forms=["lease", "advisory"])
async def test_a_table_without_retry_after_refuses_the_snooze_as_a_failure(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.plain, "jobs"))
    async def poll(job: Email) -> HandlerOutcome:
        return HandlerOutcome.snooze(SNOOZE)

    app = make_app()
    app.include(broker, poll).max_attempts(2).dead_letter("plain_jobs_dead")
    async with serving(app):
        await broker.publish(case.plain, Email("a@x"), tenant="t1")
        with trio.fail_after(60):
            await settled(app, poll, 2)
    # The handler's failure policy (retry, counted) settles it: never a loop of snoozes.
    stats = app.statistics(poll)
    assert (stats.snoozed, stats.retried, stats.dead_lettered) == (0, 1, 1)
    refusals = [
        r.getMessage().split(" [")[0]
        for r in caplog.records
        if r.exc_info is not None and "snooze" in str(r.exc_info[1])
    ]
    assert len(refusals) == 2
    (error,) = {
        str(r.exc_info[1]) for r in caplog.records if r.exc_info is not None and r.exc_info[1]
    }
    label = "plain_jobs (LeasedPlain)" if case.form == "lease" else "plain_jobs (LockedPlain)"
    assert error == (
        f"subscription 'jobs' ({poll!r}): a snooze holds the row back in its RetryAfter "
        f"field, found HandlerOutcome.snooze(datetime.timedelta(seconds=5)) on {label}, which "
        f"has none; add a RetryAfter field (retry_after: Annotated[datetime, RetryAfter()]), "
        f"or return HandlerOutcome.retry() to spend an attempt"
    )


@cells(stands=["postgres"])
async def test_prometheus_and_opentelemetry_show_snoozes_apart(
    case: Case, clock: VirtualClock
) -> None:
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    broker = case.stand.broker(poll_interval=HOUR)
    runs: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def poll(email: Email) -> HandlerOutcome:
        runs.append(1)
        return HandlerOutcome.snooze(SNOOZE) if len(runs) < 3 else HandlerOutcome.ack()

    app = make_app()
    PrometheusMetrics(app, registry=registry)
    app.add_events(OpenTelemetryEvents(provider))
    app.include(broker, poll)
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(120):
            await settled(app, poll, 3)
    labels = {"queue": "emails", "table": "email_jobs"}
    value = registry.get_sample_value
    assert value("trinbox_settled_total", {**labels, "outcome": "snooze"}) == 2
    assert value("trinbox_settled_total", {**labels, "outcome": "ack"}) == 1
    assert value("trinbox_settled_total", {**labels, "outcome": "retry_after"}) is None
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("snooze email_jobs") == 2
    assert names.count("ack email_jobs") == 1
    processes = [s for s in exporter.get_finished_spans() if s.name == "process email_jobs"]
    outcomes = sorted(str(dict(s.attributes or {})["trinbox.outcomes"]) for s in processes)
    assert outcomes == ["('ack',)", "('snooze',)", "('snooze',)"]
