"""What a subscription's claims share, whoever runs them: its claim loop (claim_loop.py), and the
settlements that claim their worker's next rows in the same round trip (deliveries.py).

Both report each claim here (counted, and told to the hooks), and both read here whether
claiming goes on and whether claims find rows. The claim loop waits here for its next turn:
a second after a claim failed, or, after one ran dry, the poll interval, a wake, or a row this
subscription retried coming due, whichever comes first.
"""

from __future__ import annotations

import heapq
import time

import trio

from .._api.events import ClaimEvent, EventBus, EventSource
from .._bounds import CLAIM_ERROR_WAIT, RELEASE, within
from .._broker.pausing import PauseGate
from .._broker.wake import Permit
from .._holders._base import Claimed
from ..errors import TrinboxError

__all__ = ["ClaimState", "Timing"]

Timing = tuple[int, float]
"""An event's start: wall time (ns) and ``perf_counter``, read only when there are hooks."""


class ClaimState:
    """The claiming of one subscription: whether it goes on, the claims in flight, when the
    next may run, and the counts."""

    def __init__(
        self,
        *,
        permit: Permit,
        gate: PauseGate,
        poll: float,
        source: EventSource,
        events: EventBus | None,
    ) -> None:
        self._permit = permit
        self._gate = gate
        self._poll = poll
        self.stopped = False
        self.scope = trio.CancelScope()  # around the claim loop, not its claims
        self.in_flight: set[trio.CancelScope | within] = set()  # the bounds of claims running
        # When the last claim ran dry (trio time): the next one waits the poll interval from
        # then, or a wake. ``None``: rows were found, claim on.
        self._dry_at: float | None = None
        self._failed_at: float | None = None  # when the last claim failed
        # Heap: when rows this subscription retried come due, and no claim has begun since.
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

    def stop(self) -> None:
        """Stop claiming: the claim loop ends, claims in flight get RELEASE more at most (what
        one cut then took is released, its clean-ups within RELEASE more), and no settlement
        claims again."""
        self.stopped = True
        self.scope.cancel()
        deadline = trio.current_time() + RELEASE
        for scope in self.in_flight:
            if isinstance(scope, within):
                scope.shorten(deadline, release=RELEASE)
            else:  # a claim not begun yet: it sees `stopped`
                scope.deadline = min(scope.deadline, deadline)

    # -- the next turn --------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the queue is paused (``broker.pause``): no claim begins, neither the claim
        loop's nor a settlement's."""
        return self._gate.paused

    async def wait_resumed(self) -> None:
        """Wait out a pause (idle meanwhile); once it ends the next claim runs at once."""
        self._set_idle(True)
        try:
            await self._gate.wait_resumed()
        finally:
            self._set_idle(False)
        self.wake()

    async def wait_turn(self) -> None:
        """Wait out what the last claim asks of the next: a second after a failure, the poll
        interval (or a wake) after it ran dry."""
        if self._failed_at is not None:
            await trio.sleep_until(self._failed_at + CLAIM_ERROR_WAIT)
            self._failed_at = None
        if self._dry_at is not None:
            await self._wait_for_rows(self._dry_at)

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
        """Wait until the claim loop waits for its poll interval or a wake."""
        while not self.idle:
            await self._idle_changed.wait()

    # -- what claims found ------------------------------------------------------------------------

    def record(
        self,
        deliveries: Claimed | None,
        limit: int,
        chained: bool,
        timing: Timing | None,
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
