"""A subscription's delivery runner: decode, run the handler, settle by its outcome, and release
every delivery that ends any other way.

Every way a unit of work ends leaves no row held: a return settles it; an exception (or a
``Cancelled`` that no scope of trinbox's sent) is a failure settled by the failure policy; a
cancel of the handler, ``KeyboardInterrupt`` or ``SystemExit`` drops it, and so does a crash of
trinbox's own code (the unit's ``finally``). A drop releases its deliveries side by side within
one bound (trinbox._bounds.RELEASE), counted from the drop; a release that runs out of it
abandons the delivery's connection, and the server frees its locks.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import trio

from .._bounds import RELEASE, SETTLE, within
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter
from .._errors import SettlementError, TrinboxError
from .._forms._base import (
    Ack,
    Chained,
    Claimed,
    ClaimForm,
    DeadLetterStep,
    Delivery,
    Drop,
    Retry,
    RetryAt,
    Step,
)
from .backoff import Backoff
from .broker import SqlBroker
from .codecs import DecodeError
from .handler import HandlerPlan, decode_message
from .handles import Attempt, Tx
from .outcome import FailurePolicy, HandlerOutcome
from .subscribers import Subscriber

if TYPE_CHECKING:
    from .claim_loop import ClaimLoop

__all__ = ["DeliveryRunner"]

logger = logging.getLogger("trinbox")

KEPT_ERRORS = 10  # settlement errors kept for inspection; the count goes on
LATEST_RETRY = datetime(9999, 1, 1, tzinfo=UTC)  # MySQL DATETIME ends in 9999


def _is_failure(exc: BaseException) -> bool:
    """Whether a handler's exception is a failure for the failure policy: an ``Exception``,
    or a ``Cancelled`` (alone or in a group) while this task is not being cancelled, which a
    handler re-raised outside the scope that caught it. Anything else ends the delivery."""
    if isinstance(exc, Exception):
        return True
    only_cancels = isinstance(exc, trio.Cancelled) or (
        isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
    )
    return only_cancels and trio.current_effective_deadline() != -math.inf


class DeliveryRunner:
    """Runs the units of work of one subscription in its handlers' nursery."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        subscriber: Subscriber[Any, Any],
        form: ClaimForm,
        spec: TableSpec,
        plan: HandlerPlan,
        *,
        slots: trio.Semaphore,
        dead_letter: DeadLetter | None,
        max_attempts: int | None,
        backoff: Backoff,
        where: str,
        on_fail_fast: Callable[[BaseException], None],
    ) -> None:
        self._broker = broker
        self._handler = subscriber.handler
        self._queue = subscriber.queue
        self._form = form
        self._spec = spec
        self._plan = plan
        self._slots = slots
        self._dead_letter = dead_letter
        self._max_attempts = max_attempts
        self._backoff = backoff
        self.where = where
        self._on_fail_fast = on_fail_fast
        self._per_claim = self._queue.batch_size or 1
        self.claims: ClaimLoop | None = None  # set by the subscription: chained claims report there
        self.handlers: trio.Nursery | None = None  # open while handlers may start
        self.stopping = False
        self.finished = 0
        self._finished_changed = trio.Event()
        self.locks_released = 0
        self.settle_failures = 0
        self.settle_errors: deque[TrinboxError] = deque(maxlen=KEPT_ERRORS)

    # -- units of work ------------------------------------------------------------------------

    def give_slots(self, count: int) -> None:
        for _ in range(count):
            self._slots.release()

    async def start(self, units: list[list[Delivery]]) -> None:
        """Start a handler per unit; once stopping (or the handlers' nursery closed), release
        the units instead."""
        if self.handlers is None or self.stopping:
            self.give_slots(len(units))
            await self.drop([d for unit in units for d in unit])
            return
        for unit in units:
            self.handlers.start_soon(self._work, unit)

    async def _work(self, deliveries: list[Delivery]) -> None:
        """Handle a unit of work, and the units its settlements claimed for this worker."""
        try:
            while deliveries:
                chained: list[Delivery] | None = None
                try:
                    chained = await self._handle(deliveries)
                finally:
                    # Whatever ended the unit, none of its rows stays held.
                    unsettled = [d for d in deliveries if not d.settled]
                    if unsettled:
                        await self.drop(unsettled)
                    self.finished += len(deliveries)
                    self._finished_changed.set()
                    self._finished_changed = trio.Event()
                if chained and self.stopping:
                    await self.drop(chained)  # claimed as the subscription began to stop
                    chained = None
                deliveries = chained or []
        finally:
            self._slots.release()

    async def wait_finished(self, count: int) -> None:
        """Wait until ``count`` deliveries in all have been settled or released."""
        while self.finished < count:
            await self._finished_changed.wait()

    async def _handle(self, deliveries: list[Delivery]) -> list[Delivery] | None:
        """Decode, run the handler, settle; the rows a settlement claimed for this worker."""
        policy = self._queue.failure
        ready: list[Delivery] = []
        messages: list[object] = []
        for delivery in deliveries:
            try:
                messages.append(
                    decode_message(self._plan, self._spec, delivery.values, self._queue.codec_used)
                )
                ready.append(delivery)
            except (DecodeError, TypeError, ValueError) as exc:
                logger.warning(
                    "%s: row %r does not decode (attempt %s): %s",
                    self.where,
                    delivery.id,
                    delivery.attempt,
                    exc,
                )
                await self._settle(delivery, self._policy_step(delivery, policy.decode))
        if not ready:
            return None
        args: list[object] = []
        try:
            try:
                args = await self._arguments(ready, messages)
                result = await self._handler(*args)
                outcomes = self._outcomes(result, len(ready))
            except BaseException as exc:
                if not _is_failure(exc):
                    await self.drop(ready)
                    raise
                await self._failed(ready, exc)
                return None
            return await self._settle_outcomes(ready, outcomes, args)
        finally:
            for arg in args:
                if isinstance(arg, Tx):
                    arg.end()  # a handler that kept it gets TransactionHeld, never a statement

    async def _failed(self, ready: list[Delivery], exc: BaseException) -> None:
        policy = self._queue.failure
        if policy.handler is FailurePolicy.FAIL_FAST:
            logger.error("%s: the handler raised; shutting down", self.where, exc_info=exc)
            await self.drop(ready)
            self._on_fail_fast(exc)
            return
        logger.warning(
            "%s: the handler raised; policy %s", self.where, policy.handler.value, exc_info=exc
        )
        items: list[tuple[Delivery, Step]] = []
        for delivery in ready:
            step = self._policy_step(delivery, policy.handler)
            if isinstance(step, Ack) and delivery.tx_open:
                step = Drop()  # same SQL as ack, and the handler's writes never commit
            items.append((delivery, step))
        await self._wait_out_backoff(items)
        await self._settle_all(items)

    async def _wait_out_backoff(self, items: list[tuple[Delivery, Step]]) -> None:
        """A table without a RetryAfter field cannot hold a row back: the worker waits out the
        backoff before returning it (a shutdown cuts the wait, and the row is released)."""
        if self._spec.retry_after is not None:
            return
        waits = [
            self._backoff.delay(d.attempt or 1).total_seconds()
            for d, step in items
            if isinstance(step, Retry)
        ]
        if waits:
            await trio.sleep(max(waits))

    async def _settle_outcomes(
        self, ready: list[Delivery], outcomes: list[HandlerOutcome], args: list[object]
    ) -> list[Delivery] | None:
        if len(ready) > 1:
            # A batch (never transactional): its rows settle together.
            await self._settle_all(
                [(d, self._step(d, o)) for d, o in zip(ready, outcomes, strict=True)]
            )
            return None
        (delivery,) = ready
        step = self._step(delivery, outcomes[0])
        chained: Claimed | None = None
        if self._may_chain():
            settled, chained = await self._settle_and_claim(delivery, step)
        else:
            settled = await self._settle(delivery, step)
        if settled and isinstance(step, Ack):
            # Rows the handler published through its transaction committed with the ack:
            # wake their subscriptions, as a publish through broker.transaction() does.
            for tx in (arg for arg in args if isinstance(arg, Tx)):
                for table, group in tx.published:
                    self._broker.wakes.wake(table, group)
        return chained

    def _may_chain(self) -> bool:
        """Whether a settling delivery claims the next row for its worker in the same round
        trip: where the form chains, for single deliveries, while claims find rows and
        claiming goes on."""
        claims = self.claims
        return (
            self._form.traits.chains
            and self._queue.batch_size is None
            and claims is not None
            and claims.found_rows
            and not self.stopping
        )

    async def _arguments(self, ready: list[Delivery], messages: list[object]) -> list[object]:
        args: list[object] = [messages if self._plan.batch else messages[0]]
        for key in self._plan.keys:
            if key == "attempt":
                args.append(Attempt(ready[0].attempt or 1))
            elif key == "pool":
                args.append(self._broker.database)
            else:
                conn = await self._form.open_transaction(ready[0])
                args.append(Tx(conn, self._broker._publish_in))
        return args

    def _outcomes(self, result: object, count: int) -> list[HandlerOutcome]:
        if result is None:
            return [HandlerOutcome.ack()] * count
        if isinstance(result, HandlerOutcome):
            return [result] * count
        if (
            self._plan.batch
            and isinstance(result, Sequence)
            and not isinstance(result, str | bytes)
            and all(isinstance(o, HandlerOutcome) for o in result)
        ):
            if len(result) != count:
                msg = (
                    f"{self.where}: a batch handler returns one outcome per row, found "
                    f"{len(result)} for {count} rows"
                )
                raise TypeError(msg)
            return list(result)
        msg = (
            f"{self.where}: a handler returns a HandlerOutcome or None, found "
            f"{type(result).__name__}"
        )
        raise TypeError(msg)

    def _policy_step(self, delivery: Delivery, policy: FailurePolicy) -> Step:
        if policy is FailurePolicy.SKIP:
            return Ack()
        if policy is FailurePolicy.RETRY:
            delay = self._backoff.delay(delivery.attempt or 1)
            if delay and self._spec.retry_after is not None:
                return self._step(delivery, HandlerOutcome.retry_after(delay))
            return self._step(delivery, HandlerOutcome.retry())
        return Drop()

    def _step(self, delivery: Delivery, outcome: HandlerOutcome) -> Step:
        if outcome.is_ack:
            return Ack()
        if outcome.is_drop:
            return Drop()
        if (
            self._dead_letter is not None
            and self._max_attempts is not None
            and delivery.attempt is not None
            and delivery.attempt >= self._max_attempts
        ):
            logger.warning(
                "%s: the row's attempts are spent (id %r, attempt %d); moving it to %s",
                self.where,
                delivery.id,
                delivery.attempt,
                self._dead_letter.label,
            )
            return DeadLetterStep(self._dead_letter)
        if outcome.delay is not None:
            if self._spec.retry_after is None:
                logger.warning(
                    "%s: retry_after needs a RetryAfter field; row %r is retried at once",
                    self.where,
                    delivery.id,
                )
                return Retry()
            if self.claims is not None:
                self.claims.due_in(outcome.delay.total_seconds())
            return RetryAt(self._retry_at(delivery, outcome.delay))
        return Retry()

    def _retry_at(self, delivery: Delivery, delay: timedelta) -> datetime:
        """Now plus ``delay``, at most LATEST_RETRY (what every database's column holds)."""
        now = self._broker.clock()
        try:
            at = now + delay
        except OverflowError:
            at = LATEST_RETRY
        if at > LATEST_RETRY:
            logger.warning(
                "%s: row %r asked to wait %s, past what a time column holds; it waits until %s",
                self.where,
                delivery.id,
                delay,
                LATEST_RETRY.date(),
            )
            at = LATEST_RETRY
        return at

    # -- settlements ----------------------------------------------------------------------------

    async def _settle(self, delivery: Delivery, step: Step) -> bool:
        """Settle shielded and bounded: a shutdown waits for settlements in flight. Whether it
        took effect. A settlement that fails or runs out of time drops its delivery."""
        with within(SETTLE) as bound:
            try:
                await self._form.settle(delivery, step)
                return True
            except Exception as exc:
                self._settle_failed(delivery, step, exc)
        if bound.cancelled_caught:
            self._settle_failed(delivery, step, None)
        await self.drop([delivery])
        return False

    def _settle_failed(self, delivery: Delivery, step: Step, error: Exception | None) -> None:
        """Report a settlement that did not take effect: as a SettlementError, whatever the
        form raised; the app keeps serving."""
        if error is None:
            error = SettlementError(
                f"{self.where}: settling row {delivery.id!r} ({step.event}) took over {SETTLE} s"
            )
        elif not isinstance(error, TrinboxError):
            logger.error("%s: settling row %r failed", self.where, delivery.id, exc_info=error)
            error = SettlementError(
                f"{self.where}: settling row {delivery.id!r} ({step.event}) failed: {error!r}"
            )
        self.settle_failures += 1
        self.settle_errors.append(error)
        logger.warning(
            "%s: settling row %r (%s) failed: %s", self.where, delivery.id, step.event, error
        )

    async def _settle_and_claim(
        self, delivery: Delivery, step: Step
    ) -> tuple[bool, Claimed | None]:
        """:meth:`_settle`, with the next claim for this worker in the same round trip:
        whether the settlement took effect, and what the claim took (handled even when the
        settlement failed: its rows are claimed)."""
        claims = self.claims
        assert claims is not None
        chained = Chained()
        failed = False
        with within(SETTLE) as bound:
            try:
                chained = await self._form.settle_and_claim(delivery, step, self._per_claim)
            except Exception as exc:  # the forms report their errors; never lose a worker
                self._settle_failed(delivery, step, exc)
                failed = True
            if chained.error is not None:
                self._settle_failed(delivery, step, chained.error)
                failed = True
            if chained.claim_error is not None:
                logger.warning(
                    "%s: a claim failed: %s; next claim in 1 s", self.where, chained.claim_error
                )
                claims.claim_failed()
            elif chained.claimed is not None:
                claims.after_claim(chained.claimed)
        if bound.cancelled_caught:
            self._settle_failed(delivery, step, None)
            failed = True
        if failed:
            await self.drop([delivery])
        return not failed, chained.claimed

    async def _settle_all(self, items: list[tuple[Delivery, Step]]) -> None:
        """Settle the deliveries of one claim together, shielded and bounded like one."""
        if len(items) == 1:
            await self._settle(*items[0])
            return
        with within(SETTLE) as bound:
            try:
                errors: Sequence[Exception | None] = await self._form.settle_batch(items)
            except Exception as exc:
                errors = [exc] * len(items)
            for (delivery, step), error in zip(items, errors, strict=True):
                if error is not None:
                    self._settle_failed(delivery, step, error)
        if bound.cancelled_caught:
            for delivery, step in items:
                if not delivery.settled:
                    self._settle_failed(delivery, step, None)
        await self.drop([d for d, _ in items if not d.settled])

    # -- drops ------------------------------------------------------------------------------------

    async def drop(self, deliveries: list[Delivery]) -> None:
        """Deliveries left unsettled: return their rows side by side, all within RELEASE from
        now; a release that runs out of time abandons its connection."""
        pending = [d for d in deliveries if not d.settled]
        if not pending:
            return
        done: set[Delivery] = set()
        with within(RELEASE):
            async with trio.open_nursery() as nursery:
                for delivery in pending:
                    nursery.start_soon(self._release, delivery, done)
        for delivery in pending:
            if delivery not in done:
                logger.warning(
                    "%s: releasing row %r ran out of time; its connection is abandoned",
                    self.where,
                    delivery.id,
                )
                self._form.abandon(delivery)

    async def _release(self, delivery: Delivery, done: set[Delivery]) -> None:
        try:
            if self.stopping:
                if await self._form.release_for_shutdown(delivery):
                    self.locks_released += 1
            else:
                await self._form.release(delivery)
            done.add(delivery)
        except Exception:
            logger.warning("%s: releasing row %r failed", self.where, delivery.id, exc_info=True)
