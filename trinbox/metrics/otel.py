"""OpenTelemetry spans over trinbox's event hook (the ``trinbox[otel]`` extra).

    from trinbox.metrics.otel import OpenTelemetryEvents

    app = App(info, events=[OpenTelemetryEvents()])   # the global tracer provider

Spans follow the OpenTelemetry semantic conventions for messaging (messaging spans, v1.26
and later): ``publish <table>`` (kind PRODUCER, operation type ``send``), ``claim <table>``
(CLIENT, ``receive``), ``process <table>`` (CONSUMER, ``process``; current while the handler
runs, so the handler's own spans are its children) and ``<outcome> <table>`` (CLIENT,
``settle``: ``ack``, ``retry``, ``retry_after``, ``snooze``, ``drop``, ``dead_letter``), with
``messaging.system`` = ``trinbox``, ``messaging.destination.name`` (the table),
``messaging.destination.subscription.name`` (the subscription), ``messaging.message.id``
(the row id), ``messaging.batch.message_count`` (claims and batches) and ``error.type`` on
failure.

Trace context crosses the queue in the row's headers (a table with a ``Headers`` field): the
publish writes its span's W3C ``traceparent`` and ``tracestate`` there (``propagate``), and the
process span of each delivery is linked to that span (``publisher="link"``, the default: a job
may run long after its request, and a batch has many), made its child (``"parent"``, for a
handler given one row) or neither (``"none"``). The process span's context is set explicitly in the
handler's task, never the one the task inherited from the claim loop (Trio tasks copy their
spawner's context variables). ``trace_headers()`` gives the same headers for a row written
through ``insert_statement``, which no hook sees. A table without a Headers field carries no
context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any, Literal, cast

try:
    from opentelemetry import context, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import (
        Link,
        Span,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        Tracer,
        TracerProvider,
    )
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a subprocess
    msg = (
        "trinbox.metrics.otel needs opentelemetry-api; install trinbox's extra: pip install "
        '"trinbox[otel]"'
    )
    raise ImportError(msg, name=exc.name) from exc

from .._api.events import (
    ClaimEvent,
    Events,
    EventSource,
    HandleEnd,
    HandleEvent,
    PublishEvent,
    PublishStart,
    SettleEvent,
)

__all__ = ["OpenTelemetryEvents", "PublishRelation", "trace_headers"]

SYSTEM = "trinbox"

PublishRelation = Literal["link", "parent", "none"]
"""How a process span refers to the publish span its row's headers name."""

# W3C trace context (traceparent, tracestate) whatever the global propagator: the headers'
# names are what another service reading the table expects.
_W3C = TraceContextTextMapPropagator()

# The publish span this task is writing a row for: made when the publish asks for headers
# (its context goes into them), ended when the publish reports how the write went.
_publishing: ContextVar[Span | None] = ContextVar("trinbox_publishing", default=None)

# The process span that just ended in this task, with its rows: their settlements (which run
# after the handler, in the same task) are its children.
_processed: ContextVar[tuple[tuple[object, ...], Span] | None] = ContextVar(
    "trinbox_processed", default=None
)


def _error_type(error: BaseException) -> str:
    """``error.type``: the exception's fully qualified class name."""
    cls = type(error)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _end_ns(start_ns: int, duration: float) -> int:
    return start_ns + int(duration * 1e9)


def _failed(span: Span, error: BaseException) -> None:
    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))


def _consumer(source: EventSource) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": source.table,
        "messaging.destination.subscription.name": source.subscription,
        "db.system.name": source.system,
    }
    if source.group is not None:
        attributes["trinbox.group"] = source.group
    return attributes


def trace_headers(within: Context | None = None) -> dict[str, str]:
    """The W3C trace context of the current span (or of ``within``) as headers,
    ``traceparent`` and, when there is one, ``tracestate``; empty without a valid span. For
    a row no hook sees: ``broker.insert_statement(Row, message, headers=trace_headers())``."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=within)
    return carrier


def _producer(event: PublishStart | PublishEvent) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.destination.name": event.table,
        "db.system.name": event.system,
        "trinbox.transactional": event.transactional,
    }
    if event.group is not None:
        attributes["trinbox.group"] = event.group
    if event.rows != 1:
        attributes["messaging.batch.message_count"] = event.rows
    return attributes


def _remote(headers: Mapping[str, str]) -> SpanContext | None:
    """The publish span a row's headers name, if they name a valid one."""
    if "traceparent" not in headers:
        return None
    found = trace.get_current_span(_W3C.extract(headers)).get_span_context()
    return found if found.is_valid else None


class OpenTelemetryEvents(Events):
    """Spans of publishes, claims, handler runs and settlements, and trace context carried
    from a publish to its handler in the row's headers.

    ``tracer_provider``: where the spans go (default: the global one). ``empty_claims``:
    also make a span of each claim that found no row (by default they are left out: an idle
    subscription polls, and each poll would be a trace of its own). ``propagate``: write the
    publish span's W3C trace context into the headers of a table with a Headers field (a
    publish that gives a ``traceparent`` of its own keeps it). ``publisher``: how a process
    span refers to the publish span its row's headers name: ``"link"`` (a link to each
    row's; the default), ``"parent"`` (its parent when the handler gets one row; a batch of
    several links each) or ``"none"``.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        empty_claims: bool = False,
        propagate: bool = True,
        publisher: PublishRelation = "link",
    ) -> None:
        if publisher not in ("link", "parent", "none"):
            msg = (
                f"publisher= says how a process span refers to its publish span, found "
                f"{publisher!r}; pass 'link', 'parent' or 'none'"
            )
            raise ValueError(msg)
        self._tracer: Tracer = trace.get_tracer("trinbox", tracer_provider=tracer_provider)
        self._empty_claims = empty_claims
        self._propagate = propagate
        self._publisher: PublishRelation = publisher

    def publishing(self, event: PublishStart) -> Mapping[str, str] | None:
        if not self._propagate:
            return None
        # The span starts now, a child of the publisher's current span, so that its own
        # context is what the row carries.
        span = self._tracer.start_span(
            f"publish {event.table}",
            kind=SpanKind.PRODUCER,
            start_time=event.start_ns,
            attributes=_producer(event),
        )
        _publishing.set(span)
        if "traceparent" in event.headers:
            return None  # the publish carries a context of its own (and its tracestate)
        return trace_headers(trace.set_span_in_context(span))

    def published(self, event: PublishEvent) -> None:
        span = _publishing.get()
        if span is not None:
            _publishing.set(None)
        else:
            span = self._tracer.start_span(
                f"publish {event.table}",
                kind=SpanKind.PRODUCER,
                start_time=event.start_ns,
                attributes=_producer(event),
            )
        if event.error is not None:
            _failed(span, event.error)
        span.end(end_time=_end_ns(event.start_ns, event.duration))

    def claimed(self, event: ClaimEvent) -> None:
        if event.count == 0 and event.error is None and not self._empty_claims:
            return
        attributes = _consumer(event.source)
        attributes["messaging.operation.type"] = "receive"
        attributes["messaging.operation.name"] = "claim"
        attributes["messaging.batch.message_count"] = event.count
        attributes["trinbox.chained"] = event.chained
        span = self._tracer.start_span(
            f"claim {event.source.table}",
            kind=SpanKind.CLIENT,
            start_time=event.start_ns,
            attributes=attributes,
        )
        if event.error is not None:
            _failed(span, event.error)
        span.end(end_time=_end_ns(event.start_ns, event.duration))

    def handle_started(self, event: HandleEvent) -> object:
        attributes = _consumer(event.source)
        attributes["messaging.operation.type"] = "process"
        attributes["messaging.operation.name"] = "process"
        if len(event.row_ids) == 1:
            attributes["messaging.message.id"] = str(event.row_ids[0])
        else:
            attributes["messaging.batch.message_count"] = len(event.row_ids)
        if event.attempt is not None:
            attributes["trinbox.attempt"] = event.attempt
        parent, links = self._relation(event.headers)
        span = self._tracer.start_span(
            f"process {event.source.table}",
            context=parent,
            kind=SpanKind.CONSUMER,
            start_time=event.start_ns,
            attributes=attributes,
            links=links,
        )
        # Current while the handler runs (this is its task), over the delivery's own context,
        # never the one the task copied from the claim loop: its own spans are children.
        token = context.attach(trace.set_span_in_context(span, parent))
        return span, token

    def _relation(self, headers: Sequence[Mapping[str, str]]) -> tuple[Context, list[Link]]:
        """A process span's parent context (an empty one: a root) and its links, from the
        headers of its rows."""
        if self._publisher == "none":
            return Context(), []
        remote = [found for h in headers if (found := _remote(h)) is not None]
        if self._publisher == "parent" and len(headers) == 1 and remote:
            return _W3C.extract(headers[0], context=Context()), []
        return Context(), [Link(found) for found in remote]

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        if not isinstance(state, tuple):
            return
        # What handle_started returned: the span and the context token it attached.
        span, token = cast("tuple[Span, Token[Context]]", state)
        context.detach(token)
        if end.error is not None:
            span.record_exception(end.error)
            _failed(span, end.error)
        else:
            span.set_attribute("trinbox.outcomes", list(end.outcomes))
        span.end(end_time=_end_ns(event.start_ns, end.duration))
        _processed.set((event.row_ids, span))

    def settled(self, event: SettleEvent) -> None:
        attributes = _consumer(event.source)
        attributes["messaging.operation.type"] = "settle"
        attributes["messaging.operation.name"] = event.outcome
        attributes["messaging.message.id"] = str(event.row_id)
        if event.batch > 1:
            attributes["messaging.batch.message_count"] = event.batch
        parent = None
        processed = _processed.get()
        if processed is not None and event.row_id in processed[0]:
            parent = trace.set_span_in_context(processed[1])
        span = self._tracer.start_span(
            f"{event.outcome} {event.source.table}",
            context=parent,
            kind=SpanKind.CLIENT,
            start_time=event.start_ns,
            attributes=attributes,
        )
        if event.error is not None:
            _failed(span, event.error)
        span.end(end_time=_end_ns(event.start_ns, event.duration))
