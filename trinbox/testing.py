"""Helpers for testing services built on trinbox with pytest-trio: ``VirtualClock`` (Trio's
clock, as a ``clock`` fixture the test takes), ``TrioClock`` (the broker's clock following it),
``settled`` (wait for deliveries) and ``fire`` (a schedule's tick, now). README.md, "Testing a
service", shows a whole test.

@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()

async def test_mail(nursery, tmp_path, clock):
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db", clock=TrioClock())
    ...
    await nursery.start(app.serve)
    await broker.publish(...)
    await settled(app, send_mail, 1)

Not ``trio.testing.MockClock`` (pytest-trio's ``autojump_clock``): it jumps while a database
call is in flight, so connects and statements run out of their time bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import trio

from ._api.queue import Subscriber
from ._api.routed import RoutedSubscriber
from ._api.schedule import Outcome
from ._drivers._activity import calls_in_flight
from ._engine.app import App

__all__ = ["TrioClock", "VirtualClock", "fire", "idle", "settled"]


class TrioClock:
    """A broker clock that follows Trio's clock: ``start`` plus ``trio.current_time()``.

    With ``VirtualClock`` as Trio's clock, a test that waits moves the broker's "now" too, so
    leases run out and delayed retries fall due without waiting in real time. (Without it the
    broker stamps rows by the system clock, and a delayed retry never falls due in virtual
    time.)
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


async def settled(
    app: App, subscriber: Subscriber[Any, Any] | RoutedSubscriber[Any], count: int
) -> None:
    """Wait until ``count`` deliveries of ``subscriber`` have been settled or released."""
    await app._subscription(subscriber).wait_finished(count)  # pyright: ignore[reportPrivateUsage]


async def idle(app: App, subscriber: Subscriber[Any, Any] | RoutedSubscriber[Any]) -> None:
    """Wait until the claim loop of ``subscriber`` waits for its poll interval or a wake (its
    last claim found fewer rows than it could take)."""
    await app._subscription(subscriber).wait_idle()  # pyright: ignore[reportPrivateUsage]


async def fire(app: App, schedule: str, *, at: datetime) -> Outcome:
    """Fire the tick ``at`` (an aware time the schedule ticks at) of the schedule named
    ``schedule`` of a serving ``app``, now, as its scheduler would: its mark and its row in
    one transaction. ``"published"``, or ``"taken"`` when its mark was there already (the
    scheduler or an earlier ``fire`` had it), or ``"skipped"`` (overlap). A time the schedule
    does not tick at is refused (``ValueError``, naming the next one)."""
    found = app._schedule(schedule)  # pyright: ignore[reportPrivateUsage]
    if at.tzinfo is None:
        msg = f"fire(..., at=) takes an aware datetime, found {at!r}; give it a tzinfo"
        raise ValueError(msg)
    tick = at.astimezone(UTC)
    after = found.when.after(tick - timedelta(microseconds=1))
    if after != tick:
        msg = (
            f"fire(..., {schedule!r}, at=) fires a tick of the schedule ({found.when}), found "
            f"{at.isoformat()}, which is none; fire the next one, "
            f"{after.astimezone(found.when.zone).isoformat()}"
        )
        raise ValueError(msg)
    return await found.fire(tick)
