"""A subscription's claim loop: claims while a worker is free, waits its poll interval or a wake
when the queue ran dry, and hands what it claimed to the delivery runner.

A claim's round trips run shielded (trinbox._bounds.CLAIM), so a cancel never cuts one halfway:
a lease claim cut after its stamps committed would leave rows leased, with an attempt spent,
that no handler saw. When the subscription stops, claims in flight get
:data:`~trinbox._bounds.RELEASE` more at most, and the rows they return are released, not
handled.
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

import trio

from .._bounds import CLAIM, CLAIM_ERROR_WAIT, RELEASE, within
from .._drivers._base import Pool
from .._errors import TrinboxError
from .._forms._base import Claimed, ClaimForm, Delivery
from .events import ClaimEvent, EventBus, EventSource, now_ns
from .statistics import Fields
from .wake import Permit

if TYPE_CHECKING:
    from .deliveries import DeliveryRunner

__all__ = ["ClaimLoop"]

logger = logging.getLogger("trinbox.claim")


class ClaimLoop:
    """Claims for one subscription, one claim per free worker at most (REFERENCE.md §3.1): a
    second claim runs beside the first only where the dialect allows claims side by side, the
    last claim found rows, and the pool has two connections to spare."""

    def __init__(
        self,
        form: ClaimForm,
        runner: DeliveryRunner,
        *,
        slots: trio.Semaphore,
        permit: Permit,
        poll: float,
        per_claim: int,
        batch: bool,
        side_by_side: bool,
        pool: Pool,
        where: str,
        source: EventSource,
        events: EventBus | None,
    ) -> None:
        self._form = form
        self._runner = runner
        self._slots = slots
        self._permit = permit
        self._poll = poll
        self._per_claim = per_claim
        self._batch = batch
        # A claim may feed every free worker at once, unless it is one transaction (row
        # lock); a batch is one unit.
        self._spread = not batch and form.traits.feeds_every_worker
        self._side_by_side = side_by_side
        self._pool = pool
        self.where = where
        self._scope = trio.CancelScope()  # around the loop, not its claims
        self._in_flight: set[trio.CancelScope | within] = set()  # the bounds of claims running
        self._claim_ended = trio.Event()
        self.stopped = False
        # When the last claim ran dry (trio time): the next one waits the poll interval from
        # then, or a wake. ``None``: rows were found, claim on.
        self._dry_at: float | None = None
        self._failed_at: float | None = None  # when the last claim failed
        # Heap: when rows this loop retried come due, and no claim has begun since.
        self._due: list[float] = []
        self._waiting: trio.CancelScope | None = None  # the wait for rows, while it runs
        self.found_rows = False  # the last claim took all it asked for: more may be due
        self.idle = False
        self._idle_changed = trio.Event()
        self.claims = 0
        self.empty_claims = 0
        self.failed_claims = 0
        self.claimed = 0
        self._source = source
        self._events = events
        self._fields = Fields(source.subscription, source.table)

    async def run(self) -> None:
        """Claim until cancelled or stopped; claiming stops the moment either arrives."""
        async with trio.open_nursery() as claims:
            try:
                with self._scope:
                    await self._loop(claims)
            finally:
                # Before the nursery waits for the claims in flight: they learn at once.
                self.stop()

    async def _loop(self, claims: trio.Nursery) -> None:
        while True:
            await self._slots.acquire()
            try:
                await self._wait_turn()
            except BaseException:
                self._slots.release()
                raise
            slots = 1
            if self._spread:
                while self._slots.value > 0:
                    self._slots.acquire_nowait()
                    slots += 1
            scope = trio.CancelScope()  # replaced by the claim's bound when it runs
            self._in_flight.add(scope)
            claims.start_soon(self._claim, slots, scope)

    def stop(self) -> None:
        """Stop claiming: claims in flight get RELEASE more at most; one cut then is released
        as a drop is, its clean-ups within RELEASE more."""
        self.stopped = True
        self._scope.cancel()
        deadline = trio.current_time() + RELEASE
        for scope in self._in_flight:
            if isinstance(scope, within):
                scope.shorten(deadline, release=RELEASE)
            else:  # a claim not begun yet: it sees `stopped`
                scope.deadline = min(scope.deadline, deadline)

    async def _wait_turn(self) -> None:
        while not self._may_claim():
            await self._claim_ended.wait()
        if self._failed_at is not None:
            await trio.sleep_until(self._failed_at + CLAIM_ERROR_WAIT)
            self._failed_at = None
        if self._dry_at is not None:
            await self._wait_for_rows(self._dry_at)

    def _may_claim(self) -> bool:
        if not self._in_flight:
            return True
        # One claim probes until one takes rows: at first, and after one ran dry or failed.
        if not self._side_by_side or not self.found_rows:
            return False
        return self._pool.spare >= 2

    async def _wait_for_rows(self, dry_at: float) -> None:
        """The last claim ran dry: wait out the poll interval counted from then, or a wake."""
        self._set_idle(True)
        try:
            now = trio.current_time()
            came_due = False
            while self._due and self._due[0] <= now:
                heapq.heappop(self._due)
                came_due = True
            if came_due:
                return  # a retried row came due since the claim ran dry: claim at once
            until = dry_at + self._poll
            if self._due:
                until = min(until, self._due[0])
            with trio.move_on_at(until) as self._waiting:
                await self._permit.wait()
        finally:
            self._waiting = None
            self._dry_at = None
            self._set_idle(False)

    def wake(self) -> None:
        """End the wait for rows now (or the next one, if none runs): rows may be claimable."""
        self._permit.set()

    def due_in(self, seconds: float) -> None:
        """A row this subscription retried comes due in ``seconds``: the wait for rows ends
        then, not a poll interval later."""
        due = trio.current_time() + seconds
        heapq.heappush(self._due, due)
        if self._waiting is not None:
            self._waiting.deadline = min(self._waiting.deadline, due)

    def _set_idle(self, idle: bool) -> None:
        self.idle = idle
        self._idle_changed.set()
        self._idle_changed = trio.Event()

    async def wait_idle(self) -> None:
        """Wait until the loop waits for its poll interval or a wake."""
        while not self.idle:
            await self._idle_changed.wait()

    async def _claim(self, slots: int, placeholder: trio.CancelScope) -> None:
        limit = slots * self._per_claim if self._spread else self._per_claim
        self._in_flight.discard(placeholder)
        if self.stopped:  # stopped before this claim began: it never does
            self._runner.give_slots(slots)
            return
        deliveries: Claimed | None = None
        error: TrinboxError | None = None
        timing = None if self._events is None else (now_ns(), time.perf_counter())
        started = trio.current_time()
        with within(CLAIM) as bound:
            self._in_flight.add(bound)
            try:
                deliveries = await self._form.claim(limit)
            except TrinboxError as exc:
                error = exc
                self._fields.log(
                    logger, logging.WARNING, "a claim failed; next claim in 1 s", exc_info=True
                )
            finally:
                self._in_flight.discard(bound)
        if bound.cancelled_caught:
            self._fields.log(logger, logging.WARNING, "a claim ran out of time; next claim in 1 s")
        self.record(deliveries, limit, False, timing, error)
        if deliveries is None:
            self._runner.give_slots(slots)
            self.claim_failed()
        else:
            units = self._units(deliveries)
            self._runner.give_slots(slots - len(units))
            try:
                self.after_claim(deliveries, started=started)
            except BaseException:
                await self._runner.drop(deliveries)  # never a row claimed and lost
                raise
            # Outside the claim's bound: the handlers must not inherit its deadline.
            await self._runner.start(units)
        self._claim_ended.set()
        self._claim_ended = trio.Event()

    def _units(self, deliveries: Claimed) -> list[list[Delivery]]:
        if self._batch:
            return [list(deliveries)] if deliveries else []
        return [[d] for d in deliveries]

    def record(
        self,
        deliveries: Claimed | None,
        limit: int,
        chained: bool,
        timing: tuple[int, float] | None,
        error: TrinboxError | None,
    ) -> None:
        """Count a claim (``deliveries`` None: it failed) and report it to the hooks."""
        self.claims += 1
        if deliveries is None:
            self.failed_claims += 1
        else:
            self.claimed += len(deliveries)
        if timing is not None and self._events is not None:
            start, t0 = timing
            self._events.claimed(
                ClaimEvent(
                    self._source,
                    0 if deliveries is None else len(deliveries),
                    limit,
                    chained,
                    start,
                    time.perf_counter() - t0,
                    error,
                )
            )

    def after_claim(self, deliveries: Claimed, *, started: float) -> None:
        """A claim that took fewer rows than it asked for ran dry: the next one waits. The
        rows that came due before it ``started`` were there for it to take: their due times
        are forgotten (a queue that never runs dry never waits, where they were)."""
        while self._due and self._due[0] <= started:
            heapq.heappop(self._due)
        if not deliveries:
            self.empty_claims += 1
        self.found_rows = bool(deliveries) and not deliveries.exhausted
        if not self.found_rows:
            self._dry_at = trio.current_time()
            self._set_idle(True)

    def claim_failed(self) -> None:
        """The next claim waits the fixed second, whatever the poll interval."""
        self._failed_at = trio.current_time()
        self.found_rows = False
