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

from ._drivers._activity import calls_in_flight
from ._runtime.app import App
from ._runtime.queue import Subscriber

__all__ = ["TrioClock", "VirtualClock", "idle", "settled"]


class TrioClock:
    """A broker clock that follows Trio's clock: ``start`` plus ``trio.current_time()``.

    With ``trio.testing.MockClock`` (pytest-trio's ``autojump_clock``), a test that sleeps
    moves the database's "now" too, so leases run out and delayed retries fall due at once.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._start + timedelta(seconds=trio.current_time())


class VirtualClock(trio.abc.Clock):
    """Virtual time for tests of services that talk to a database: whenever every task waits
    and no database call is in flight, time jumps to the next deadline.

    ``trio.testing.MockClock(autojump_threshold=0)`` jumps while a database call runs on a
    worker thread or a socket, which fires timeouts around those calls; this clock waits for
    the database instead. Pass it to ``trio.run(..., clock=VirtualClock())`` or return it
    from a pytest-trio fixture.
    """

    def __init__(self) -> None:
        self._time = 0.0

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._time

    def deadline_to_sleep_time(self, deadline: float) -> float:
        if deadline <= self._time:
            return 0.0
        if calls_in_flight():
            # Real time for the database; its answer wakes the run loop earlier.
            return 0.01
        self._time = deadline
        return 0.0


async def settled(app: App, subscriber: Subscriber[Any, Any], count: int) -> None:
    """Wait until ``count`` deliveries of ``subscriber`` have been settled or released."""
    await app._subscription(subscriber).wait_finished(count)


async def idle(app: App, subscriber: Subscriber[Any, Any]) -> None:
    """Wait until the claim loop of ``subscriber`` waits for its poll interval or a wake (its
    last claim found fewer rows than it could take)."""
    await app._subscription(subscriber).wait_idle()
