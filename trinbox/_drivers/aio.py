"""The trio-asyncio loop the asyncio drivers run on: one per ``App.serve``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["asyncio_loop"]


@asynccontextmanager
async def asyncio_loop(needed: bool) -> AsyncIterator[None]:
    """Open a trio-asyncio loop for the block when ``needed``; every asyncio connection is
    closed inside it."""
    if not needed:
        yield
        return
    import trio_asyncio

    async with trio_asyncio.open_loop():
        yield
