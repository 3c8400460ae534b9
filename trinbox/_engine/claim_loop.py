"""A subscription's claim loop: claims while a worker is free, waits its turn (claim_state.py)
when the last claim ran dry or failed, and hands what it claimed to the delivery runner.

A claim's round trips run shielded (trinbox._bounds.CLAIM), so a cancel never cuts one halfway:
a lease claim cut after its stamps committed would leave rows leased, with an attempt spent,
that no handler saw. When the subscription stops, claims in flight get
:data:`~trinbox._bounds.RELEASE` more at most, and the rows they return are released, not
handled.
"""

from __future__ import annotations

import logging
import time

import trio

from .._api.events import EventBus, EventSource, now_ns
from .._bounds import CLAIM, within
from .._drivers._base import Pool
from .._holders._base import Claimed, ClaimForm, Delivery
from ..errors import TrinboxError
from .claim_state import ClaimState
from .deliveries import DeliveryRunner
from .statistics import Fields

__all__ = ["ClaimLoop"]

logger = logging.getLogger("trinbox.claim")


class ClaimLoop:
    """Claims for one subscription, one claim per free worker at most
    (docs/reference.md#claim-loop): a second claim runs beside the first only where the dialect
    allows claims side by side, the last claim found rows, and the pool has two connections to
    spare."""

    def __init__(
        self,
        form: ClaimForm,
        runner: DeliveryRunner,
        state: ClaimState,
        *,
        slots: trio.Semaphore,
        per_claim: int,
        batch: bool,
        side_by_side: bool,
        pool: Pool,
        source: EventSource,
        events: EventBus | None,
    ) -> None:
        self._form = form
        self._runner = runner
        self._state = state
        self._slots = slots
        self._per_claim = per_claim
        self._batch = batch
        # A claim may feed every free worker at once, unless it is one transaction (row
        # lock); a batch is one unit.
        self._spread = not batch and form.traits.feeds_every_worker
        self._side_by_side = side_by_side
        self._pool = pool
        self._claim_ended = trio.Event()
        self._events = events
        self._fields = Fields(source.subscription, source.table)

    async def run(self) -> None:
        """Claim until cancelled or stopped; claiming stops the moment either arrives."""
        async with trio.open_nursery() as claims:
            try:
                with self._state.scope:
                    await self._loop(claims)
            finally:
                # Before the nursery waits for the claims in flight: they learn at once.
                self._state.stop()

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
            self._state.in_flight.add(scope)
            claims.start_soon(self._claim, slots, scope)

    async def _wait_turn(self) -> None:
        state = self._state
        while True:
            while not self._may_claim():
                await self._claim_ended.wait()
            if state.paused:  # a bool: the claim statement never reads the pauses
                await state.wait_resumed()
                continue
            await state.wait_turn()
            if not state.paused:  # a pause that came while the loop waited for rows
                return

    def _may_claim(self) -> bool:
        if not self._state.in_flight:
            return True
        # One claim probes until one takes rows: at first, and after one ran dry or failed.
        if not self._side_by_side or not self._state.found_rows:
            return False
        return self._pool.spare >= 2

    async def _claim(self, slots: int, placeholder: trio.CancelScope) -> None:
        state = self._state
        limit = slots * self._per_claim if self._spread else self._per_claim
        state.in_flight.discard(placeholder)
        if state.stopped:  # stopped before this claim began: it never does
            self._runner.give_slots(slots)
            return
        deliveries: Claimed | None = None
        error: TrinboxError | None = None
        timing = None if self._events is None else (now_ns(), time.perf_counter())
        started = trio.current_time()
        with within(CLAIM) as bound:
            state.in_flight.add(bound)
            try:
                deliveries = await self._form.claim(limit)
            except TrinboxError as exc:
                error = exc
                self._fields.log(
                    logger, logging.WARNING, "a claim failed; next claim in 1 s", exc_info=True
                )
            finally:
                state.in_flight.discard(bound)
        if bound.cancelled_caught:
            self._fields.log(logger, logging.WARNING, "a claim ran out of time; next claim in 1 s")
        state.record(deliveries, limit, False, timing, error)
        if deliveries is None:
            self._runner.give_slots(slots)
            state.claim_failed()
        else:
            units = self._units(deliveries)
            self._runner.give_slots(slots - len(units))
            try:
                state.after_claim(deliveries, started=started)
            except BaseException:
                await self._runner.release(deliveries)  # never a row claimed and lost
                raise
            # Outside the claim's bound: the handlers must not inherit its deadline.
            await self._runner.start(units)
        self._claim_ended.set()
        self._claim_ended = trio.Event()

    def _units(self, deliveries: Claimed) -> list[list[Delivery]]:
        if self._batch:
            return [list(deliveries)] if deliveries else []
        return [[d] for d in deliveries]
