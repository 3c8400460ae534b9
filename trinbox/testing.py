"""Helpers for testing services built on trinbox with pytest-trio.

async def test_mail(nursery, tmp_path):
    app = make_app(f"sqlite:///{tmp_path}/q.db", clock=TrioClock())
    await nursery.start(app.serve)
    await broker.publish(...)
    await settled(app, send_mail, 1)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import trio

from ._runtime.app import App
from ._runtime.queue import Subscriber

__all__ = ["TrioClock", "settled"]


class TrioClock:
    """A broker clock that follows Trio's clock: ``start`` plus ``trio.current_time()``.

    With ``trio.testing.MockClock`` (pytest-trio's ``autojump_clock``), a test that sleeps
    moves the database's "now" too, so leases run out and delayed retries fall due at once.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._start + timedelta(seconds=trio.current_time())


async def settled(app: App, subscriber: Subscriber[Any, Any], count: int) -> None:
    """Wait until ``count`` deliveries of ``subscriber`` have been settled or released."""
    await app.subscription(subscriber).wait_finished(count)
