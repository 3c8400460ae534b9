"""The Prometheus and OpenTelemetry adapters over real queues (issue 10, item 4): counters by
queue and outcome, histograms and gauges in a real ``prometheus_client`` registry; spans with
the messaging semantic conventions' attributes, read back from the OpenTelemetry SDK's
in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry

import trinbox
from trinbox import App, HandlerOutcome, InboxQueue, keys, subscriber
from trinbox._engine.statistics import SHARE_EVERY
from trinbox.events import ClaimEvent, Events
from trinbox.metrics.otel import OpenTelemetryEvents
from trinbox.metrics.prometheus import PrometheusMetrics, QueueDepthGauges
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells


@dataclass
class Email:
    to: str


QUEUE = {"queue": "emails", "table": "email_jobs"}
CHAINED = ("false", "true")


async def app_published() -> None:
    """Let the serving app publish its statistics for other threads once more (each
    SHARE_EVERY seconds, on the test's virtual clock)."""
    await trio.sleep(SHARE_EVERY * 1.5)


@cells()
async def test_prometheus_counts_outcomes_durations_and_work(
    case: Case, clock: VirtualClock
) -> None:
    registry = CollectorRegistry()
    broker = case.stand.broker()
    in_handler = trio.Event()
    go_on = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        if email.to == "wait":
            in_handler.set()
            await go_on.wait()
        if email.to == "raise" and attempt == 1:
            raise RuntimeError("broken")
        if email.to == "drop":
            return HandlerOutcome.drop()
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    PrometheusMetrics(app, registry=registry)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {**QUEUE, **labels})

    async with serving(app):
        await broker.publish(case.email, Email("wait"), name="emails", customer="w")
        with trio.fail_after(60):
            await in_handler.wait()
        await app_published()
        # One delivery in work, its handler running.
        assert value("trinbox_in_work") == 1
        assert value("trinbox_handlers_running") == 1
        go_on.set()
        for to in ("ack", "raise", "drop"):
            await broker.publish(case.email, Email(to), name="emails", customer=to)
        with trio.fail_after(60):
            await settled(app, send, 5)
        await app_published()
        assert value("trinbox_in_work") == 0
    stats = app.statistics(send)
    assert value("trinbox_handlers_running") == 0
    assert value("trinbox_settled_total", outcome="ack") == 3 == stats.acked
    assert value("trinbox_settled_total", outcome="drop") == 1
    assert value("trinbox_settled_total", outcome="retry_after") == 1  # the backoff
    assert value("trinbox_settle_failures_total", outcome="ack") is None
    assert value("trinbox_claimed_total") == 5 == stats.claimed
    assert value("trinbox_handler_duration_seconds_count", result="ok") == 4
    assert value("trinbox_handler_duration_seconds_count", result="error") == 1
    assert value("trinbox_handler_duration_seconds_sum", result="ok") is not None
    claims = sum(value("trinbox_claims_total", result=r) or 0 for r in ("rows", "empty", "error"))
    assert claims == stats.claims
    # Claim latency: every claim, the claim loop's and those chained to a settlement (whose
    # time includes the settlement's), told apart by a label.
    observed = [value("trinbox_claim_duration_seconds_count", chained=c) for c in CHAINED]
    assert observed[0] is not None and observed[0] >= 1
    assert sum(n or 0 for n in observed) == claims
    published = registry.get_sample_value(
        "trinbox_published_total", {"table": "email_jobs", "result": "ok"}
    )
    assert published == 4
    # No group label unless asked for: a group per tenant would be a series each.
    assert (
        registry.get_sample_value(
            "trinbox_published_total", {"table": "email_jobs", "group": "emails", "result": "ok"}
        )
        is None
    )


@cells(forms=["lease"])
async def test_publishes_are_counted_by_group_only_when_asked(case: Case) -> None:
    by_table, by_group = CollectorRegistry(), CollectorRegistry()
    broker = case.stand.broker()
    app = make_app()
    app.add_broker(broker)
    PrometheusMetrics(app, registry=by_table)
    app.add_events(PrometheusMetrics(registry=by_group, group_label=True))
    async with serving(app):
        for tenant in ("t1", "t2", "t2"):
            await broker.publish(case.email, Email("x"), name=tenant, customer="c")
    assert {
        tuple(sorted(sample.labels.items())): sample.value
        for metric in by_table.collect()
        if metric.name == "trinbox_published"
        for sample in metric.samples
        if sample.name == "trinbox_published_total"
    } == {(("result", "ok"), ("table", "email_jobs")): 3.0}
    for tenant, count in (("t1", 1), ("t2", 2)):
        labels = {"table": "email_jobs", "group": tenant, "result": "ok"}
        assert by_group.get_sample_value("trinbox_published_total", labels) == count


def scraped_in_work(registry: CollectorRegistry) -> float | None:
    """``trinbox_in_work`` as a scrape on a thread of its own reads it (the exporter's
    thread). Joined at once, from the Trio thread: the Trio side stands still, exactly where
    it is, while the other thread reads (and the test's virtual clock sees no wait)."""
    scraped: list[float | None] = []
    exporter = threading.Thread(
        target=lambda: scraped.append(registry.get_sample_value("trinbox_in_work", QUEUE))
    )
    exporter.start()
    exporter.join()
    return scraped[0]


class ScrapeMidClaim(Events):
    """Scrapes while the Trio thread is halfway through a claim: its rows taken and counted
    in work, their handlers not started."""

    def __init__(self, app: App, registry: CollectorRegistry) -> None:
        self.app = app
        self.registry = registry
        self.seen: list[tuple[int, float | None]] = []

    def claimed(self, event: ClaimEvent) -> None:
        if event.count:
            (live,) = [s.in_work for s in self.app.statistics() if s.queue == "emails"]
            self.seen.append((live, scraped_in_work(self.registry)))


@cells(forms=["lease"])
async def test_the_exporter_thread_reads_the_in_work_gauge_the_app_published(
    case: Case, clock: VirtualClock
) -> None:
    registry = CollectorRegistry()
    broker = case.stand.broker()
    go_on = trio.Event()
    in_handler = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        in_handler.set()
        await go_on.wait()

    app = make_app()
    app.include(broker, send)
    PrometheusMetrics(app, registry=registry)
    scraper = ScrapeMidClaim(app, registry)
    app.add_events(scraper)

    assert scraped_in_work(registry) is None  # nothing published before serve
    async with serving(app):
        await app_published()
        assert scraped_in_work(registry) == 0
        await broker.publish(case.email, Email("a"), name="emails", customer="c")
        with trio.fail_after(60):
            await in_handler.wait()
        # Mid-claim, the row is in work on the Trio side; the exporter read what the app
        # had published, not the claim half done.
        assert scraper.seen == [(1, 0)]
        await app_published()
        assert scraped_in_work(registry) == 1
        go_on.set()
        with trio.fail_after(60):
            await settled(app, send, 1)
        await app_published()
        assert scraped_in_work(registry) == 0
    # Published once more as serve ended: the last word is the stopped app's.
    assert app.share_statistics().latest == app.statistics()
    assert scraped_in_work(registry) == 0


@cells(forms=["lease"], stands=["sqlite"])
async def test_a_cancelled_serve_publishes_its_last_statistics_too(
    case: Case, clock: VirtualClock
) -> None:
    registry = CollectorRegistry()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(case.stand.broker(), send)
    PrometheusMetrics(app, registry=registry)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            await app_published()
            (serving,) = app.share_statistics().latest
            assert serving.serving
            scope.cancel()
    (stopped,) = app.share_statistics().latest
    assert not stopped.serving
    assert app.share_statistics().latest == app.statistics()
    assert scraped_in_work(registry) == 0


@dataclass(frozen=True)
class Depth:
    queue: str
    table: str
    group: str | None
    due: int
    scheduled: int
    in_work: int | None
    dead: int | None
    oldest_due_age_seconds: float | None


@cells(forms=["lease"])
async def test_queue_depth_gauges_refresh_from_an_async_depth_function(case: Case) -> None:
    registry = CollectorRegistry()
    broker = case.stand.broker()

    async def depth() -> list[Depth]:
        due = await broker.database.fetchval("SELECT count(*) FROM email_jobs")
        return [Depth("emails", "email_jobs", "emails", int(str(due)), 0, 0, None, 1.5)]

    gauges = QueueDepthGauges(depth, interval=0.05, registry=registry)
    app = make_app()
    app.add_broker(broker)
    async with serving(app), trio.open_nursery() as nursery:
        await nursery.start(gauges.run)
        assert registry.get_sample_value("trinbox_queue_due", QUEUE) == 0
        for n in range(3):
            await broker.publish(case.email, Email(f"{n}"), name="emails", customer="c")
        await gauges.refresh()
        assert registry.get_sample_value("trinbox_queue_due", QUEUE) == 3
        assert registry.get_sample_value("trinbox_queue_leased", QUEUE) == 0
        assert registry.get_sample_value("trinbox_queue_dead_letters", QUEUE) is None
        assert registry.get_sample_value("trinbox_queue_oldest_due_age_seconds", QUEUE) == 1.5
        nursery.cancel_scope.cancel()


@cells(forms=["lease"])
async def test_queue_depth_gauges_of_an_app_read_inspects_queries(
    case: Case, clock: VirtualClock
) -> None:
    registry = CollectorRegistry()
    broker = case.stand.broker()
    in_handler = trio.Event()
    go_on = trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        in_handler.set()
        await go_on.wait()

    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    gauges = QueueDepthGauges.of_app(app, registry=registry)
    async with serving(app), trio.open_nursery() as nursery:
        for n in range(3):
            await broker.publish(case.email, Email(f"{n}"), name="emails", customer=f"c{n}")
        with trio.fail_after(60):
            await in_handler.wait()
        await nursery.start(gauges.run)
        # One row leased by the handler in work, two waiting, no dead letter yet. (The broker's
        # clock is the test's, in 2030: by the database's clock the rows are due later.)
        assert registry.get_sample_value("trinbox_queue_leased", QUEUE) == 1
        waiting = [
            registry.get_sample_value(f"trinbox_queue_{n}", QUEUE) for n in ("due", "scheduled")
        ]
        assert waiting == [0, 2]
        assert registry.get_sample_value("trinbox_queue_dead_letters", QUEUE) == 0
        nursery.cancel_scope.cancel()
        go_on.set()
        with trio.fail_after(60):
            await settled(app, send, 3)
        await gauges.refresh()
        assert registry.get_sample_value("trinbox_queue_scheduled", QUEUE) == 0
        assert registry.get_sample_value("trinbox_queue_leased", QUEUE) == 0


def spans_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


@cells(forms=["lease"])
async def test_opentelemetry_spans_follow_the_messaging_conventions(
    case: Case, clock: VirtualClock
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("the service")
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        with tracer.start_as_current_span("send the mail"):
            if attempt == 1:
                raise RuntimeError("the mail server is down")

    app = make_app()
    app.add_events(OpenTelemetryEvents(provider))
    app.include(broker, send)
    async with serving(app):
        with tracer.start_as_current_span("request"):
            await broker.publish(case.email, Email("a@x"), name="emails", customer="c")
        with trio.fail_after(60):
            await settled(app, send, 2)
    spans = spans_of(exporter)
    names = [s.name for s in spans]
    assert names.count("publish email_jobs") == 1
    assert names.count("process email_jobs") == 2
    assert names.count("send the mail") == 2
    assert names.count("retry_after email_jobs") == 1
    assert names.count("ack email_jobs") == 1
    assert names.count("claim email_jobs") >= 1  # chained claims may take the second

    by_name = {s.name: s for s in spans}
    publish, request = by_name["publish email_jobs"], by_name["request"]
    assert publish.kind is SpanKind.PRODUCER
    assert publish.parent is not None and publish.parent.span_id == request.context.span_id
    assert dict(publish.attributes or {}) == {
        "messaging.system": "trinbox",
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.destination.name": "email_jobs",
        "db.system.name": case.stand.name.replace("postgres", "postgresql").replace(
            "mariadb", "mysql"
        ),
        "trinbox.transactional": False,
        "trinbox.group": "emails",
    }

    processes = [s for s in spans if s.name == "process email_jobs"]
    first, second = sorted(processes, key=lambda s: s.start_time or 0)
    attributes = dict(first.attributes or {})
    assert first.kind is SpanKind.CONSUMER
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.message.id"] == "1"
    assert attributes["messaging.destination.subscription.name"] == "emails"
    assert attributes["trinbox.attempt"] == 1
    assert attributes["error.type"] == "RuntimeError"
    assert first.status.status_code is StatusCode.ERROR
    assert second.status.status_code is StatusCode.UNSET
    assert dict(second.attributes or {})["trinbox.outcomes"] == ("ack",)
    # The handler's own spans are children of its process span.
    children = [s for s in spans if s.name == "send the mail"]
    assert {c.parent.span_id for c in children if c.parent} == {
        first.context.span_id,
        second.context.span_id,
    }
    # Each settlement is a child of the run it settles.
    settle = by_name["retry_after email_jobs"]
    assert settle.kind is SpanKind.CLIENT
    assert settle.parent is not None and settle.parent.span_id == first.context.span_id
    assert dict(settle.attributes or {})["messaging.operation.type"] == "settle"
    assert dict(settle.attributes or {})["messaging.message.id"] == "1"
    ack = by_name["ack email_jobs"]
    assert ack.parent is not None and ack.parent.span_id == second.context.span_id

    claims = [s for s in spans if s.name == "claim email_jobs"]
    assert all(s.kind is SpanKind.CLIENT for s in claims)
    assert all(dict(s.attributes or {})["messaging.operation.type"] == "receive" for s in claims)
    # Empty claims make no span by default: every claim span took rows, two in all.
    counts = [dict(s.attributes or {})["messaging.batch.message_count"] for s in claims]
    assert all(isinstance(c, int) and c > 0 for c in counts)
    assert sum(c for c in counts if isinstance(c, int)) == 2


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [("prometheus", "prometheus_client", "prometheus"), ("otel", "opentelemetry", "otel")],
)
def test_an_adapter_without_its_package_names_its_extra(
    module: str, package: str, extra: str
) -> None:
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        f"try:\n    import trinbox.metrics.{module}\n"
        f"except ImportError as exc:\n    print(exc)\n"
    )
    root = Path(trinbox.__file__).parents[1]
    found = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    wanted: dict[str, Any] = {
        "prometheus": "trinbox.metrics.prometheus needs prometheus_client",
        "otel": "trinbox.metrics.otel needs opentelemetry-api",
    }
    assert found.stdout == (
        f'{wanted[module]}; install trinbox\'s extra: pip install "trinbox[{extra}]"\n'
    )
