"""W3C trace context across the queue, on every stand and form, with the OpenTelemetry SDK's
in-memory exporter: a publish into a table with a Headers field writes its span's
``traceparent`` into the row's headers, and the process span of each delivery (each attempt)
links to that span, in another process too; ``publisher="parent"`` makes it the publish
span's child and ``"none"`` relates nothing; a batch links every row's publisher; a delivery's
context is its own, never the claim loop's; a table without a Headers field publishes and
carries no context; ``trace_headers()`` carries it through ``insert_statement``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trinbox import App, HandlerOutcome, InboxQueue, SqlBroker, keys, subscriber
from trinbox.errors import HeaderRefused
from trinbox.events import Events, PublishStart
from trinbox.metrics.otel import OpenTelemetryEvents, PublishRelation, trace_headers
from trinbox.schema import DialectName, ddl
from trinbox.testing import settled

from ..readme import ROOT, child_env
from ..serving import make_app, serving
from .conftest import Case
from .kit import cells
from .test_headers import HEADED, TABLE

DIALECTS: dict[str, DialectName] = {"postgres": "postgres", "mariadb": "mysql", "sqlite": "sqlite"}


@dataclass
class Email:
    to: str


class Traced:
    """An SDK tracer provider exporting into memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("the service")

    def spans(self, name: str) -> list[ReadableSpan]:
        found = [s for s in self.exporter.get_finished_spans() if s.name == name]
        return sorted(found, key=lambda s: s.start_time or 0)

    def one(self, name: str) -> ReadableSpan:
        (found,) = self.spans(name)
        return found


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def links(span: ReadableSpan) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


def _app(
    case: Case, traced: Traced, publisher: PublishRelation = "link", **more: Any
) -> tuple[App, SqlBroker[Any]]:
    broker = case.stand.broker()
    app = make_app()
    app.add_events(OpenTelemetryEvents(traced.provider, publisher=publisher, **more))
    row = HEADED[case.form]

    async def create() -> None:
        await broker.create_tables(row)

    app.on_startup(create)
    return app, broker


def _mail(case: Case, traced: Traced, seen: list[dict[str, str]], *, retry: bool = False) -> Any:
    @subscriber(InboxQueue(HEADED[case.form], "mail"))
    async def send(email: Email, headers: keys.Headers, attempt: keys.Attempt) -> HandlerOutcome:
        seen.append(dict(headers))
        with traced.tracer.start_as_current_span("send the mail"):
            pass
        return HandlerOutcome.retry() if retry and attempt == 1 else HandlerOutcome.ack()

    return send


async def test_a_process_span_links_to_its_publish_span_in_another_process(case: Case) -> None:
    row = HEADED[case.form]
    case.stand.script(";\n".join(ddl(row, DIALECTS[case.name])))
    done = await trio.run_process(
        [sys.executable, "-m", "tests.integration.matrix.trace_process", case.name, case.form,
         case.stand.url],
        cwd=ROOT,
        env=child_env(),
        capture_stdout=True,
        capture_stderr=True,
    )  # fmt: skip
    published = json.loads(done.stdout.decode().splitlines()[-1])
    publish, request = published["publish"], published["request"]
    assert publish["parent"] == request["span_id"]
    # The row carries the publish span's context beside the publisher's own header.
    stored = case.stand.value(f"SELECT headers FROM {TABLE}")
    stored = stored if isinstance(stored, dict) else json.loads(stored)
    assert set(stored) == {"tenant", "traceparent"} and stored["tenant"] == "acme"
    assert stored["traceparent"].startswith(f"00-{publish['trace_id']}-{publish['span_id']}-")

    traced = Traced()
    seen: list[dict[str, str]] = []
    send = _mail(case, traced, seen)
    broker = case.stand.broker()
    app = make_app()
    app.add_events(OpenTelemetryEvents(traced.provider))
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert seen == [stored]
    process = traced.one(f"process {TABLE}")
    assert process.parent is None  # linked, not a child: a trace of its own
    assert links(process) == [(int(publish["trace_id"], 16), int(publish["span_id"], 16))]
    # The handler's own spans are the process span's children.
    child = traced.one("send the mail").parent
    assert child is not None and child.span_id == ids(process)[1]


async def test_each_attempt_links_to_the_publish_span_and_the_claim_loops_context_stays_out(
    case: Case,
) -> None:
    traced = Traced()
    seen: list[dict[str, str]] = []
    send = _mail(case, traced, seen, retry=True)
    app, broker = _app(case, traced)
    app.include(broker, send)
    # Served inside a span: every task of serve, the claim loop's too, copies this context.
    with traced.tracer.start_as_current_span("serving") as serving_span:
        async with serving(app):
            with traced.tracer.start_as_current_span("request"):
                await broker.publish(HEADED[case.form], Email("a@x"), queue="mail")
            with trio.fail_after(10):
                await settled(app, send, 2)
    publish = traced.one(f"publish {TABLE}")
    assert publish.parent is not None and publish.parent.span_id == ids(traced.one("request"))[1]
    first, second = traced.spans(f"process {TABLE}")
    for process in (first, second):
        assert process.parent is None, "a delivery's context is never the claim loop's"
        assert links(process) == [ids(publish)]
        assert ids(process)[0] != serving_span.get_span_context().trace_id
    assert ids(first)[0] != ids(second)[0]  # each attempt a trace of its own
    children = traced.spans("send the mail")
    assert [c.parent.span_id for c in children if c.parent] == [ids(first)[1], ids(second)[1]]
    assert seen[0] == seen[1] and set(seen[0]) == {"traceparent"}


async def test_parent_makes_the_process_span_the_publish_spans_child(case: Case) -> None:
    traced = Traced()
    send = _mail(case, traced, [])
    app, broker = _app(case, traced, publisher="parent")
    app.include(broker, send)
    with traced.tracer.start_as_current_span("serving"):
        async with serving(app):
            await broker.publish(HEADED[case.form], Email("a@x"), queue="mail")
            with trio.fail_after(10):
                await settled(app, send, 1)
    publish, process = traced.one(f"publish {TABLE}"), traced.one(f"process {TABLE}")
    assert process.parent is not None
    assert (process.parent.trace_id, process.parent.span_id) == ids(publish)
    assert ids(process)[0] == ids(publish)[0]
    assert links(process) == []


@pytest.mark.parametrize(
    ("publisher", "propagate"), [("none", True), ("link", False)], ids=["none", "no-propagate"]
)
async def test_none_relates_nothing_and_no_propagate_writes_no_context(
    case: Case, publisher: PublishRelation, propagate: bool
) -> None:
    traced = Traced()
    seen: list[dict[str, str]] = []
    send = _mail(case, traced, seen)
    app, broker = _app(case, traced, publisher, propagate=propagate)
    app.include(broker, send)
    async with serving(app):
        await broker.publish(HEADED[case.form], Email("a@x"), queue="mail", headers={"a": "b"})
        with trio.fail_after(10):
            await settled(app, send, 1)
    process = traced.one(f"process {TABLE}")
    assert process.parent is None and links(process) == []
    assert len(traced.spans(f"publish {TABLE}")) == 1
    assert ("traceparent" in seen[0]) is propagate


async def test_a_batch_links_every_rows_publish_span(case: Case) -> None:
    traced = Traced()
    app, broker = _app(case, traced)
    handled: list[int] = []

    @subscriber(InboxQueue(HEADED[case.form], "mail").batch(3))
    async def send(emails: list[Email]) -> None:
        handled.append(len(emails))

    app.include(broker, send)
    async with serving(app):
        async with broker.transaction() as tx:  # one claim sees all three
            for n in range(3):
                await tx.publish(HEADED[case.form], Email(f"{n}@x"), queue="mail")
        with trio.fail_after(10):
            await settled(app, send, 3)
    publishes = {ids(s) for s in traced.spans(f"publish {TABLE}")}
    processes = traced.spans(f"process {TABLE}")
    assert sum(handled) == 3 and len(processes) == len(handled)
    assert all(p.parent is None for p in processes)
    assert {link for p in processes for link in links(p)} == publishes


async def test_a_table_without_headers_publishes_and_carries_no_context(case: Case) -> None:
    traced = Traced()
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.add_events(OpenTelemetryEvents(traced.provider))
    app.include(broker, send)
    async with serving(app):
        with traced.tracer.start_as_current_span("request"):
            await broker.publish(case.email, Email("a@x"), name="emails", customer="c")
        with trio.fail_after(10):
            await settled(app, send, 1)
    publish = traced.one("publish email_jobs")
    assert publish.parent is not None and publish.parent.span_id == ids(traced.one("request"))[1]
    process = traced.one("process email_jobs")
    assert process.parent is None and links(process) == []


async def test_a_publishs_own_trace_context_and_trace_headers_are_carried(case: Case) -> None:
    traced = Traced()
    seen: list[dict[str, str]] = []
    send = _mail(case, traced, seen)
    app, broker = _app(case, traced)
    app.include(broker, send)
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with serving(app):
        # Given by the publish: kept, the hook adds nothing.
        await broker.publish(
            HEADED[case.form], Email("own"), queue="mail", headers={"traceparent": own}
        )
        with trio.fail_after(10):
            await settled(app, send, 1)
        # Written through insert_statement, which no hook sees: trace_headers() carries it.
        with traced.tracer.start_as_current_span("request") as request:
            sql, params = broker.insert_statement(
                HEADED[case.form], Email("own driver"), queue="mail", headers=trace_headers(),
                paramstyle="qmark",
            )  # fmt: skip
        case.stand.execute(sql, *params)
        with trio.fail_after(10):
            await settled(app, send, 2)
    assert seen[0] == {"traceparent": own}
    first, second = traced.spans(f"process {TABLE}")
    assert links(first) == [(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)]
    context = request.get_span_context()
    assert links(second) == [(context.trace_id, context.span_id)]
    assert trace_headers() == {}  # no span now


class Tagging(Events):
    """A hook of the service's own that gives every publish headers (or raises)."""

    def __init__(self, given: dict[str, str] | None) -> None:
        self.given = given
        self.seen: list[PublishStart] = []

    def publishing(self, event: PublishStart) -> dict[str, str]:
        self.seen.append(event)
        if self.given is None:
            raise RuntimeError("the hook is broken")
        return self.given


@cells(forms=("lease",))
async def test_a_hooks_headers_go_under_the_publishs_own(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict[str, str]] = []
    send = _mail(case, Traced(), seen)
    tagging, broken = Tagging({"tenant": "hook", "region": "eu"}), Tagging(None)
    app, broker = _app(case, Traced(), propagate=False)
    app.add_events(tagging)
    app.add_events(broken)
    app.include(broker, send)
    row = HEADED[case.form]
    async with serving(app):
        await broker.publish(row, Email("a@x"), queue="mail", headers={"tenant": "own"})
        async with broker.transaction() as tx:
            await tx.publish(row, Email("b@x"), queue="mail")
        with trio.fail_after(10):
            await settled(app, send, 2)
        # A hook's header follows the publish's rule too.
        tagging.given = {"trinbox-tag": "x"}
        with pytest.raises(HeaderRefused, match="'trinbox-tag'"):
            await broker.publish(row, Email("c@x"), queue="mail")
    assert seen == [{"region": "eu", "tenant": "own"}, {"region": "eu", "tenant": "hook"}]
    first, second = tagging.seen[:2]
    assert (first.table, first.group, first.transactional) == (TABLE, "mail", False)
    assert dict(first.headers) == {"tenant": "own"}
    assert (second.transactional, dict(second.headers)) == (True, {})
    assert len(broken.seen) == 3
    failures = [r for r in caplog.records if "Tagging.publishing raised" in r.getMessage()]
    assert len(failures) == 1  # logged once, the publishes went on


def test_the_relation_is_one_of_three() -> None:
    with pytest.raises(ValueError, match="found 'child'; pass 'link', 'parent' or 'none'"):
        OpenTelemetryEvents(publisher="child")  # type: ignore[arg-type]
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    assert trace_headers(trace.set_span_in_context(span)) == {}
