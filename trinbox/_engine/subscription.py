"""One subscription at work: its startup checks, its claim loop, its handlers, its upkeep, and its
shutdown.

    run()                       the subscription's nursery
    ├── claim loop              claims while a worker is free (claim_loop.py; what its
    │                           claims and the chained ones share: claim_state.py)
    └── work area (shielded)    lives through the grace period after the claim loop stops
        ├── upkeep              the lease keeper, the watch of cancel requests, the limit record
        └── handlers            at most workers(n) at once (deliveries.py)

A cancel of ``run`` and ``stop()`` do the same, at once: claiming stops (no chained claim
starts after it, and rows that claims in flight return are released), handlers get the grace
period, are cancelled, and every delivery still in work is released; the form's shutdown runs
whatever ended the subscription, a crashed handler task included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from .._api.backoff import DEFAULT_BACKOFF, Backoff
from .._api.events import EventBus, EventSource, LeaseEvent
from .._api.handler import row_id
from .._api.queue import InboxQueue, Subscriber
from .._bounds import RELEASE, within
from .._broker import pgbouncer
from .._broker.broker import SqlBroker
from .._declare._inbox import spec_of
from .._declare._markers import Transactional
from .._dialects.retention import Kind
from .._forms.table import make_form
from .._holders._base import ClaimForm, Delivery, FormContext
from ..errors import AlreadySubscribed, StartupError, TrinboxError
from . import startup
from .cancel_watch import WatchCounts, watch_cancels
from .claim_loop import ClaimLoop
from .claim_state import ClaimState
from .custom_claims import custom_claim_for
from .deliveries import DeliveryRunner
from .limit_check import RecordWrites, check_limit_records, keep_limit_record
from .retention import Retain, Retention
from .statistics import SubscriptionStatistics
from .tracking import SeenRecords, consumer_of

__all__ = ["Subscription", "system_of"]

logger = logging.getLogger("trinbox.app")
settle_log = logging.getLogger("trinbox.settle")


def _backoff_of(queue: InboxQueue[Any, Any]) -> Backoff:
    if queue.backoff_policy is not None:
        return queue.backoff_policy
    if queue.failure.retry_delay is not None:
        return Backoff.constant(queue.failure.retry_delay)
    return DEFAULT_BACKOFF


def system_of(broker: SqlBroker[Any]) -> str:
    """The database as OpenTelemetry names it (``db.system.name``)."""
    return broker.backend.system


_COUNTS = (
    "claimed",
    "in_work",
    "finished",
    "acked",
    "retried",
    "retried_after",
    "snoozed",
    "dropped",
    "dead_lettered",
    "cancelled",
    "cancel_polls",
    "failed_cancel_polls",
    "cancel_requests_served",
    "released",
    "settle_failures",
    "claims",
    "empty_claims",
    "failed_claims",
    "lease_extensions",
    "leases_lost",
    "locks_released",
    "connections_closed",
    "pruned_processed",
    "pruned_dead_letters",
    "freed_slot_notifies",
    "limit_record_writes",
    "failed_limit_record_writes",
)


class Subscription:
    """A mounted subscriber on its broker."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        subscriber: Subscriber[Any, Any],
        *,
        max_attempts: int | None,
        dead_letter: str | None,
        grace: float,
        backoff: Backoff | None = None,
        retain: Retain | None = None,
        on_fail_fast: Callable[[BaseException], None],
        events: EventBus | None = None,
    ) -> None:
        self.broker = broker
        self.subscriber = subscriber
        self.queue = subscriber.queue
        self.spec = spec_of(self.queue.row)
        self.name = self.queue.name
        self.group = self.queue.group
        self.max_attempts = max_attempts
        self.dead_letter_name = dead_letter
        self.retain = retain
        self.retention: Retention | None = None
        self.grace = grace
        self._grace_scope: trio.CancelScope | None = None
        self.backoff = backoff or _backoff_of(self.queue)
        self._on_fail_fast = on_fail_fast
        self.where = f"subscription {self.name!r} ({subscriber!r})"
        self.connections_closed = 0
        self._shutdown_locks = 0
        self._stopped = trio.Event()
        self._claims_done = trio.Event()
        self._runner: DeliveryRunner | None = None
        self._loop: ClaimLoop | None = None
        self._claims: ClaimState | None = None  # what the loop's and the chained claims share
        self._events = events
        self.source = EventSource(
            subscription=self.name,
            subscriber=getattr(subscriber.handler, "__qualname__", repr(subscriber.handler)),
            table=self.spec.qualified_name,
            group=self.group,
            system=system_of(broker),
        )
        self.lease_extensions = 0
        self.leases_lost = 0
        self.cancel_watch = WatchCounts()
        self.record_writes = RecordWrites()  # the limit record's, for statistics()

    # -- startup ----------------------------------------------------------------------------

    def check(self) -> None:
        """Every check that needs no database, in the reference's order."""
        self._checked = startup.check(
            self.where,
            self.broker,
            self.subscriber,
            max_attempts=self.max_attempts,
            dead_letter=self.dead_letter_name,
        )
        startup.check_backoff(
            self.where,
            self.spec,
            self.queue.failure,
            self.backoff,
            chosen=self.backoff is not DEFAULT_BACKOFF,
        )
        pgbouncer.check_form(
            self.where,
            self.broker.pgbouncer,
            self.spec,
            count_at_claim=self.queue.attempt_at_claim,
        )
        if self.retain is not None:
            self.retention = Retention(
                self.broker, self.spec, self._checked.dead_letter, self.retain, where=self.where
            )

    @property
    def _limit_group(self) -> str | None:
        """The group of the queue's limit records: its own, or none on a FIFO table, whose
        limits span its groups (a subscription to one group and one over every group count
        the same leases)."""
        return None if self.spec.fifo else self.group

    async def open(self) -> None:
        """Register the queue, prepare every statement against the database, and set up the
        form, the delivery runner and the claim loop."""
        if not self.broker.register_queue(self.spec, self.group):
            if self.queue.serves_every_group:
                queue = "every group of "
            elif self.group is not None:
                queue = f"group {self.group!r} of "
            else:
                queue = ""
            # A FIFO table's queues overlap: one over every group serves each group.
            every = ", and one over every group serves each group," if self.spec.fifo else ","
            msg = (
                f"{self.where}: one queue has one subscription per process{every} found a "
                f"second subscription to {queue}{self.spec.label}; scale one subscription "
                f"with .workers(n)"
            )
            raise AlreadySubscribed(msg)
        checked = self._checked
        broker = self.broker
        transactional = self.queue.mode is Transactional
        tracker = self.queue.tracker
        seen = None
        if tracker is not None:
            seen = SeenRecords(
                broker,
                tracker,
                consumer_of(tracker, self.spec, self.name),
                transactional=transactional,
                where=self.where,
            )
        await startup.prepare(
            self.where,
            self.spec,
            broker,
            checked.statements,
            seen.statements if seen is not None else (),
            checked.dead_letter,
        )
        await check_limit_records(
            broker,
            self.queue.limits,
            self.spec.qualified_name,
            self._limit_group,
            self.where,
            self.record_writes,
        )
        if self.retention is not None:
            await self.retention.open()
        permit = broker.wakes.permit(self.spec.qualified_name, self.group)
        self.form: ClaimForm = make_form(
            FormContext(
                spec=self.spec,
                dialect=broker.dialect,
                statements=checked.statements,
                pool=broker.pool,
                clock=broker.clock,
                group=self.group,
                lease=self.queue.lease_for or broker.lease,
                transactional=transactional,
                wake=permit.set,
                extended=self._extended,
                count_at_claim=self.queue.attempt_at_claim,
                custom=custom_claim_for(self.queue.custom, self.spec, broker.dialect),
                limited=self.queue.limits is not None,
                limits=self.queue.limits,
            )
        )
        workers = startup.worker_cap(
            self.where,
            self.spec,
            broker,
            self.form.traits,
            workers=self.queue.worker_count,
            transactional=transactional,
            every_group=self.queue.serves_every_group,
        )
        self.held_connections = startup.held_connections(self.form.traits, workers)
        slots = trio.Semaphore(workers)
        claiming = ClaimState(
            permit=permit,
            gate=broker.pause_board.gate(self.spec.qualified_name, self.group),
            poll=(self.queue.poll_every or broker.poll_interval).total_seconds(),
            source=self.source,
            events=self._events,
        )
        runner = DeliveryRunner(
            broker,
            self.subscriber,
            self.form,
            self.spec,
            checked.plan,
            claiming,
            slots=slots,
            dead_letter=checked.dead_letter,
            max_attempts=self.max_attempts,
            backoff=self.backoff,
            where=self.where,
            on_fail_fast=self._on_fail_fast,
            source=self.source,
            events=self._events,
            seen=seen,
        )
        self._loop = ClaimLoop(
            self.form,
            runner,
            claiming,
            slots=slots,
            # A FIFO claim takes the group's head alone: a batch of one row.
            per_claim=1 if self.spec.fifo else self.queue.batch_size or 1,
            batch=self.queue.batch_size is not None,
            side_by_side=not broker.dialect.claims_one_at_a_time(self.spec),
            pool=broker.pool,
            source=self.source,
            events=self._events,
        )
        self._claims = claiming
        self._runner = runner
        try:
            # SQLite's advisory keys live in this process: no other process may serve them.
            # Last: from here on stop_serving() lets go of them, whatever ends the app.
            self.form.start_serving()
        except StartupError as exc:
            raise StartupError(f"{self.where}: {exc}") from None

    def _extended(self, delivery: Delivery, extended: bool) -> None:
        """The lease keeper moved a lease forward, or found it gone."""
        if extended:
            self.lease_extensions += 1
        else:
            self.leases_lost += 1
            self._run.fields.log(
                settle_log,
                logging.WARNING,
                "the row's lease is gone (another claim took it); its settlement will fail",
                row=True,
                row_id=delivery.id,
                attempt=delivery.attempt,
            )
        if self._events is not None:
            self._events.lease_extended(LeaseEvent(self.source, delivery.id, extended))

    # -- running ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled or stopped. The work area starts beside the claim loop, not
        through ``nursery.start``: a cancel that lands while it starts must still reach the
        claim loop, whose end lets the work area shut down."""
        claims = self._loop
        assert claims is not None, "open() the subscription first"
        ready = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._work_area, ready)
            try:
                await ready.wait()
                task_status.started()
                await claims.run()
            finally:
                self.stop()
                self._claims_done.set()

    def stop(self) -> None:
        """Stop claiming at once; in-work handlers get the grace period."""
        if self._runner is not None:
            self._runner.stopping = True
        if self._claims is not None:
            self._claims.stop()
        if not self._stopped.is_set() and self.opened:
            self.form.begin_shutdown()
            self._stopped.set()

    def stop_serving(self) -> None:
        """Let go of what the form holds for the process, whether or not it ran (its shutdown
        did already where it ran); no I/O."""
        if self.opened:
            self.form.stop_serving()

    def cut_grace(self) -> None:
        """End the grace now: handlers still in work are cancelled and their rows released."""
        self.grace = 0.0
        if self._grace_scope is not None:
            self._grace_scope.cancel()

    async def _work_area(self, ready: trio.Event) -> None:
        runner = self._runner
        assert runner is not None
        with trio.CancelScope(shield=True):
            try:
                async with trio.open_nursery() as upkeep:
                    await upkeep.start(self.form.keep)
                    upkeep.start_soon(
                        watch_cancels,
                        self.broker,
                        self.spec.qualified_name,
                        self.where,
                        self.cancel_watch,
                    )
                    upkeep.start_soon(
                        keep_limit_record,
                        self.broker,
                        self.queue.limits,
                        self.spec.qualified_name,
                        self._limit_group,
                        self.where,
                        self.record_writes,
                    )
                    async with trio.open_nursery() as handlers:
                        runner.handlers = handlers
                        try:
                            ready.set()
                            await self._stopped.wait()
                            handlers.cancel_scope.deadline = trio.current_time() + self.grace
                            self._grace_scope = handlers.cancel_scope
                        finally:
                            runner.handlers = None  # closed to new arrivals
                    # Claims in flight finish (bounded) and release what they took.
                    await self._claims_done.wait()
                    upkeep.cancel_scope.cancel()
            finally:
                await self._shut_form()

    async def _shut_form(self) -> None:
        """Release what is still in work, whatever ended the subscription."""
        with within(RELEASE):
            try:
                released, closed = await self.form.shutdown()
            except TrinboxError:
                logger.warning("%s: the form's shutdown failed", self.where, exc_info=True)
                return
        self._shutdown_locks += released
        # The form counts the sessions closed from the shutdown's start on.
        self.connections_closed += closed

    # -- what tests and monitoring read --------------------------------------------------------

    @property
    def opened(self) -> bool:
        """Whether ``open()`` set the subscription up."""
        return self._runner is not None

    @property
    def _run(self) -> DeliveryRunner:
        assert self._runner is not None, "the subscription is not open"
        return self._runner

    @property
    def locks_released(self) -> int:
        return self._run.locks_released + self._shutdown_locks

    @property
    def finished(self) -> int:
        return self._run.finished

    def statistics(self) -> SubscriptionStatistics:
        """A frozen snapshot of the counters (zeros before the subscription opens)."""
        source = self.source
        runner, claims = self._runner, self._claims
        if runner is None or claims is None:
            return SubscriptionStatistics(
                subscriber=source.subscriber,
                queue=source.subscription,
                table=source.table,
                group=source.group,
                serving=False,
                paused=self.broker.pause_board.paused(source.table, source.group),
                **_zeros(),
                settle_errors=(),
            )
        outcomes = runner.outcomes
        return SubscriptionStatistics(
            subscriber=source.subscriber,
            queue=source.subscription,
            table=source.table,
            group=source.group,
            serving=not self._stopped.is_set(),
            paused=claims.paused,
            claimed=claims.claimed,
            in_work=self.form.in_work,
            finished=runner.finished,
            acked=outcomes["ack"],
            retried=outcomes["retry"],
            retried_after=outcomes["retry_after"],
            snoozed=outcomes["snooze"],
            dropped=outcomes["drop"],
            dead_lettered=outcomes["dead_letter"],
            cancelled=outcomes["cancelled"],
            released=runner.released,
            settle_failures=runner.settle_failures,
            settle_errors=tuple(runner.settle_errors),
            claims=claims.claims,
            empty_claims=claims.empty_claims,
            failed_claims=claims.failed_claims,
            lease_extensions=self.lease_extensions,
            leases_lost=self.leases_lost,
            locks_released=self.locks_released,
            connections_closed=self.connections_closed,
            pruned_processed=self._pruned("processed"),
            pruned_dead_letters=self._pruned("dead_letters"),
            cancel_polls=self.cancel_watch.polls,
            failed_cancel_polls=self.cancel_watch.failed,
            cancel_requests_served=self.cancel_watch.served,
            freed_slot_notifies=self.broker.freed_slots.sent(source.table, source.group),
            limit_record_writes=self.record_writes.written,
            failed_limit_record_writes=self.record_writes.failed,
            progress=tuple((row_id(self.spec, d.id), d.progress) for d in runner.reporting),
        )

    def _pruned(self, kind: Kind) -> int:
        return 0 if self.retention is None else self.retention.pruned[kind]

    @property
    def settle_errors(self) -> list[TrinboxError]:
        """The last settlement errors (at most ten; ``settle_failures`` counts them all)."""
        return list(self._run.settle_errors)

    @property
    def settle_failures(self) -> int:
        return self._run.settle_failures

    @property
    def in_work(self) -> int:
        """Deliveries claimed and not yet settled or released."""
        return self.form.in_work

    async def wait_idle(self) -> None:
        """Wait until the claim loop waits for its poll interval or a wake (its last claim
        found fewer rows than it could take)."""
        assert self._claims is not None
        await self._claims.wait_idle()

    async def wait_finished(self, count: int) -> None:
        """Wait until ``count`` deliveries in all have been settled or released."""
        await self._run.wait_finished(count)


def _zeros() -> dict[str, Any]:
    """Every count of a subscription that never opened: 0."""
    return dict.fromkeys(_COUNTS, 0)
