"""The publishing process of the two-process trace context test (test_trace_context.py).

    python -m tests.integration.matrix.trace_process <stand> <form> <url>

publishes one row into the headed table of ``url`` (test_headers.py's, in ``form``) inside a
span ``request``, from an app that only publishes, with the OpenTelemetry SDK exporting into
memory, and prints one JSON object on its last line: the ids of the ``request`` and ``publish``
spans it made (hex), and the publish span's parent.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trinbox import App, AppInfo, SqlBroker
from trinbox.metrics.otel import OpenTelemetryEvents

from .test_headers import HEADED


@dataclass
class Email:
    to: str


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    if stand == "sqlite":
        return SqlBroker.sqlite(url)
    if stand == "postgres":
        return SqlBroker.postgres(url, pool_size=2)
    return SqlBroker.mysql(url, pool_size=2)


async def publish(stand: str, form: str, url: str) -> dict[str, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    broker = make_broker(stand, url)
    app = App(AppInfo("trace-publisher"), events=[OpenTelemetryEvents(provider)])
    app.add_broker(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        with provider.get_tracer("the publisher").start_as_current_span("request"):
            await broker.publish(
                HEADED[form], Email("a@x"), queue="mail", headers={"tenant": "acme"}
            )
        app.shutdown()
    found: dict[str, object] = {}
    for span in exporter.get_finished_spans():
        found[span.name.split()[0]] = {
            "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}",
            "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        }
    return found


if __name__ == "__main__":
    stand, form, url = sys.argv[1:4]
    print(json.dumps(trio.run(publish, stand, form, url)), flush=True)
