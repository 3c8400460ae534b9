"""An app served for the length of a block, for every integration test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from trinbox import App, AppInfo


def make_app(grace: float = 5.0) -> App:
    return App(AppInfo("test"), grace=grace)


@asynccontextmanager
async def serving(app: App) -> AsyncIterator[App]:
    """Serve ``app`` for the block, then shut it down gracefully."""
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        try:
            yield app
        finally:
            app.shutdown()
