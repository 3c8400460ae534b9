"""A relay process for the outbox tests: ``python -m tests.integration.outbox_relay_process
STAND URL RECEIVER MODE``. It relays ``order_outbox`` (outbox_kit.OrderEvents) to the HTTP
receiver at RECEIVER, one record at a time, under a lease of two seconds.

MODE ``forever``: print ``ready`` once serving, and serve until killed (the test kills it with
SIGKILL mid-send). MODE ``until-sent``: print ``ready``, wait for the test's line on stdin,
serve until no record is left unsent, then print what this process sent as a JSON line."""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, SqlBroker
from trinbox.outbox import Record, relay

from .http_sink import post_to
from .outbox_kit import OrderEvents
from .worker_kit import serve_when_told

LEASE = 2.0
UNSENT = "order_outbox WHERE processed_at IS NULL"


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    options: dict[str, Any] = {"poll_interval": 0.05, "lease": LEASE}
    if stand == "sqlite":
        return SqlBroker.sqlite(url, **options)
    if stand == "postgres":
        return SqlBroker.postgres(url, **options)
    return SqlBroker.mysql(url, **options)


async def main(stand: str, url: str, receiver: str, mode: str) -> None:
    broker = make_broker(stand, url)
    sent: list[int] = []
    post = post_to(receiver)

    async def to_receiver(record: Record) -> None:
        await post(record)
        sent.append(int(str(record.id)))

    to_http = relay(InboxQueue(OrderEvents, "webhook"))(to_receiver)
    app = App(AppInfo("relay"), grace=1.0)
    app.include(broker, to_http)
    if mode == "forever":
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            print("ready", flush=True)
        return
    await serve_when_told(app, broker, UNSENT, poll=0.05, deadline=90)
    print(json.dumps({"sent": sent}), flush=True)


if __name__ == "__main__":
    stand, url, receiver, mode = sys.argv[1:5]
    trio.run(main, stand, url, receiver, mode)
