"""A relay over a service's own record table, through its own statements (custom events): the
reference's ``custom(fetch, ack, retry, discard, recover)``, for an outbox table trinbox did
not declare (one an ORM or another library writes, or one whose shape a migration fixed).

    relay = custom_relay(broker, ShopEvents(), to_kafka, workers=4)
    app.background(relay)

The service's ``OutboxEvents`` say how to take records (``fetch``: select what is due and not
taken, mark it taken, in one transaction), how to settle one (``ack`` once the sink returned,
``retry`` after a failed send, ``discard`` when it is given up) and how to give back records a
relay took and never settled (``recover``: a process that died mid-send). Each event runs in a
transaction of its own (its ``Tx``, as ``broker.transaction()`` gives; on SQLite it takes the
write lock at its BEGIN), committed when it returns.

The relay runs in ``serve``'s nursery as a background task: ``recover`` once before it reports
started (a missing table stops the startup), then claims up to ``workers`` records at a time,
hands each to the sink, settles it by the sink's outcome, polls on Trio's clock when a fetch
found fewer records than it could take, and calls ``recover`` again every ``recover_every``.
At least once: a record whose send was cancelled (shutdown) or whose settlement failed stays
taken until a ``recover`` gives it back; a settlement runs shielded from the shutdown (within
``RELEASE``), so a send that returned is settled.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

import trio

from .._api.backoff import DEFAULT_BACKOFF, Backoff, require_backoff
from .._api.handles import AnyTx
from .._api.outcome import HandlerOutcome
from .._api.relay import Record, Sink
from .._bounds import RELEASE, within
from .._broker.broker import SqlBroker
from .._util import positive_duration

__all__ = ["CustomRelay", "CustomRelayStatistics", "OutboxEvents", "custom_relay"]

logger = logging.getLogger("trinbox.relay")

T = TypeVar("T")


class OutboxEvents(Protocol):
    """A service's own statements on its own record table, each run in a transaction of its
    own (``tx``: ``execute``, ``fetch``, ``fetchval`` in the driver's placeholders)."""

    async def fetch(self, tx: AnyTx, limit: int) -> Sequence[Record]:
        """Take at most ``limit`` records that are due and not taken: mark them taken (a
        ``taken_at`` stamp, say) and return them. Lock what it reads (``FOR UPDATE SKIP
        LOCKED`` on PostgreSQL and MySQL) so relays in other processes take others."""
        ...

    async def ack(self, tx: AnyTx, record: Record) -> None:
        """The sink returned: mark ``record`` processed, or delete it."""
        ...

    async def retry(self, tx: AnyTx, record: Record, delay: timedelta) -> None:
        """The send failed: make ``record`` due again after ``delay``, no longer taken, with
        one attempt more."""
        ...

    async def discard(self, tx: AnyTx, record: Record) -> None:
        """``record`` is given up (the sink dropped it, or its attempts are spent): mark it so
        no fetch takes it again."""
        ...

    async def recover(self, tx: AnyTx) -> int:
        """Give back records taken longer ago than any send takes (their relay died): make
        them fetchable again; how many."""
        ...


@dataclass
class CustomRelayStatistics:
    """What a custom relay did since it started: records sent (acked), retried, discarded,
    given back by ``recover``, and events that failed (a fetch, or a settlement)."""

    sent: int = 0
    retried: int = 0
    discarded: int = 0
    recovered: int = 0
    failed_events: int = 0


_EVENTS = ("fetch", "ack", "retry", "discard", "recover")


def custom_relay(
    broker: SqlBroker[Any],
    events: OutboxEvents,
    sink: Sink,
    *,
    label: str = "custom relay",
    workers: int = 1,
    poll_interval: timedelta | float | None = None,
    backoff: Backoff | None = None,
    max_attempts: int | None = None,
    recover_every: timedelta | float = timedelta(minutes=1),
) -> CustomRelay:
    """A relay of ``events``' records to ``sink``, on ``broker``'s pool, as a background task
    (``app.background(custom_relay(...))``): ``workers`` records in work at once, a failed send
    retried after ``backoff`` (the queues' default) until ``max_attempts`` (then discarded;
    ``None``: for ever), ``poll_interval`` (the broker's) between fetches that found fewer
    records than they could take, ``recover`` every ``recover_every``."""
    where = f"custom_relay({label!r})"
    missing = [name for name in _EVENTS if not callable(getattr(events, name, None))]
    if missing:
        msg = (
            f"{where}: custom events are an object with async methods fetch, ack, retry, "
            f"discard and recover, found {type(events).__name__} without "
            f"{', '.join(missing)}; define them (trinbox.outbox.OutboxEvents says how)"
        )
        raise TypeError(msg)
    attempts = 1 if max_attempts is None else max_attempts
    for what, count in (("workers", workers), ("max_attempts", attempts)):
        given: object = count  # untyped callers pass anything
        if not isinstance(given, int) or isinstance(given, bool) or given < 1:
            msg = f"{where}: {what} counts one or more, found {given!r}; pass 1 or more"
            raise ValueError(msg)
    return CustomRelay(
        broker,
        events,
        sink,
        label=label,
        workers=workers,
        poll=positive_duration("a poll interval", poll_interval or broker.poll_interval),
        backoff=require_backoff(backoff) if backoff is not None else DEFAULT_BACKOFF,
        max_attempts=max_attempts,
        recover_every=positive_duration("a recover interval", recover_every),
    )


class CustomRelay:
    """A relay over custom events: an async callable for ``app.background``."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        events: OutboxEvents,
        sink: Sink,
        *,
        label: str,
        workers: int,
        poll: timedelta,
        backoff: Backoff,
        max_attempts: int | None,
        recover_every: timedelta,
    ) -> None:
        self._broker = broker
        self._events = events
        self._sink = sink
        self.label = label
        self._workers = workers
        self._poll = poll.total_seconds()
        self._backoff = backoff
        self._max_attempts = max_attempts
        self._recover_every = recover_every.total_seconds()
        self._in_work = 0
        self._freed = trio.Event()
        self._settled = 0
        self._settled_changed = trio.Event()
        self.statistics = CustomRelayStatistics()
        self.__qualname__ = f"custom_relay({label!r})"  # how logs and errors name the task

    async def __call__(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # Records a stopped relay left taken go out first; a failure here stops the startup.
        await self._recover()
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._recovering)
            while True:
                await self._claim_into(nursery)

    async def _claim_into(self, nursery: trio.Nursery) -> None:
        """One fetch into the free workers, then a wait: for a worker (all busy), or the poll
        interval (the fetch found fewer than it could take)."""
        while self._in_work >= self._workers:
            await self._freed.wait()
        limit = self._workers - self._in_work
        try:
            records = await self._run("fetch", lambda tx: self._events.fetch(tx, limit))
        except Exception:
            records = ()  # logged; the next poll tries again
        if len(records) > limit:
            logger.warning(
                "%s: fetch returned %d records for a limit of %d; they are all sent",
                self.label,
                len(records),
                limit,
            )
        for record in records:
            self._in_work += 1
            nursery.start_soon(self._send, record)
        if len(records) < limit:
            await trio.sleep(self._poll)
        else:
            await trio.lowlevel.checkpoint()

    async def _send(self, record: Record) -> None:
        try:
            try:
                outcome = await self._sink(record)
            except Exception:
                logger.warning(
                    "%s: the sink raised on record %r (attempt %d)",
                    self.label,
                    record.id,
                    record.attempt,
                    exc_info=True,
                )
                await self._failed(record)
                return
            await self._settle(record, outcome)
        finally:
            self._in_work -= 1
            self._freed.set()
            self._freed = trio.Event()

    async def _settle(self, record: Record, outcome: HandlerOutcome | None) -> None:
        # Shielded, within a bound: a sink that returned as the app shuts down still has its
        # record settled, so a shutdown sends nothing twice that it need not.
        with within(RELEASE):
            await self._settle_now(record, outcome)

    async def _settle_now(self, record: Record, outcome: HandlerOutcome | None) -> None:
        events = self._events
        kind = "ack" if outcome is None else outcome.kind
        try:
            if kind == "ack":
                await self._run("ack", lambda tx: events.ack(tx, record))
                self.statistics.sent += 1
            elif kind == "drop":
                await self._run("discard", lambda tx: events.discard(tx, record))
                self.statistics.discarded += 1
            else:
                assert outcome is not None
                delay = outcome.delay or self._backoff.delay(record.attempt)
                await self._run("retry", lambda tx: events.retry(tx, record, delay))
                self.statistics.retried += 1
        except Exception:
            return  # logged; the record stays taken until a recover gives it back
        self._settled += 1
        self._settled_changed.set()
        self._settled_changed = trio.Event()

    async def wait_settled(self, count: int) -> None:
        """Wait until ``count`` records in all have been sent, retried or discarded (for
        tests, as ``trinbox.testing.settled`` is for subscriptions)."""
        while self._settled < count:
            await self._settled_changed.wait()

    async def _failed(self, record: Record) -> None:
        if self._max_attempts is not None and record.attempt >= self._max_attempts:
            await self._settle(record, HandlerOutcome.drop())
        else:
            await self._settle(record, HandlerOutcome.retry())

    async def _recovering(self) -> None:
        while True:
            await trio.sleep(self._recover_every)
            try:
                await self._recover()
            except Exception:
                continue  # logged; the next round tries again

    async def _recover(self) -> None:
        found = await self._run("recover", self._events.recover)
        if found:
            self.statistics.recovered += found
            logger.info("%s: recover gave back %d taken records", self.label, found)
            self._freed.set()  # not a worker: but the claim loop may look again at once
            self._freed = trio.Event()

    async def _run(self, event: str, run: Callable[[AnyTx], Awaitable[T]]) -> T:
        """``run(tx)`` in a transaction of its own, committed when it returns; an error is
        logged once, counted, and raised."""
        try:
            async with self._broker.read_write_transaction() as tx:
                return await run(tx)
        except Exception:
            self.statistics.failed_events += 1
            logger.warning("%s: the %s event failed", self.label, event, exc_info=True)
            raise
