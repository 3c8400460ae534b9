"""``SubscriptionStatistics``: a frozen snapshot of one subscription's counters, as Trio's own
``statistics()`` methods return; ``SharedStatistics``, the snapshots a serving app publishes
for readers on other threads; and the log-line fields every subscription event carries."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from .._api.schedule import ScheduleStatistics
from ..errors import TrinboxError

__all__ = ["SHARE_EVERY", "Fields", "SharedStatistics", "SubscriptionStatistics"]

SHARE_EVERY = 1.0
"""How often a serving app publishes its statistics for readers on other threads (seconds)."""


@dataclass(frozen=True, slots=True)
class SubscriptionStatistics:
    """One subscription's counters since ``serve`` began (``App.statistics()``).

    Every delivery claimed is in work until it is settled (``acked``, ``retried``,
    ``retried_after``, ``snoozed``, ``dropped``, ``dead_lettered``: the step that took
    effect) or
    released (returned unsettled: a handler cancelled or crashed, a settlement that failed, a
    shutdown); ``finished`` counts both, as ``trinbox.testing.settled`` waits for them.
    """

    subscriber: str
    """The handler's qualified name."""
    queue: str
    """The subscription's name (the group it reads, for tables with a Group field)."""
    table: str
    """The table's qualified name."""
    group: str | None
    serving: bool
    """Whether the subscription is open and has not begun to stop."""
    paused: bool
    """Whether its queue is paused (``broker.pause``), as this process last read the pause
    table: it claims nothing meanwhile, and its deliveries in work finish."""
    claimed: int
    """Deliveries claimed (by the claim loop and by settlements claiming their next row)."""
    in_work: int
    """Deliveries claimed and not yet settled or released."""
    finished: int
    """Deliveries settled or released, in all."""
    acked: int
    retried: int
    retried_after: int
    snoozed: int
    """Deliveries put back by ``HandlerOutcome.snooze``, no attempt spent (not retries)."""
    dropped: int
    dead_lettered: int
    cancelled: int
    """Deliveries whose handler ``broker.cancel`` cancelled, settled as a drop settles them
    (never retried; not counted as dropped, nor as released as on shutdown)."""
    released: int
    """Deliveries returned to the queue unsettled."""
    settle_failures: int
    """Settlements that did not take effect (each delivery was then released)."""
    settle_errors: tuple[TrinboxError, ...]
    """The last ten of them, oldest first."""
    claims: int
    """Claims run (the claim loop's and chained ones)."""
    empty_claims: int
    """Claims that found no row."""
    failed_claims: int
    lease_extensions: int
    """Leases moved forward by the lease keeper (lease form)."""
    leases_lost: int
    """Leases the keeper found gone (another claim took the row)."""
    locks_released: int
    """Row holds released by shutdown."""
    connections_closed: int
    """Sessions closed because their release was not confirmed."""
    pruned_processed: int = 0
    """Finished rows this process's retention deleted (``Mount.retain(processed=...)``)."""
    pruned_dead_letters: int = 0
    """Dead letters this process's retention deleted (``Mount.retain(dead_letters=...)``)."""
    cancel_polls: int = 0
    """Reads of the cancel request table (``broker.use_cancel_requests``), made only while
    the subscription had rows in work."""
    failed_cancel_polls: int = 0
    cancel_requests_served: int = 0
    """Requests of other processes that cancelled a handler here."""
    freed_slot_notifies: int = 0
    """NOTIFYs this process sent on the subscription's table and group (``listen_notify``)
    that its limited queue's rows finished, so claims elsewhere take the freed slots."""
    limit_record_writes: int = 0
    """Writes of this process's limit record (``broker.use_limit_records``): at startup,
    then every 3 poll intervals."""
    failed_limit_record_writes: int = 0
    progress: tuple[tuple[object, float | None], ...] = ()
    """``(row id, fraction)`` of each delivery in work whose handler takes ``keys.Progress``,
    its latest ``progress.set`` (``None`` before the first), in the order they started."""


class SharedStatistics:
    """An app's statistics as its Trio side last published them, for a reader on another
    thread (a metrics exporter's). ``latest`` is one tuple of frozen snapshots of its
    subscriptions, ``schedules`` of its schedules, each taken in one step of the Trio thread
    and replaced whole: every :data:`SHARE_EVERY` seconds while the app serves, and once more
    when its subscriptions have stopped. A reader takes the reference and reads what it
    holds; nothing it reaches is live or changes under it. Before the first ``serve`` both
    are empty."""

    __slots__ = ("latest", "schedules")

    def __init__(self) -> None:
        self.latest: tuple[SubscriptionStatistics, ...] = ()
        self.schedules: tuple[ScheduleStatistics, ...] = ()

    @asynccontextmanager
    async def published(
        self,
        read: Callable[[], tuple[SubscriptionStatistics, ...]],
        read_schedules: Callable[[], tuple[ScheduleStatistics, ...]] = tuple,
    ) -> AsyncGenerator[None]:
        """Publish ``read()`` and ``read_schedules()`` now and every :data:`SHARE_EVERY`
        seconds while the block runs, and once more as it ends."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._refresh, read, read_schedules)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
                self.latest = read()
                self.schedules = read_schedules()

    async def _refresh(
        self,
        read: Callable[[], tuple[SubscriptionStatistics, ...]],
        read_schedules: Callable[[], tuple[ScheduleStatistics, ...]],
    ) -> None:
        while True:
            self.latest = read()
            self.schedules = read_schedules()
            await trio.sleep(SHARE_EVERY)


class Fields:
    """What a subscription's log lines carry, in the message and as ``extra``: the attributes
    ``subscription``, ``table``, ``row_id`` and ``attempt`` (``None`` where an event is about
    no row)."""

    __slots__ = ("subscription", "table")

    def __init__(self, subscription: str, table: str) -> None:
        self.subscription = subscription
        self.table = table

    def log(
        self,
        logger: logging.Logger,
        level: int,
        message: str,
        *,
        row: bool = False,
        row_id: object = None,
        attempt: int | None = None,
        exc_info: BaseException | bool | None = None,
    ) -> None:
        """One line: ``message [subscription=... table=... row_id=... attempt=...]`` (the
        row's fields when ``row``)."""
        if not logger.isEnabledFor(level):
            return
        where = f"subscription={self.subscription} table={self.table}"
        if row:
            where += f" row_id={row_id!r} attempt={attempt}"
        extra = {
            "subscription": self.subscription,
            "table": self.table,
            "row_id": row_id,
            "attempt": attempt,
        }
        logger.log(level, "%s [%s]", message, where, extra=extra, exc_info=exc_info, stacklevel=2)
