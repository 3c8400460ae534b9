"""What the multi-process tests share: in the worker processes (each run as ``python -m
tests.integration...``), serving until the queue table is empty; in the tests, reading a
worker's output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from trinbox import App, SqlBroker


async def serve_until_empty(
    app: App, broker: SqlBroker[Any], table: str, *, poll: float, deadline: float
) -> None:
    """Serve ``app`` until ``table`` has no row left (acked rows are deleted, here or in the
    other worker, or moved to a dead letter table), then shut it down; fail after
    ``deadline`` seconds. A poll, not a wait for an event: another process's settlements
    wake nothing here."""

    async def stop_when_empty() -> None:
        while await broker.database.fetchval(f"SELECT count(*) FROM {table}") != 0:  # noqa: ASYNC110
            await trio.sleep(poll)
        app.shutdown()

    with trio.fail_after(deadline):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            nursery.start_soon(stop_when_empty)


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
