"""One subscription at work: its claim loop, its handlers, its upkeep, and its shutdown.

    run()                       the subscription's nursery
    ├── claim loop              claims while a worker is free; waits poll interval or a wake
    │   └── claims              one per free worker, side by side where the dialect allows
    └── work area (shielded)    lives through the grace period after the claim loop stops
        ├── upkeep              the lease keeper
        └── handlers            at most workers(n) at once; each settles its own delivery,
                                and claims its next row in that round trip where it can

Cancelling ``run`` (or ``stop()``) ends the claim loop at once; handlers then get the grace
period to finish, are cancelled, and every delivery still in work is released.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import trio

from .._declare._inbox import spec_of
from .._declare._markers import Advisory, Exclusive, Immediate, Lease, RowLock, Transactional
from .._dialects._base import DeadLetter
from .._errors import (
    AlreadySubscribed,
    DeclarationError,
    SchemaError,
    ServerTooOld,
    TrinboxError,
)
from .._forms._base import (
    RELEASE_TIMEOUT,
    Ack,
    Chained,
    Claimed,
    ClaimForm,
    DeadLetterStep,
    Delivery,
    Drop,
    FormContext,
    Retry,
    RetryAt,
    Step,
    give_back,
    whole_seconds,
)
from .._forms.advisory import AdvisoryForm
from .._forms.lease import LeaseForm
from .._forms.rowlock import RowLockForm
from .broker import SqlBroker
from .codecs import DecodeError
from .handler import HandlerPlan, decode_message, plan_handler
from .handles import Attempt, Tx
from .notify import check_channel
from .outcome import FailurePolicy, HandlerOutcome
from .queue import Subscriber

__all__ = ["Subscription"]

logger = logging.getLogger("trinbox")

CLAIM_ERROR_WAIT = 1.0  # a failed claim waits this long, whatever the poll interval
SETTLE_TIMEOUT = 60.0  # a settlement that takes longer is given up and the delivery dropped


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
        on_fail_fast: Callable[[BaseException], None],
    ) -> None:
        self.broker = broker
        self.subscriber = subscriber
        self.queue = subscriber.queue
        self.spec = spec_of(self.queue.row)
        self.name = self.queue.name
        self.group = self.name if self.spec.group is not None else None
        self.max_attempts = max_attempts
        self.dead_letter_name = dead_letter
        self.grace = grace
        self._on_fail_fast = on_fail_fast
        self.where = f"subscription {self.name!r} ({subscriber!r})"
        self.locks_released = 0
        self.connections_closed = 0
        self.settle_errors: list[TrinboxError] = []
        self._claim_scope = trio.CancelScope()
        self._claims_done = trio.Event()
        self._stopping = False
        self._handlers: trio.Nursery | None = None
        self.finished = 0
        self._idle = False
        self._idle_changed = trio.Event()
        self._finished_changed = trio.Event()
        self._in_flight = 0  # claims running
        self._claim_ended = trio.Event()
        # When the last claim ran dry (trio time): the next one waits the poll interval from
        # then, or a wake. ``None``: rows were found, claim on.
        self._dry_at: float | None = None
        self._failed_at: float | None = None  # when the last claim failed
        self._found_rows = False  # the last claim took all it asked for: more may be due

    # -- startup ----------------------------------------------------------------------------------

    def check(self) -> None:
        """Every check that needs no database, in the reference's order."""
        spec = self.spec
        transactional = self.queue.mode is Transactional
        self.dead_letter = self._check_retry_declaration()
        self.statements = self.broker.dialect.statements(spec, self.dead_letter)
        if transactional and self.queue.batch_size is not None:
            msg = (
                f"{self.where}: batches never run in transactional mode, found .batch("
                f"{self.queue.batch_size}) with .transactional(); drop one of them"
            )
            raise DeclarationError(msg)
        if (
            transactional
            and spec.form is Lease
            and self.broker.kind == "postgres"
            and spec.opening.name in ("repeatable_read", "serializable")
        ):
            msg = (
                f"{self.where}: a transactional lease handler must see the lease extensions "
                f"committed after it began, found {spec.label} at {spec.opening.__name__}; "
                f"use ReadCommitted (or Default) for this table"
            )
            raise DeclarationError(msg)
        if self.broker.listen_notify:
            check_channel(spec.qualified_name, self.where)
        self.plan: HandlerPlan = plan_handler(
            self.subscriber.handler,
            spec,
            batch=self.queue.batch_size is not None,
            transactional=transactional,
            where=self.where,
        )

    def _check_retry_declaration(self) -> DeadLetter | None:
        cap, dest = self.max_attempts, self.dead_letter_name
        if cap is not None and dest is None:
            msg = (
                f"{self.where}: max_attempts and dead_letter are declared together, found "
                f"max_attempts({cap}) without dead_letter; name where spent rows go with "
                f".dead_letter(..)"
            )
            raise DeclarationError(msg)
        if dest is not None and cap is None:
            msg = (
                f"{self.where}: max_attempts and dead_letter are declared together, found "
                f"dead_letter({dest!r}) without max_attempts; name the cap, "
                f"max_attempts(1) moves at the first failure"
            )
            raise DeclarationError(msg)
        if cap is None or dest is None:
            return None
        if self.spec.attempt is None:
            msg = (
                f"{self.where}: max_attempts counts the table's Attempt field, found none on "
                f"{self.spec.label}; add one, like attempt: Annotated[int, Attempt()]"
            )
            raise DeclarationError(msg)
        if self.spec.group is not None:
            return DeadLetter(group=dest)
        parts = dest.split(".")
        if len(parts) > 2 or not all(parts):
            msg = (
                f"{self.where}: a dead letter table is named [schema.]table, found {dest!r}; "
                f"give one table name, with at most one schema"
            )
            raise DeclarationError(msg)
        if len(parts) == 2:
            return DeadLetter(schema=parts[0], table=parts[1])
        return DeadLetter(table=parts[0])

    async def open(self) -> None:
        """Register the queue and prepare every statement against the database."""
        if not self.broker.register_queue(self.spec, self.group):
            queue = f"group {self.group!r} of " if self.group is not None else ""
            msg = (
                f"{self.where}: one queue has one subscription per process, found a second "
                f"subscription to {queue}{self.spec.label}; scale one subscription with "
                f".workers(n)"
            )
            raise AlreadySubscribed(msg)
        broker = self.broker
        pool = broker.pool
        conn = await pool.acquire()
        try:
            version_query = broker.dialect.version_query
            if version_query is not None:
                rows = await conn.fetch(version_query)
                try:
                    broker.dialect.check_server(str(rows[0][0]))
                except ServerTooOld as exc:
                    # Like every startup error, it names the subscription and its table.
                    msg = f"{self.where} on {self.spec.label}: {exc}"
                    raise ServerTooOld(msg, server=exc.server, required=exc.required) from None
            for statement in self.statements.all():
                try:
                    await conn.prepare(statement.sql)
                except TrinboxError as exc:
                    msg = (
                        f"{self.where}: every statement of a subscription prepares against "
                        f"the database, found {statement.event} failing on "
                        f"{self.spec.label}: {exc}; create the table and columns it names"
                    )
                    raise SchemaError(
                        msg, table=self.spec.qualified_name, statement=statement.sql
                    ) from exc
        finally:
            await give_back(pool, conn)
        self._permit = broker.wakes.permit(self.spec.qualified_name, self.group)
        ctx = FormContext(
            spec=self.spec,
            dialect=broker.dialect,
            statements=self.statements,
            pool=pool,
            clock=broker.clock,
            group=self.group,
            lease=self.queue.lease_for or broker.lease,
            transactional=self.queue.mode is Transactional,
            wake=self._permit.set,
        )
        if self.spec.form is Lease:
            ctx.lease = whole_seconds(ctx.lease)
            self.form: ClaimForm = LeaseForm(ctx)
        elif self.spec.form is Advisory:
            self.form = AdvisoryForm(ctx)
        else:
            assert self.spec.form is RowLock
            self.form = RowLockForm(ctx)
        workers = self.queue.worker_count
        if self.form.holds_connections:
            # A subscription never takes the pool's last connection.
            workers = min(workers, pool.max_size - 1)
        if (
            workers > 1
            and ctx.transactional
            and broker.dialect.one_claim_at_a_time
            and self.spec.opening in (Immediate, Exclusive)
        ):
            # SQLite's single write lock, taken at BEGIN: a second delivery's transaction would
            # wait on the first one's and fail, so one delivery is in work at a time.
            logger.warning(
                "%s: %s takes SQLite's write lock when its transaction begins, so one "
                "transactional delivery is in work at a time; workers(%d) serves as workers(1)",
                self.where,
                self.spec.label,
                workers,
            )
            workers = 1
        self._slots = trio.Semaphore(workers)

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self._work_area)
            task_status.started()
            try:
                with self._claim_scope:
                    await self._claim_loop()
            finally:
                self._claims_done.set()

    def stop(self) -> None:
        """Stop claiming; in-work handlers get the grace period."""
        self._claim_scope.cancel()

    async def _work_area(self, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as upkeep:
                await upkeep.start(self.form.keep)
                async with trio.open_nursery() as handlers:
                    self._handlers = handlers
                    task_status.started()
                    await self._claims_done.wait()
                    self._stopping = True
                    if isinstance(self.form, AdvisoryForm):
                        self.form.begin_shutdown()
                    handlers.cancel_scope.deadline = trio.current_time() + self.grace
                released, closed = await self.form.shutdown()
                self.locks_released += released
                # The form counts the sessions closed from the shutdown's start on.
                self.connections_closed += closed
                upkeep.cancel_scope.cancel()

    async def _claim_loop(self) -> None:
        """Claim while a worker is free, one claim per free worker at most (REFERENCE.md
        §3.1): a second claim runs beside the first only where the dialect allows claims side
        by side, the last claim found rows, and the pool has two connections to spare."""
        queue = self.queue
        self._poll = (queue.poll_every or self.broker.poll_interval).total_seconds()
        self._per_claim = queue.batch_size or 1
        # A claim of the lease or advisory form can feed every free worker at once; a row lock
        # claim is one transaction, so it feeds one; SQLite's key registry takes one at a time.
        self._spread = (
            queue.batch_size is None
            and not isinstance(self.form, RowLockForm)
            and not (isinstance(self.form, AdvisoryForm) and not self.form.holds_connections)
        )
        self._side_by_side = not self.broker.dialect.claims_one_at_a_time(self.spec)
        async with trio.open_nursery() as claims:
            while True:
                await self._slots.acquire()
                try:
                    while not self._may_claim():
                        await self._claim_ended.wait()
                    if self._failed_at is not None:
                        await trio.sleep_until(self._failed_at + CLAIM_ERROR_WAIT)
                        self._failed_at = None
                    if self._dry_at is not None:
                        await self._wait_for_rows(self._dry_at)
                except BaseException:
                    self._slots.release()
                    raise
                slots = 1
                if self._spread:
                    while self._slots.value > 0:
                        self._slots.acquire_nowait()
                        slots += 1
                self._in_flight += 1
                claims.start_soon(self._claim, slots)

    def _may_claim(self) -> bool:
        if self._in_flight == 0:
            return True
        # One claim probes until one takes rows: at first, and after one ran dry or failed.
        if not self._side_by_side or not self._found_rows:
            return False
        return self.broker.pool.spare >= 2

    async def _wait_for_rows(self, dry_at: float) -> None:
        """The last claim ran dry: wait out the poll interval counted from then, or a wake."""
        self._idle = True
        self._idle_changed.set()
        try:
            with trio.move_on_at(dry_at + self._poll):
                await self._permit.wait()
        finally:
            self._dry_at = None
            self._idle = False
            self._idle_changed = trio.Event()

    async def _claim(self, slots: int) -> None:
        limit = slots * self._per_claim if self._spread else self._per_claim
        try:
            deliveries = await self.form.claim(limit)
        except TrinboxError:
            self._give_slots(slots)
            logger.warning("%s: a claim failed; next claim in 1 s", self.where, exc_info=True)
            # The next claim waits the fixed second, whatever the poll interval.
            self._failed_at = trio.current_time()
            self._found_rows = False
            self._claim_done()
            return
        except BaseException:
            self._give_slots(slots)
            self._claim_done()
            raise
        units: list[list[Delivery]] = (
            [deliveries]
            if self.queue.batch_size is not None and deliveries
            else [[d] for d in deliveries]
        )
        assert self._handlers is not None
        for unit in units:
            self._handlers.start_soon(self._work, unit)
        self._give_slots(slots - len(units))
        self._after_claim(deliveries)
        self._claim_done()

    def _after_claim(self, deliveries: Claimed) -> None:
        """A claim that took fewer rows than it asked for ran dry: the next one waits."""
        self._found_rows = bool(deliveries) and not deliveries.exhausted
        if not self._found_rows:
            self._dry_at = trio.current_time()
            self._idle = True
            self._idle_changed.set()

    def _may_chain(self) -> bool:
        """Whether a settling delivery claims the next row for its worker in the same round
        trip: single deliveries of the row lock form, of the lease form where its claim is one
        statement (not MySQL's), and of the advisory form where keys are session locks, while
        claims find rows and claiming goes on. On SQLite the chained lease claim and the claim
        loop's still take the one write lock in turn."""
        return (
            (
                isinstance(self.form, RowLockForm)
                or (isinstance(self.form, LeaseForm) and self.form.claims_in_one_statement)
                or (isinstance(self.form, AdvisoryForm) and self.form.holds_connections)
            )
            and self.queue.batch_size is None
            and self._found_rows
            and not self._stopping
            and not self._claim_scope.cancel_called
        )

    def _claim_done(self) -> None:
        self._in_flight -= 1
        self._claim_ended.set()
        self._claim_ended = trio.Event()

    def _give_slots(self, count: int) -> None:
        for _ in range(count):
            self._slots.release()

    # -- one unit of work --------------------------------------------------------------------------

    async def _work(self, deliveries: list[Delivery]) -> None:
        """Handle a unit of work, and the units its settlements claimed for this worker."""
        try:
            while deliveries:
                try:
                    chained = await self._handle(deliveries)
                finally:
                    self.finished += len(deliveries)
                    self._finished_changed.set()
                    self._finished_changed = trio.Event()
                deliveries = chained or []
        finally:
            self._slots.release()

    async def wait_idle(self) -> None:
        """Wait until the claim loop waits for its poll interval or a wake (its last claim
        found fewer rows than it could take)."""
        while not self._idle:
            await self._idle_changed.wait()

    async def wait_finished(self, count: int) -> None:
        """Wait until ``count`` deliveries in all have been settled or released."""
        while self.finished < count:
            await self._finished_changed.wait()

    @property
    def in_work(self) -> int:
        """Deliveries claimed and not yet settled or released."""
        return int(getattr(self.form, "in_work", 0))

    async def _handle(self, deliveries: list[Delivery]) -> list[Delivery] | None:
        """Decode, run the handler, settle; the rows a settlement claimed for this worker."""
        policy = self.queue.failure
        ready: list[Delivery] = []
        messages: list[object] = []
        for delivery in deliveries:
            try:
                messages.append(
                    decode_message(self.plan, self.spec, delivery.values, self.queue.codec_used)
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
        try:
            args = await self._arguments(ready, messages)
            result = await self.subscriber.handler(*args)
            outcomes = self._outcomes(result, len(ready))
        except trio.Cancelled:
            await self._drop(ready)
            raise
        except Exception as exc:
            if policy.handler is FailurePolicy.FAIL_FAST:
                logger.error("%s: the handler raised; shutting down", self.where, exc_info=True)
                await self._drop(ready)
                self._on_fail_fast(exc)
                return None
            logger.warning(
                "%s: the handler raised; policy %s",
                self.where,
                policy.handler.value,
                exc_info=True,
            )
            steps: list[Step] = []
            for delivery in ready:
                step = self._policy_step(delivery, policy.handler)
                if isinstance(step, Ack) and delivery.tx_open:
                    step = Drop()  # same SQL as ack, and the handler's writes never commit
                steps.append(step)
            await self._settle_all(list(zip(ready, steps, strict=True)))
            return None
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
                    self.broker.wakes.wake(table, group)
        return chained

    async def _arguments(self, ready: list[Delivery], messages: list[object]) -> list[object]:
        args: list[object] = [messages if self.plan.batch else messages[0]]
        for key in self.plan.keys:
            if key == "attempt":
                args.append(Attempt(ready[0].attempt or 1))
            elif key == "pool":
                args.append(self.broker.database)
            else:
                conn = await self.form.open_transaction(ready[0])
                args.append(Tx(conn, self.broker._publish_in))
        return args

    def _outcomes(self, result: object, count: int) -> list[HandlerOutcome]:
        if result is None:
            return [HandlerOutcome.ack()] * count
        if isinstance(result, HandlerOutcome):
            return [result] * count
        if (
            self.plan.batch
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
            delay = self.queue.failure.retry_delay
            outcome = HandlerOutcome.retry_after(delay) if delay else HandlerOutcome.retry()
            return self._step(delivery, outcome)
        return Drop()

    def _step(self, delivery: Delivery, outcome: HandlerOutcome) -> Step:
        if outcome.is_ack:
            return Ack()
        if outcome.is_drop:
            return Drop()
        if (
            self.dead_letter is not None
            and self.max_attempts is not None
            and delivery.attempt is not None
            and delivery.attempt >= self.max_attempts
        ):
            logger.warning(
                "%s: the row's attempts are spent (id %r, attempt %d); moving it to %s",
                self.where,
                delivery.id,
                delivery.attempt,
                self.dead_letter.label,
            )
            return DeadLetterStep(self.dead_letter)
        if outcome.delay is not None:
            if self.spec.retry_after is None:
                logger.warning(
                    "%s: retry_after needs a RetryAfter field; row %r is retried at once",
                    self.where,
                    delivery.id,
                )
                return Retry()
            return RetryAt(self.broker.clock() + outcome.delay)
        return Retry()

    async def _settle(self, delivery: Delivery, step: Step) -> bool:
        """Settle shielded: a shutdown waits for settlements in flight. Whether it took
        effect."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(SETTLE_TIMEOUT) as scope:
                try:
                    await self.form.settle(delivery, step)
                    return True
                except TrinboxError as exc:
                    self._settle_failed(delivery, step, exc)
            if scope.cancelled_caught:
                logger.warning("%s: settling row %r took too long", self.where, delivery.id)
                await self._drop([delivery])
        return False

    def _settle_failed(self, delivery: Delivery, step: Step, error: TrinboxError) -> None:
        self.settle_errors.append(error)
        logger.warning(
            "%s: settling row %r (%s) failed: %s", self.where, delivery.id, step.event, error
        )

    async def _settle_and_claim(
        self, delivery: Delivery, step: Step
    ) -> tuple[bool, Claimed | None]:
        """:meth:`_settle`, with the next claim for this worker in the same round trip:
        whether the settlement took effect, and what the claim took."""
        form = self.form
        assert isinstance(form, RowLockForm | LeaseForm | AdvisoryForm)
        with trio.CancelScope(shield=True):
            with trio.move_on_after(SETTLE_TIMEOUT):
                try:
                    chained = await form.settle_and_claim(delivery, step, self._per_claim)
                except TrinboxError as exc:  # the forms report their errors; never lose a worker
                    chained = Chained(error=exc)
                if chained.error is not None:
                    self._settle_failed(delivery, step, chained.error)
                if chained.claim_error is not None:
                    logger.warning(
                        "%s: a claim failed: %s; next claim in 1 s", self.where, chained.claim_error
                    )
                    self._failed_at = trio.current_time()
                    self._found_rows = False
                elif chained.claimed is not None:
                    self._after_claim(chained.claimed)
                return chained.error is None, chained.claimed
            logger.warning("%s: settling row %r took too long", self.where, delivery.id)
            await self._drop([delivery])
        return False, None

    async def _settle_all(self, items: list[tuple[Delivery, Step]]) -> None:
        """Settle the deliveries of one claim together, shielded and bounded like one."""
        if len(items) == 1:
            await self._settle(*items[0])
            return
        with trio.CancelScope(shield=True):
            with trio.move_on_after(SETTLE_TIMEOUT) as scope:
                errors = await self.form.settle_batch(items)
                for (delivery, step), error in zip(items, errors, strict=True):
                    if error is not None:
                        self._settle_failed(delivery, step, error)
            if scope.cancelled_caught:
                logger.warning("%s: settling a batch took too long", self.where)
                await self._drop([d for d, _ in items if not d.settled])

    async def _drop(self, deliveries: list[Delivery]) -> None:
        """Deliveries left unsettled: return their rows, each within five seconds."""
        with trio.CancelScope(shield=True):
            for delivery in deliveries:
                with trio.move_on_after(RELEASE_TIMEOUT):
                    try:
                        if self._stopping:
                            if await self.form.release_for_shutdown(delivery):
                                self.locks_released += 1
                        else:
                            await self.form.release(delivery)
                    except TrinboxError:
                        logger.warning(
                            "%s: releasing row %r failed", self.where, delivery.id, exc_info=True
                        )
