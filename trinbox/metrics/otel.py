"""OpenTelemetry spans over trinbox's event hook (the ``trinbox[otel]`` extra).

    from trinbox.metrics.otel import OpenTelemetryEvents

    app = App(info, events=[OpenTelemetryEvents()])   # the global tracer provider

Spans follow the OpenTelemetry semantic conventions for messaging (messaging spans, v1.26
and later): ``publish <table>`` (kind PRODUCER, operation type ``send``), ``claim <table>``
(CLIENT, ``receive``), ``process <table>`` (CONSUMER, ``process``; current while the handler
runs, so the handler's own spans are its children) and ``<outcome> <table>`` (CLIENT,
``settle``: ``ack``, ``retry``, ``retry_after``, ``drop``, ``dead_letter``), with
``messaging.system`` = ``trinbox``, ``messaging.destination.name`` (the table),
``messaging.destination.subscription.name`` (the subscription), ``messaging.message.id``
(the row id), ``messaging.batch.message_count`` (claims and batches) and ``error.type`` on
failure. No trace context travels from a publish to its handler yet (there is no headers
column).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, cast

try:
    from opentelemetry import context, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
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
    SettleEvent,
)

__all__ = ["OpenTelemetryEvents"]

SYSTEM = "trinbox"

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


class OpenTelemetryEvents(Events):
    """Spans of publishes, claims, handler runs and settlements.

    ``tracer_provider``: where the spans go (default: the global one). ``empty_claims``:
    also make a span of each claim that found no row (by default they are left out: an idle
    subscription polls, and each poll would be a trace of its own).
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, empty_claims: bool = False
    ) -> None:
        self._tracer: Tracer = trace.get_tracer("trinbox", tracer_provider=tracer_provider)
        self._empty_claims = empty_claims

    def published(self, event: PublishEvent) -> None:
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
        span = self._tracer.start_span(
            f"publish {event.table}",
            kind=SpanKind.PRODUCER,
            start_time=event.start_ns,
            attributes=attributes,
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
        span = self._tracer.start_span(
            f"process {event.source.table}",
            kind=SpanKind.CONSUMER,
            start_time=event.start_ns,
            attributes=attributes,
        )
        # Current while the handler runs (this is its task): its own spans are children.
        token = context.attach(trace.set_span_in_context(span))
        return span, token

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
