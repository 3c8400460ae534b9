"""What the worker processes of the multi-process tests share (each is run as
``python -m tests.integration...``): serving until the queue table is empty."""

from __future__ import annotations

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
