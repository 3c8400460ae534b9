"""The row lock form: FOR UPDATE SKIP LOCKED in a transaction held while the handler runs.

The claim's transaction is the lock: settlements run in it and commit; a dropped delivery
rolls back and its row returns at once. The attempt is counted when a retry settles. The rows
of one claim (a batch) share the transaction, which commits all-or-nothing when the last of
them finishes; a batch settles in one round trip. A settling worker may begin its next claim's
transaction on the same connection, in the round trip that commits (settle_and_claim).

With ``count_attempt_at_claim()`` a claim takes one more round trip: under a session lock of the
queue (the guard), the claim's transaction counts the attempt of each row it locked and commits,
then a new transaction locks the rows again by id and the guard is let go; a retry then settles
by rollback, the count standing. A row already past ``max_attempts`` (its handler died with its
process) is handed out ``spent``: the runtime moves it to the dead letter.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from .._bounds import cleanup_scope
from .._drivers._base import Connection, Op, Record
from .._errors import BatchRolledBack, DatabaseError, TrinboxError
from ._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    FormTraits,
    Step,
    attempt_of,
    discard,
    end_transaction,
    give_back,
    step_statements,
    step_values,
    values_of,
)

__all__ = ["RowLockForm"]

logger = logging.getLogger("trinbox.settle")

SAVEPOINT = "trinbox_claim"


@dataclass(eq=False)
class _ClaimTransaction:
    """The transaction one claim opened, shared by its deliveries."""

    conn: Connection
    remaining: int
    written: int = 0
    failed: bool = False
    committed: bool = False  # the last settlement committed with its statement
    ended: bool = False  # the connection went back to the pool, or was abandoned
    lock: trio.Lock = field(default_factory=trio.Lock)


class RowLockForm:
    """Claims and settles rows of one row lock table for one subscription."""

    traits = FormTraits(holds_connections=True, feeds_every_worker=False, chains=True)
    closed = 0

    def __init__(self, ctx: FormContext) -> None:
        self._ctx = ctx
        self._in_work: set[Delivery] = set()

    @property
    def in_work(self) -> int:
        return len(self._in_work)

    async def claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        if ctx.count_at_claim:
            return await self._claim_counted(limit)
        conn = await ctx.pool.acquire()
        try:
            # One round trip: begin, select (and the handler's savepoint in transactional mode).
            results = await conn.script(self._claim_ops(limit))
            records = results[1]
            assert isinstance(records, list)
        except BaseException:
            await end_transaction(ctx.pool, conn)
            raise
        return await self._claimed(conn, records, limit)

    def _claim_ops(self, limit: int) -> list[Op]:
        ctx = self._ctx
        st = ctx.statements
        assert st.begin is not None
        claim = st.claim[0]
        values: dict[str, object] = {"group": ctx.group, "now": ctx.clock(), "limit": limit}
        ops = [Op("begin", st.begin.sql), Op("fetch", claim.sql, claim.bind(values))]
        if ctx.transactional:
            ops.append(Op("execute", f"SAVEPOINT {SAVEPOINT}"))
        return ops

    def _guard(self, *, unlock: bool) -> Op:
        """Take (waiting) or let go of the subscription's count guard (``Dialect.count_guard``):
        held by a claim from its select to its relock, across the count's commit."""
        ctx = self._ctx
        st = ctx.statements.unlock if unlock else ctx.statements.lock
        assert st is not None
        key = f"trinbox-count:{ctx.spec.qualified_name}:{ctx.group or ''}"
        return Op("execute", st.sql, st.bind({"key": key}))

    def _select_ops(self, limit: int) -> list[Op]:
        """The guard and the claim's select, in a transaction begun already."""
        claim = self._ctx.statements.claim[0]
        values: dict[str, object] = {"group": self._ctx.group, "now": self._ctx.clock()}
        values["limit"] = limit
        return [self._guard(unlock=False), Op("fetch", claim.sql, claim.bind(values))]

    async def _claim_counted(self, limit: int) -> Claimed:
        """A claim counting the attempt: the guard, the locking select, then the count, its
        commit, the relock and the guard let go (``_count``). A connection that failed while
        it may hold the guard is closed, so that the server lets the guard go."""
        ctx = self._ctx
        st = ctx.statements
        assert st.begin is not None
        conn = await ctx.pool.acquire()
        try:
            results = await conn.script([Op("begin", st.begin.sql), *self._select_ops(limit)])
            records = results[-1]
            assert isinstance(records, list)
            if not records:
                await conn.script([Op("commit"), self._guard(unlock=True)])
                await give_back(ctx.pool, conn)
                return Claimed(exhausted=True)
            relocked, spent = await self._count(conn, records)
        except BaseException:
            await discard(ctx.pool, conn)
            raise
        exhausted = len(records) < limit
        if not relocked:
            await end_transaction(ctx.pool, conn)
            return Claimed(exhausted=exhausted)
        return self._deliveries(conn, relocked, exhausted, spent)

    async def _count(
        self, conn: Connection, records: list[Record]
    ) -> tuple[list[Record], dict[object, int]]:
        """One round trip: count the attempt of each locked row and commit, then begin the
        deliveries' transaction and lock the rows again by id (``_count_ops``)."""
        ops, first, count, spent = self._count_ops(records)
        results = await conn.script(ops)
        return self._relocked(results, first, count), spent

    def _count_ops(self, records: list[Record]) -> tuple[list[Op], int, int, dict[object, int]]:
        """The count's round trip: the statements, the index of the first relock (the commit
        is the op before the ``begin`` before it), how many rows it relocks, and the rows
        found spent (id: attempt). A row whose counted attempts are past ``max_attempts`` (its
        handler never settled: the process died) is not counted again: it is relocked and
        handed out ``spent``, for the runtime to move to the dead letter without running the
        handler. The records the relocks return read the attempt as before the count."""
        ctx = self._ctx
        st = ctx.statements
        assert st.begin is not None
        count, relock = st.take
        claim = st.claim[0]
        now = ctx.clock()
        ops: list[Op] = []
        spent: dict[object, int] = {}
        ids: list[object] = []
        for record in records:
            values = values_of(claim, record, ctx.spec)
            ident = values[ctx.spec.id.column]
            attempt = attempt_of(ctx.spec, values)
            if (
                ctx.dead_letter is not None
                and ctx.max_attempts is not None
                and attempt is not None
                and attempt > ctx.max_attempts
            ):
                spent[ident] = attempt
            else:
                ops.append(Op("execute", count.sql, count.bind({"id": ident})))
            ids.append(ident)
        ops += [Op("commit"), Op("begin", st.begin.sql)]
        first = len(ops)
        for ident in ids:
            bound = {"id": ident, "group": ctx.group, "now": now}
            ops.append(Op("fetch", relock.sql, relock.bind(bound)))
        ops.append(self._guard(unlock=True))
        if ctx.transactional:
            ops.append(Op("execute", f"SAVEPOINT {SAVEPOINT}"))
        return ops, first, len(ids), spent

    @staticmethod
    def _relocked(results: Sequence[object], first: int, count: int) -> list[Record]:
        relocked: list[Record] = []
        for found in results[first : first + count]:
            assert isinstance(found, list)
            relocked += found
        return relocked

    async def _settle_and_count(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """``settle_and_claim`` counting the attempt at claim: the settlement's statements,
        the guard and the next claim's select, then the count, whose commit is the
        settlement's too (one commit per delivery, as without the count), the relock and the
        guard let go. A failure before that commit fails the settlement (it rolls back);
        after it, only the claim. A failed connection is closed (it may hold the guard)."""
        ctx = self._ctx
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        committed = False
        try:
            results = await tx.conn.script(
                [*self._step_ops(delivery, step), *self._select_ops(limit)]
            )
            records = results[-1]
            assert isinstance(records, list)
            if records:
                ops, first, count, spent = self._count_ops(records)
                done_at = first - 1  # the begin after the count's commit
            else:
                ops, first, count, spent = [Op("commit"), self._guard(unlock=True)], 0, 0, {}
                done_at = 1
            try:
                found = await tx.conn.script(ops)
            except DatabaseError as exc:
                committed = exc.step is not None and exc.step >= done_at
                raise
            committed = True
            relocked = self._relocked(found, first, count)
        except BaseException as exc:
            delivery.settled = True
            tx.ended = True
            ctx.pool.abandon(tx.conn)
            if committed:
                tx.written += 1
                tx.committed = True
            else:
                tx.failed = True
            await self._finish(delivery)
            if not isinstance(exc, TrinboxError):
                raise
            return Chained(claim_error=exc) if committed else Chained(error=exc)
        delivery.settled = True
        delivery.conn = None
        tx.remaining = 0
        self._in_work.discard(delivery)
        exhausted = len(records) < limit
        if not relocked:
            if records:
                await end_transaction(ctx.pool, tx.conn)
            else:
                await give_back(ctx.pool, tx.conn)
            return Chained(claimed=Claimed(exhausted=exhausted))
        return Chained(claimed=self._deliveries(tx.conn, relocked, exhausted, spent))

    async def _claimed(self, conn: Connection, records: list[Record], limit: int) -> Claimed:
        """The deliveries of a claim's rows, holding its transaction on ``conn``; none (the
        transaction rolled back, the connection given back) when it took no row."""
        if not records:
            await end_transaction(self._ctx.pool, conn)
            return Claimed(exhausted=True)
        return self._deliveries(conn, records, len(records) < limit)

    def _deliveries(
        self,
        conn: Connection,
        records: list[Record],
        exhausted: bool,
        spent: dict[object, int] | None = None,
    ) -> Claimed:
        """The claim's deliveries; those of ``spent`` rows (the count at claim found their
        attempts spent) carry the attempt as read, uncounted, and go to the dead letter."""
        ctx = self._ctx
        tx = _ClaimTransaction(conn, remaining=len(records))
        deliveries = Claimed(exhausted=exhausted)
        claim = ctx.statements.claim[0]
        for record in records:
            values = values_of(claim, record, ctx.spec)
            delivery = Delivery(
                values=values,
                id=values[ctx.spec.id.column],
                attempt=attempt_of(ctx.spec, values),
                conn=conn,
                batch=tx,
                tx_open=ctx.transactional,
            )
            if spent and delivery.id in spent:
                delivery.spent = True
                delivery.attempt = spent[delivery.id]
            deliveries.append(delivery)
        self._in_work.update(deliveries)
        return deliveries

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and, in the same round trip on its connection, begin the
        next claim's transaction and select: the worker that frees up claims for itself. A
        step with nothing to commit (it settles by rollback) settles alone."""
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        if tx.remaining != 1 or tx.failed or not step_statements(self._ctx.statements, step):
            try:
                await self.settle(delivery, step)
            except TrinboxError as exc:
                return Chained(error=exc)
            return Chained()
        if self._ctx.count_at_claim:
            return await self._settle_and_count(delivery, step, limit)
        settling = [*self._step_ops(delivery, step), Op("commit")]
        try:
            results = await tx.conn.script([*settling, *self._claim_ops(limit)])
        except TrinboxError as exc:
            at = exc.step if isinstance(exc, DatabaseError) else None
            delivery.settled = True
            if at is not None and at >= len(settling):
                # Committed; only the claim failed, and its transaction is rolled back when
                # the connection goes back to the pool.
                tx.written += 1
                tx.committed = True
                await self._finish(delivery)
                return Chained(claim_error=exc)
            tx.failed = True
            await self._finish(delivery)
            return Chained(error=exc)
        except BaseException:
            tx.failed = True
            delivery.settled = True
            await self._finish(delivery)
            raise
        # The claim's transaction carries on, on the same connection.
        delivery.settled = True
        delivery.conn = None
        tx.remaining = 0
        self._in_work.discard(delivery)
        records = results[len(settling) + 1]
        assert isinstance(records, list)
        return Chained(claimed=await self._claimed(tx.conn, records, limit))

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None
        return delivery.conn

    async def settle(self, delivery: Delivery, step: Step) -> None:
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        try:
            async with tx.lock:
                if tx.failed:
                    raise self._rolled_back(delivery)
                try:
                    await self._run_step(tx, delivery, step)
                except BaseException:
                    tx.failed = True
                    raise
        finally:
            delivery.settled = True
            await self._finish(delivery)

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """Every delivery of the claim at once: their statements and the commit in one round
        trip. A failing statement fails its delivery, the ones after it run nothing
        (``BatchRolledBack``), and the rollback undoes the ones before it."""
        tx = items[0][0].batch
        assert isinstance(tx, _ClaimTransaction)
        assert all(delivery.batch is tx for delivery, _ in items)
        errors: list[TrinboxError | None] = [None] * len(items)
        try:
            async with tx.lock:
                if tx.failed:
                    return [self._rolled_back(delivery) for delivery, _ in items]
                ops: list[Op] = []
                owners: list[int] = []  # the item each statement settles
                now = self._ctx.clock()
                for i, (delivery, step) in enumerate(items):
                    values = {"id": delivery.id, "now": now, **step_values(step)}
                    for st in step_statements(self._ctx.statements, step):
                        ops.append(Op("execute", st.sql, st.bind(values)))
                        owners.append(i)
                last = tx.remaining == len(items)
                if ops and last:
                    ops.append(Op("commit"))
                try:
                    if ops:
                        await tx.conn.script(ops)
                except TrinboxError as exc:
                    tx.failed = True
                    at = exc.step if isinstance(exc, DatabaseError) else None
                    failed = owners[at] if at is not None and at < len(owners) else None
                    if failed is None:  # the commit (or the round trip itself) failed
                        failed = owners[-1]
                    tx.written += len(set(owners[: owners.index(failed)]))
                    errors[failed] = exc
                    for i in range(failed + 1, len(items)):
                        errors[i] = self._rolled_back(items[i][0])
                    return errors
                tx.written += len(set(owners))
                if ops and last:
                    tx.committed = True
            return errors
        finally:
            for delivery, _ in items:
                delivery.settled = True
                await self._finish(delivery)

    def _rolled_back(self, delivery: Delivery) -> BatchRolledBack:
        msg = (
            f"{self._ctx.spec.label}: the rows of a row lock batch commit together, found an "
            f"earlier settlement of the batch failed; row {delivery.id!r} returns to the queue "
            f"with the rest of the batch"
        )
        return BatchRolledBack(msg)

    async def _run_step(self, tx: _ClaimTransaction, delivery: Delivery, step: Step) -> None:
        """Run the step's statements in the claim's transaction, in one round trip; the last
        delivery of the claim commits in that same round trip."""
        statements = step_statements(self._ctx.statements, step)
        ops = self._step_ops(delivery, step)
        last = tx.remaining == 1 and not tx.failed
        if statements and (last or (tx.written and tx.remaining == 1)):
            ops.append(Op("commit"))
        if ops:
            await tx.conn.script(ops)
        if statements:
            tx.written += 1
        if ops and ops[-1].kind == "commit":
            tx.committed = True

    def _step_ops(self, delivery: Delivery, step: Step) -> list[Op]:
        values = {"id": delivery.id, "now": self._ctx.clock(), **step_values(step)}
        ops = []
        if delivery.tx_open and not isinstance(step, Ack):
            # Every outcome but ack discards the handler's writes first.
            ops.append(Op("execute", f"ROLLBACK TO SAVEPOINT {SAVEPOINT}"))
        # A statement changing no row still settles: the transaction is the lock.
        statements = step_statements(self._ctx.statements, step)
        ops += [Op("execute", st.sql, st.bind(values)) for st in statements]
        return ops

    async def _finish(self, delivery: Delivery) -> None:
        """The last delivery of a claim ends its transaction: commit what was written, unless
        a settlement failed (then everything rolls back and every row returns)."""
        self._in_work.discard(delivery)
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        delivery.conn = None
        tx.remaining -= 1
        if tx.remaining > 0 or tx.ended:
            return
        # Within the bound of the settlement or the drop around it (trinbox._bounds).
        with cleanup_scope():
            committed = tx.committed
            if tx.written and not tx.failed and not committed:
                try:
                    await tx.conn.commit()
                    committed = True
                except DatabaseError:
                    logger.warning("%s: commit failed", self._ctx.spec.label, exc_info=True)
            if tx.failed and tx.written and not committed:
                logger.warning(
                    "%s: a settlement of the batch failed; rolled back %d settlements",
                    self._ctx.spec.label,
                    tx.written,
                )
        tx.ended = True
        if committed:
            await give_back(self._ctx.pool, tx.conn)
        else:
            await end_transaction(self._ctx.pool, tx.conn)

    async def release(self, delivery: Delivery) -> None:
        """A dropped delivery finishes without writing; the last one rolls back."""
        if delivery.settled:
            return
        delivery.settled = True
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        try:
            if delivery.tx_open and tx.remaining > 1:
                async with tx.lock:
                    await tx.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        finally:
            await self._finish(delivery)

    def abandon(self, delivery: Delivery) -> None:
        """The release ran out of time: close the claim's connection at once; the server rolls
        its transaction back, and every row of the claim returns."""
        delivery.settled = True
        self._in_work.discard(delivery)
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        if not tx.ended:
            tx.ended = True
            tx.failed = True
            self._ctx.pool.abandon(tx.conn)

    def begin_shutdown(self) -> None:
        pass

    async def release_for_shutdown(self, delivery: Delivery) -> bool:
        """Shutdown stopped the handler: return the row as a drop would."""
        if delivery.settled:
            return False
        await self.release(delivery)
        return True

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    async def shutdown(self) -> tuple[int, int]:
        return 0, 0
