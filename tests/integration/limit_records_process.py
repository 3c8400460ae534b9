"""The other process of ``test_limit_records_processes``: ``python -m
tests.integration.limit_records_process STAND URL`` serves ``limit_jobs`` with
``.limit(concurrency=3)`` and limit records, prints ``serving`` once its subscription started,
and shuts down when its stdin closes or gets a line."""

from __future__ import annotations

import sys
from typing import Any

import trio

from trinbox import SqlBroker, subscriber
from trinbox._api.queue import InboxQueue

from .serving import make_app
from .test_limit_records import RECORDS, Job


async def main(stand: str, url: str) -> None:
    maker: Any = {"sqlite": SqlBroker.sqlite, "postgres": SqlBroker.postgres}.get(
        stand, SqlBroker.mysql
    )
    broker: SqlBroker[Any] = maker(url, poll_interval=1.0)
    broker.use_limit_records(RECORDS)

    @subscriber(InboxQueue(Job, "jobs").limit(concurrency=3))
    async def handle(message: str) -> None:
        del message

    app = make_app()
    app.include(broker, handle)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        print("serving", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        app.shutdown()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
