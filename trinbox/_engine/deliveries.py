"""A subscription's delivery runner: decode, run the handler, settle by its outcome, and release
every delivery that ends any other way.

Every way a unit of work ends leaves no row held: a return settles it; an exception (or a
``Cancelled`` that no scope of trinbox's sent) is a failure settled by the failure policy; a
cancel of the handler, ``KeyboardInterrupt`` or ``SystemExit`` releases it, and so does a crash
of trinbox's own code (the unit's ``finally``). A unit's deliveries are released side by side
within one bound (trinbox._bounds.RELEASE), counted from the release; one that runs out of it
abandons the delivery's connection, and the server frees its locks.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import trio

from .._api.backoff import Backoff
from .._api.codecs import DecodeError
from .._api.events import (
    EventBus,
    EventSource,
    HandleEnd,
    HandleEvent,
    ReleaseEvent,
    SettleEvent,
    now_ns,
)
from .._api.handler import HandlerPlan, decode_message, row_id
from .._api.handles import Attempt, CancelRequested, Out, Progress, Tx
from .._api.headers import Headers, decode_headers
from .._api.outcome import FailurePolicy, HandlerOutcome
from .._api.queue import Subscriber
from .._api.routes import Reply
from .._bounds import RELEASE, SETTLE, within
from .._broker.broker import SqlBroker
from .._broker.waiting import HANDLING
from .._declare._markers import Transactional
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    ClaimForm,
    Delivery,
    Drop,
    Step,
)
from ..errors import DeclarationError, SettlementError, TrinboxError
from .claim_state import ClaimState, Timing
from .statistics import Fields
from .steps import StepRules
from .tracking import SeenRecords

__all__ = ["DeliveryRunner"]

delivery_log = logging.getLogger("trinbox.delivery")
settle_log = logging.getLogger("trinbox.settle")
claim_log = logging.getLogger("trinbox.claim")
WARNING = logging.WARNING

KEPT_ERRORS = 10  # settlement errors kept for inspection; the count goes on


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
        claims: ClaimState,
        *,
        slots: trio.Semaphore,
        dead_letter: DeadLetter | None,
        max_attempts: int | None,
        backoff: Backoff,
        where: str,
        on_fail_fast: Callable[[BaseException], None],
        source: EventSource,
        events: EventBus | None,
        seen: SeenRecords | None = None,
    ) -> None:
        self._broker = broker
        self._waited_on = spec.result is not None
        self._seen = seen
        self.duplicates = 0  # deliveries of a record handled before, acked without the handler
        self._handler = subscriber.handler
        self._queue = subscriber.queue
        self._form = form
        self._spec = spec
        self._plan = plan
        self._slots = slots
        self._dead_letter = dead_letter
        self._max_attempts = max_attempts
        self.where = where
        self._on_fail_fast = on_fail_fast
        self._per_claim = self._queue.batch_size or 1
        self._claims = claims  # where chained claims report, and whether claiming goes on
        self.handlers: trio.Nursery | None = None  # open while handlers may start
        self.stopping = False
        self.finished = 0
        self._finished_changed = trio.Event()
        self._finished_wanted: float = math.inf  # the smallest count a waiter waits for
        self.locks_released = 0
        self.settle_failures = 0
        self.settle_errors: deque[TrinboxError] = deque(maxlen=KEPT_ERRORS)
        self.released = 0
        # The deliveries whose handler took keys.Progress, while it runs (statistics).
        self.reporting: list[Delivery] = []
        # Settled deliveries by the step that took effect (Step.event).
        self.outcomes = dict.fromkeys(
            ("ack", "retry", "retry_after", "snooze", "drop", "dead_letter", "cancelled"), 0
        )
        self._source = source
        self._events = events
        self.fields = Fields(source.subscription, source.table)
        self._rules = StepRules(
            spec,
            batch=plan.batch,
            dead_letter=dead_letter,
            max_attempts=max_attempts,
            counts_at_claim=form.traits.counts_at_claim,
            backoff=backoff,
            clock=broker.clock,
            due_in=claims.due_in,
            where=where,
            fields=self.fields,
            codec=broker.codec,
        )

    # -- units of work ------------------------------------------------------------------------

    def give_slots(self, count: int) -> None:
        for _ in range(count):
            self._slots.release()

    async def start(self, units: list[list[Delivery]]) -> None:
        """Start a handler per unit; once stopping (or the handlers' nursery closed), release
        the units instead."""
        if self.handlers is None or self.stopping:
            self.give_slots(len(units))
            await self.release([d for unit in units for d in unit])
            return
        for unit in units:
            self.handlers.start_soon(self._work, unit)

    async def _work(self, deliveries: list[Delivery]) -> None:
        """Handle a unit of work, and the units its settlements claimed for this worker."""
        HANDLING.set((self._spec.qualified_name, self._queue.group))  # broker.wait refuses it
        try:
            while deliveries:
                chained: list[Delivery] | None = None
                try:
                    chained = await self._handle(deliveries)
                finally:
                    # Whatever ended the unit, none of its rows stays held.
                    unsettled = [d for d in deliveries if not d.settled]
                    if unsettled:
                        await self.release(unsettled)
                    self.finished += len(deliveries)
                    if self.finished >= self._finished_wanted:
                        self._finished_changed.set()
                        self._finished_changed = trio.Event()
                        self._finished_wanted = math.inf
                    if self._queue.serves_every_group or self._queue.limits is not None:
                        # Over every group of a FIFO table, its group is free now: a claim
                        # that ran dry while the row was in work may take the group's next.
                        # Under .limit(..), so is its slot: the rows of a key that was at
                        # its limit may be claimed, here and (announced) in other processes.
                        self._claims.wake()
                        if self._queue.limits is not None:
                            self._broker.freed_slots.freed(
                                self._spec.qualified_name, self._queue.group
                            )
                if chained and self.stopping:
                    await self.release(chained)  # claimed as the subscription began to stop
                    chained = None
                deliveries = chained or []
        except BaseException:
            # Whatever leaves this task as an exception ends the handlers' nursery and the
            # subscription: claiming stops now, not once the unwind reaches the claim loop
            # (its claims would be released, each with an attempt counted).
            self.stop_claiming()
            raise
        finally:
            self._slots.release()

    def stop_claiming(self) -> None:
        """Claim no more: claims in flight return their rows, settlements claim nothing."""
        self.stopping = True
        self._claims.stop()

    async def wait_finished(self, count: int) -> None:
        """Wait until ``count`` deliveries in all have been settled or released."""
        while self.finished < count:
            # Woken once the smallest count waited for is reached, not at every delivery.
            self._finished_wanted = min(self._finished_wanted, count)
            await self._finished_changed.wait()

    async def _handle(self, deliveries: list[Delivery]) -> list[Delivery] | None:
        """Decode, run the handler, settle; the rows a settlement claimed for this worker."""
        policy = self._queue.failure
        ready: list[Delivery] = []
        messages: list[object] = []
        headers: list[Headers] = []  # each ready row's, where the table has a Headers field
        column = self._spec.headers
        for delivery in deliveries:
            if not delivery.found:
                # A custom claim's id whose fetch read no row: settled as a row that does
                # not decode.
                self.fields.log(
                    delivery_log,
                    WARNING,
                    "a claimed id has no row (the custom claim's fetch read none)",
                    row=True,
                    row_id=delivery.id,
                    attempt=delivery.attempt,
                )
                await self._settle(delivery, self._rules.policy_step(delivery, policy.decode))
                continue
            spent = self._rules.spent_at_claim(delivery)
            if spent is not None:
                await self._settle(delivery, spent)
                continue
            try:
                message = decode_message(
                    self._plan, self._spec, delivery.values, self._queue.codec_used
                )
                if column is not None:
                    headers.append(decode_headers(delivery.values[column.column]))
                messages.append(message)
                ready.append(delivery)
            except Exception as exc:
                # Whatever a codec or a row class raises (a KeyError of a schema registry, a
                # Decimal's InvalidOperation, a __post_init__) is the row's, never the app's:
                # the decode policy settles it. One line; a traceback unless the codec said
                # what failed in a DecodeError of its own.
                self.fields.log(
                    delivery_log,
                    WARNING,
                    f"the row does not decode: {exc}"
                    if isinstance(exc, DecodeError)
                    else f"the row does not decode: {exc!r}",
                    row=True,
                    row_id=delivery.id,
                    attempt=delivery.attempt,
                    exc_info=None if isinstance(exc, DecodeError) else exc,
                )
                await self._settle(delivery, self._rules.policy_step(delivery, policy.decode))
        if not ready:
            return None
        record: str | None = None
        if self._seen is not None:
            # One delivery at a time (the check refused batches), read from its headers.
            try:
                record = self._seen.record_of(headers[0])
                if record is not None and not await self._seen.first_sight(
                    self._form, ready[0], record
                ):
                    return await self._seen_before(ready, record)
            except Exception as exc:
                await self._failed(ready, exc, "reading the seen-records table failed")
                return None
        events = self._events
        started: tuple[HandleEvent, list[object], float] | None = None
        if events is not None:
            started = self._handle_started(events, ready, headers)
        args: list[object] = []
        failure: BaseException | None = None
        outcomes: list[HandlerOutcome]  # set when the handler returned
        try:
            try:
                args = await self._arguments(ready, messages, headers)
                call = self._broker.running.enter(
                    self._spec.qualified_name,
                    [d.id for d in ready],
                    trio.CancelScope(),
                    batch=len(ready) > 1 or self._plan.batch,
                )
                for arg in args:
                    if isinstance(arg, CancelRequested):
                        arg.watch(lambda: call.requested)
                try:
                    with call.scope:
                        result = await self._handler(*args)
                finally:
                    self._broker.running.leave(call)
                    if any(isinstance(arg, Progress) for arg in args):
                        self.reporting.remove(ready[0])
                if call.scope.cancelled_caught:
                    # broker.cancel reached the handler: settled as cancelled, never retried.
                    if started is not None:
                        self._handle_ended(started, [], None, cancelled=len(ready))
                    await self._settle_all([(d, Drop(event="cancelled")) for d in ready])
                    return None
                outcomes = self._rules.outcomes(result, len(ready))
            except BaseException as exc:
                if started is not None:
                    self._handle_ended(started, [], exc)
                if not _is_failure(exc):
                    await self.release(ready)
                    raise
                failure = exc
            else:
                if started is not None:
                    self._handle_ended(started, outcomes, None)
            what = "the handler raised"
            written: list[tuple[str, str | None]] = []
            if failure is None:
                try:
                    written = await self._write_replies(ready, outcomes, args)
                except Exception as exc:
                    failure, what = exc, "writing the handler's follow-up messages failed"
            if failure is None and record is not None and outcomes[0].is_ack:
                assert self._seen is not None
                try:
                    await self._seen.handled(record)
                except Exception as exc:
                    failure, what = exc, "marking the record in the seen-records table failed"
            if failure is not None:
                # Settled outside the except block: a settlement's own error must not chain
                # the handler's (its traceback is logged once, by _failed).
                await self._failed(ready, failure, what)
                return None
            return await self._settle_outcomes(ready, outcomes, args, written)
        finally:
            for arg in args:
                if isinstance(arg, Tx):
                    arg.end()  # a handler that kept it gets TransactionHeld, never a statement
                elif isinstance(arg, Out):
                    arg.take()  # and a kept Out raises TransactionHeld, never replies

    async def _seen_before(self, ready: list[Delivery], record: str) -> list[Delivery] | None:
        """A delivery of a record this consumer handled before: acked, its handler not run."""
        self.duplicates += 1
        self.fields.log(
            delivery_log,
            logging.INFO,
            f"outbox record {record!r} was handled before; acked without the handler",
            row=True,
            row_id=ready[0].id,
            attempt=ready[0].attempt,
        )
        return await self._settle_outcomes(ready, [HandlerOutcome.ack()], [], [])

    def _handle_started(
        self, events: EventBus, ready: list[Delivery], headers: list[Headers]
    ) -> tuple[HandleEvent, list[object], float]:
        event = HandleEvent(
            self._source, tuple(d.id for d in ready), ready[0].attempt, now_ns(), tuple(headers)
        )
        states = events.handle_started(event)
        return event, states, time.perf_counter()

    def _handle_ended(
        self,
        started: tuple[HandleEvent, list[object], float],
        outcomes: list[HandlerOutcome],
        error: BaseException | None,
        *,
        cancelled: int = 0,
    ) -> None:
        assert self._events is not None
        event, states, t0 = started
        kinds = tuple(o.kind for o in outcomes) + ("cancelled",) * cancelled
        end = HandleEnd(kinds, error, time.perf_counter() - t0)
        self._events.handle_ended(event, states, end)

    async def _write_replies(
        self, ready: list[Delivery], outcomes: list[HandlerOutcome], args: list[object]
    ) -> list[tuple[str, str | None]]:
        """Write an acked delivery's follow-up messages (its ``keys.Out`` replies, then its
        outcome's), where the broker's routes lead them: in the delivery's transaction on a
        transactional mount, so that they commit with the ack (where they went is returned,
        to wake once it has), else each on its own before the ack settles (at least once: a
        failed ack returns the row, whose next delivery writes them again)."""
        sent = [r for arg in args if isinstance(arg, Out) for r in arg.take()]
        if len(ready) > 1 or self._plan.batch:
            if sent or any(o.replies for o in outcomes):
                msg = (
                    f"{self.where}: a batch handler replies in no form (its follow-ups would "
                    f"belong to no one row), found an outcome with replies; return plain "
                    f"outcomes, and publish with broker.publish_named in the handler"
                )
                raise DeclarationError(msg)
            return []
        (outcome,) = outcomes
        if not outcome.is_ack:
            return []  # every other outcome discards the handler's follow-ups
        replies: list[Reply] = [*sent, *outcome.replies]
        if not replies:
            return []
        conn = None
        if self._queue.mode is Transactional:
            conn = await self._form.open_transaction(ready[0])
        where = f"{self.where}: a follow-up message"
        written = [await self._broker.write_reply(r, conn, where=where) for r in replies]
        return written if conn is not None else []  # on their own: woken as written

    async def _failed(
        self, ready: list[Delivery], exc: BaseException, what: str = "the handler raised"
    ) -> None:
        policy = self._queue.failure
        # One line per failure, with its traceback (a batch's: the ids of its rows).
        row_id = ready[0].id if len(ready) == 1 else tuple(d.id for d in ready)
        if policy.handler is FailurePolicy.FAIL_FAST:
            self.fields.log(
                delivery_log,
                logging.ERROR,
                f"{what}; shutting down",
                row=True,
                row_id=row_id,
                attempt=ready[0].attempt,
                exc_info=exc,
            )
            await self.release(ready)
            self._on_fail_fast(exc)
            return
        self.fields.log(
            delivery_log,
            WARNING,
            f"{what}; policy {policy.handler.value}",
            row=True,
            row_id=row_id,
            attempt=ready[0].attempt,
            exc_info=exc,
        )
        items: list[tuple[Delivery, Step]] = []
        for delivery in ready:
            step = self._rules.policy_step(delivery, policy.handler)
            if isinstance(step, Ack) and delivery.tx_open:
                step = Drop()  # same SQL as ack, and the handler's writes never commit
            items.append((delivery, step))
        await self._settle_all(items)

    async def _settle_outcomes(
        self,
        ready: list[Delivery],
        outcomes: list[HandlerOutcome],
        args: list[object],
        written: list[tuple[str, str | None]],
    ) -> list[Delivery] | None:
        if len(ready) > 1 or (self._queue.batch_size is not None and self._may_chain(True)):
            # A batch (never transactional): its rows settle together.
            return await self._settle_all(
                [(d, self._rules.step(d, o)) for d, o in zip(ready, outcomes, strict=True)],
                chain=self._may_chain(True),
            )
        (delivery,) = ready
        step = self._rules.step(delivery, outcomes[0])
        chained: Claimed | None = None
        if self._may_chain(False):
            settled, chained = await self._settle_and_claim(delivery, step)
        else:
            settled = await self._settle(delivery, step)
        if settled and isinstance(step, Ack):
            # Rows the handler published through its transaction committed with the ack:
            # wake their subscriptions, as a publish through broker.transaction() does.
            for tx in (arg for arg in args if isinstance(arg, Tx)):
                for table, group in tx.published:
                    self._broker.wakes.wake(table, group)
            for table, group in written:  # the follow-ups written in its transaction
                self._broker.wakes.wake(table, group)
        return chained

    def _may_chain(self, batch: bool) -> bool:
        """Whether a settling delivery (``batch``: batch) claims the next row (batch) for its
        worker in the same round trip: where the form chains them, while claims find rows
        and claiming goes on (not stopping, not paused)."""
        traits = self._form.traits
        return (
            (traits.chains_batches if batch else traits.chains)
            and (self._queue.batch_size is not None) == batch
            and self._claims.found_rows
            and not self.stopping
            and not self._claims.paused
        )

    async def _arguments(
        self, ready: list[Delivery], messages: list[object], headers: list[Headers]
    ) -> list[object]:
        args: list[object] = [messages if self._plan.batch else messages[0]]
        for key in self._plan.keys:
            if key == "attempt":
                args.append(Attempt(ready[0].attempt or 1))
            elif key == "row_id":
                args.append(row_id(self._spec, ready[0].id))
            elif key == "headers":
                args.append(headers[0])
            elif key == "pool":
                args.append(self._broker.database)
            elif key == "out":
                args.append(Out(self._broker.routes))
            elif key == "cancel_requested":
                args.append(CancelRequested())
            elif key == "progress":
                progress = Progress()
                progress.watch(ready[0])
                self.reporting.append(ready[0])
                args.append(progress)
            else:
                conn = await self._form.open_transaction(ready[0])
                args.append(self._broker.tx_on(conn))
        return args

    # -- settlements ----------------------------------------------------------------------------

    # Without a hook, a settlement reads no clock and calls nothing for events: ``timing`` is
    # None and each call site tests it before reporting.

    def _report(
        self,
        delivery: Delivery,
        step: Step,
        timing: Timing,
        error: Exception | None = None,
        batch: int = 1,
    ) -> None:
        """Report a settlement to the hooks (there are some: ``timing`` was read)."""
        if self._events is not None:
            start, t0 = timing
            self._events.settled(
                SettleEvent(
                    self._source,
                    delivery.id,
                    delivery.attempt,
                    step.event,
                    batch,
                    start,
                    time.perf_counter() - t0,
                    error,
                )
            )

    async def _settle(self, delivery: Delivery, step: Step) -> bool:
        """Settle shielded and bounded: a shutdown waits for settlements in flight. Whether it
        took effect. A settlement that fails or runs out of time releases its delivery."""
        timing = None if self._events is None else (now_ns(), time.perf_counter())
        with within(SETTLE) as bound:
            try:
                await self._form.settle(delivery, step)
                self._took_effect(step)
                if timing is not None:
                    self._report(delivery, step, timing)
                return True
            except Exception as exc:
                self._settle_failed(delivery, step, exc, timing)
        if bound.cancelled_caught:
            self._settle_failed(delivery, step, None, timing)
        await self.release([delivery])
        return False

    def _took_effect(self, step: Step) -> None:
        """A settlement took effect: counted, and a ``broker.wait`` on the table woken (a
        table with a Result field: only its rows are waited on)."""
        self.outcomes[step.event] += 1
        if self._waited_on:
            self._broker.settled_rows.settled_here(self._spec.qualified_name)

    def _settle_failed(
        self,
        delivery: Delivery,
        step: Step,
        error: Exception | None,
        timing: Timing | None,
        batch: int = 1,
    ) -> None:
        """Report a settlement that did not take effect: as a SettlementError, whatever the
        form raised; the app keeps serving. One line; a traceback only for an error that is
        not trinbox's own (a defect), never the handler's again."""
        unexpected: Exception | None = None
        if error is None:
            error = SettlementError(
                f"{self.where}: settling row {delivery.id!r} ({step.event}) took over {SETTLE} s"
            )
        elif not isinstance(error, TrinboxError):
            unexpected = error
            error = SettlementError(
                f"{self.where}: settling row {delivery.id!r} ({step.event}) failed: {error!r}"
            )
        self.settle_failures += 1
        self.settle_errors.append(error)
        if timing is not None:
            self._report(delivery, step, timing, error, batch)
        self.fields.log(
            settle_log,
            WARNING,
            f"settling the row ({step.event}) failed: {unexpected!r}"
            if unexpected is not None
            else f"settling the row ({step.event}) failed: {error}",
            row=True,
            row_id=delivery.id,
            attempt=delivery.attempt,
            exc_info=unexpected,
        )

    async def _settle_and_claim(
        self, delivery: Delivery, step: Step
    ) -> tuple[bool, Claimed | None]:
        """:meth:`_settle`, with the next claim for this worker in the same round trip:
        whether the settlement took effect, and what the claim took (handled even when the
        settlement failed: its rows are claimed)."""
        chained = Chained()
        failed = False
        timing = None if self._events is None else (now_ns(), time.perf_counter())
        started = trio.current_time()
        with within(SETTLE) as bound:
            try:
                chained = await self._form.settle_and_claim(delivery, step, self._per_claim)
            except Exception as exc:  # the forms report their errors; never lose a worker
                self._settle_failed(delivery, step, exc, timing)
                failed = True
            if chained.error is not None:
                self._settle_failed(delivery, step, chained.error, timing)
                failed = True
            elif not failed:
                self._took_effect(step)
                if timing is not None:
                    self._report(delivery, step, timing)
            self._chained_claim(chained, timing, started)
        if bound.cancelled_caught:
            self._settle_failed(delivery, step, None, timing)
            failed = True
        if failed:
            await self.release([delivery])
        return not failed, chained.claimed

    def _chained_claim(self, chained: Chained, timing: Timing | None, started: float) -> None:
        """Count and report the claim a settlement ran for its worker (its round trip began
        at ``started``, trio time)."""
        claims = self._claims
        if chained.claim_error is not None:
            self.fields.log(
                claim_log, WARNING, f"a claim failed: {chained.claim_error}; next claim in 1 s"
            )
            claims.record(None, self._per_claim, True, timing, chained.claim_error)
            claims.claim_failed()
        elif chained.claimed is not None:
            claims.record(chained.claimed, self._per_claim, True, timing, None)
            claims.after_claim(chained.claimed, started=started)

    async def _settle_all(
        self, items: list[tuple[Delivery, Step]], *, chain: bool = False
    ) -> list[Delivery] | None:
        """Settle the deliveries of one claim together, shielded and bounded like one;
        ``chain``: with the claim of the worker's next batch in the same round trip (what it
        took, handled even when settlements failed: its rows are claimed)."""
        if len(items) == 1 and not chain:
            await self._settle(*items[0])
            return None
        timing = None if self._events is None else (now_ns(), time.perf_counter())
        chained = Chained()
        started = trio.current_time()
        with within(SETTLE) as bound:
            try:
                errors: Sequence[Exception | None]
                if chain:
                    errors, chained = await self._form.settle_batch_and_claim(
                        items, self._per_claim
                    )
                else:
                    errors = await self._form.settle_batch(items)
            except Exception as exc:
                errors = [exc] * len(items)
            for (delivery, step), error in zip(items, errors, strict=True):
                if error is not None:
                    self._settle_failed(delivery, step, error, timing, len(items))
                else:
                    self._took_effect(step)
                    if timing is not None:
                        self._report(delivery, step, timing, None, len(items))
            if chain:
                self._chained_claim(chained, timing, started)
        if bound.cancelled_caught:
            for delivery, step in items:
                if not delivery.settled:
                    self._settle_failed(delivery, step, None, timing, len(items))
        await self.release([d for d, _ in items if not d.settled])
        return chained.claimed or None

    # -- releases ---------------------------------------------------------------------------------

    async def release(self, deliveries: list[Delivery]) -> None:
        """Deliveries left unsettled: return their rows side by side, all within RELEASE from
        now; a release that runs out of time abandons its connection."""
        pending = [d for d in deliveries if not d.settled]
        if not pending:
            return
        done: set[Delivery] = set()
        with within(RELEASE):
            async with trio.open_nursery() as nursery:
                for delivery in pending:
                    nursery.start_soon(self._release_one, delivery, done)
        self.released += len(pending)
        for delivery in pending:
            if delivery not in done:
                self.fields.log(
                    settle_log,
                    WARNING,
                    "releasing the row ran out of time; its connection is abandoned",
                    row=True,
                    row_id=delivery.id,
                    attempt=delivery.attempt,
                )
                self._form.abandon(delivery)
        events = self._events
        if events is not None:
            for delivery in pending:
                events.released(
                    ReleaseEvent(
                        self._source,
                        delivery.id,
                        delivery.attempt,
                        self.stopping,
                        delivery not in done,
                    )
                )

    async def _release_one(self, delivery: Delivery, done: set[Delivery]) -> None:
        try:
            if self.stopping:
                if await self._form.release_for_shutdown(delivery):
                    self.locks_released += 1
            else:
                await self._form.release(delivery)
            done.add(delivery)
        except Exception:
            self.fields.log(
                settle_log,
                WARNING,
                "releasing the row failed",
                row=True,
                row_id=delivery.id,
                attempt=delivery.attempt,
                exc_info=True,
            )
