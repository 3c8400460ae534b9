"""What the multi-process tests share: in the worker processes (each run as ``python -m
tests.integration...``), serving until the queue table is empty; in the tests, reading a
worker's output."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from trinbox import App, SqlBroker


async def serve_until_empty(
    app: App, broker: SqlBroker[Any], table: str, *, poll: float, deadline: float
) -> None:
    """Serve ``app`` until ``table`` (a table, or a table and a WHERE clause) has no row left
    (acked rows are deleted, here or in the other worker, or moved to a dead letter table or
    group), then shut it down; fail after ``deadline`` seconds. A poll, not a wait for an
    event: another process's settlements wake nothing here."""

    async def stop_when_empty() -> None:
        while await broker.database.fetchval(f"SELECT count(*) FROM {table}") != 0:  # noqa: ASYNC110
            await trio.sleep(poll)
        app.shutdown()

    with trio.fail_after(deadline):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            nursery.start_soon(stop_when_empty)


async def serve_when_told(
    app: App,
    broker: SqlBroker[Any],
    table: str,
    *,
    poll: float,
    deadline: float,
    ready: str = "ready",
) -> None:
    """Print ``ready`` (the test reads it), wait for the test's line on stdin (so that every
    worker joins at once), then ``serve_until_empty``."""
    print(ready, flush=True)
    await trio.to_thread.run_sync(sys.stdin.readline)
    await serve_until_empty(app, broker, table, poll=poll, deadline=deadline)


def handled_once(handled: list[int], count: int) -> None:
    """A worker of ``count`` rows handled no more deliveries than there are rows."""
    if len(handled) > count:
        msg = f"handled {len(handled)} deliveries of {count} rows"
        raise AssertionError(msg)


def run_counted(work: Callable[[str, str, str, int], Awaitable[object]], argv: list[str]) -> None:
    """``main`` of a worker taking ``STAND FORM URL COUNT``: run ``work`` and print its result
    as the JSON line the test reads last."""
    stand, form, url, count = argv[1], argv[2], argv[3], int(argv[4])
    result = trio.run(work, stand, form, url, count)
    print(json.dumps(result), flush=True)


@dataclass
class Worker:
    """A worker process and what it wrote; ``ready`` is set at its first line (or at the end
    of its output: a worker that failed early)."""

    process: trio.Process
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    ready: trio.Event = field(default_factory=trio.Event)

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for chunk in self.process.stdout:
            self.out += chunk
            if b"\n" in self.out:
                self.ready.set()
        self.ready.set()

    async def drain(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.err += chunk
