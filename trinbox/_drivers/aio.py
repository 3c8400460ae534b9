"""The trio-asyncio loop the asyncio drivers run on: one per ``App.serve``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["asyncio_loop"]

logger = logging.getLogger("trinbox.drivers.asyncio")


def _log_asyncio_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Log what asyncio reports out of band ("Future exception was never retrieved", …).

    trio-asyncio's own handler re-raises it into the loop's nursery, which would take the
    whole ``App.serve`` down for driver-internal noise: asyncpg leaves such a future behind
    when a cancel cuts a connect short.
    """
    exc = context.get("exception")
    message = context.get("message") or "unhandled error in the asyncio loop"
    logger.warning("asyncio: %s", message, exc_info=exc if isinstance(exc, BaseException) else None)


@asynccontextmanager
async def asyncio_loop(needed: bool) -> AsyncGenerator[None, None]:
    """Open a trio-asyncio loop for the block when ``needed``; every asyncio connection is
    closed inside it."""
    if not needed:
        yield
        return
    import trio_asyncio

    raised: list[BaseException] = []
    try:
        async with trio_asyncio.open_loop() as loop:
            loop.set_exception_handler(_log_asyncio_error)
            try:
                yield
            except BaseException as exc:
                raised.append(exc)
                raise
    except BaseExceptionGroup as group:
        if not raised or group.split(lambda e: e is raised[0])[1] is not None:
            raise
    # The loop's nurseries wrap what the block raised in exception groups; alone in them, it
    # leaves as the block raised it (as without the loop, on SQLite): `except SchemaError`
    # catches a startup refusal on every database. Raised here, outside the handler of the
    # group, so that the group does not become its context.
    if raised:
        raise raised[0]
