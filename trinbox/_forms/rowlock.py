"""The row lock form: FOR UPDATE SKIP LOCKED in a transaction held while the handler runs.

The claim's transaction is the lock: settlements run in it and commit; a dropped delivery
rolls back and its row returns at once. The attempt is counted when a retry settles. The rows
of one claim (a batch) share the transaction, which commits all-or-nothing when the last of
them finishes; a batch settles in one round trip. A settling worker may begin its next claim's
transaction on the same connection, in the round trip that commits (settle_and_claim).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from .._bounds import cleanup_scope
from .._drivers._base import Connection, Op, Record
from .._errors import BatchRolledBack, DatabaseError, TrinboxError
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    FormTraits,
    Step,
    attempt_of,
    held,
    step_statements,
    step_values,
    values_of,
)
from .._holders.connections import end_transaction, give_back
from .heads import due_groups

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

    closed = 0

    def __init__(self, ctx: FormContext) -> None:
        self._ctx = ctx
        self._in_work: set[Delivery] = set()
        # Over every group of a FIFO table, each claim reads the groups first: a settling
        # worker does not chain its claim into its settlement.
        chains = ctx.statements.heads is None
        self.traits = FormTraits(holds_connections=True, feeds_every_worker=False, chains=chains)

    @property
    def in_work(self) -> int:
        return len(self._in_work)

    async def claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        if ctx.statements.heads is not None:
            return await self._claim_a_head()
        conn = await ctx.pool.acquire("row lock delivery")
        try:
            # One round trip: begin, select (and the handler's savepoint in transactional mode).
            results = await conn.script(self._claim_ops(limit))
            records = self._taken(results, 0)
        except BaseException:
            await end_transaction(ctx.pool, conn)
            raise
        return await self._claimed(conn, records, limit)

    async def _claim_a_head(self) -> Claimed:
        """Every group of a FIFO table: read the groups whose head is due, then claim the
        head of the first one that no other claim holds, as a subscription to that group
        claims it (its guard, then its head, in the transaction the delivery holds). A group
        another claim took meanwhile takes nothing; its transaction rolls back and the next
        group is tried."""
        ctx = self._ctx
        assert ctx.spec.group is not None
        column = ctx.spec.group.column
        conn = await ctx.pool.acquire("row lock delivery")
        records: list[Record] = []
        try:
            busy = {delivery.values[column] for delivery in self._in_work}
            groups = await due_groups(ctx, conn, ctx.clock(), 1, busy)
            if not groups:
                await give_back(ctx.pool, conn)
                return Claimed(exhausted=True)
            for n, group in enumerate(groups):
                if n:
                    await conn.rollback()  # the group before took nothing
                records = self._taken(await conn.script(self._claim_ops(1, group)), 0)
                if records:
                    break
        except BaseException:
            await end_transaction(ctx.pool, conn)
            raise
        return await self._claimed(conn, records, 1)

    def _claim_ops(self, limit: int, group: object = None) -> list[Op]:
        """The claim's transaction: begin, the guard of a FIFO group, the select; ``group``
        the group claimed over every group of a FIFO table, else the subscription's."""
        ctx = self._ctx
        st = ctx.statements
        assert st.begin is not None
        claim = st.claim[0]
        values: dict[str, object] = {
            "group": ctx.group if group is None else group,
            "now": ctx.clock(),
            "limit": limit,
        }
        ops = [Op("begin", st.begin.sql)]
        if st.guard is not None:
            # A FIFO group: the guard first; the transaction holds it until the row settles.
            ops.append(Op("fetch", st.guard.sql, st.guard.bind(values)))
        ops.append(Op("fetch", claim.sql, claim.bind(values)))
        if ctx.transactional:
            ops.append(Op("execute", f"SAVEPOINT {SAVEPOINT}"))
        return ops

    def _taken(self, results: Sequence[object], begin: int) -> list[Record]:
        """The rows the claim's ops (from ``begin`` in ``results``) took: none when a FIFO
        group's guard found the group held by another transaction."""
        at = begin + 1
        if self._ctx.statements.guard is not None:
            if not held(results[at]):
                return []
            at += 1
        records = results[at]
        assert isinstance(records, list)
        return records

    async def _claimed(self, conn: Connection, records: list[Record], limit: int) -> Claimed:
        """The deliveries of a claim's rows, holding its transaction on ``conn``; none (the
        transaction rolled back, the connection given back) when it took no row."""
        ctx = self._ctx
        if not records:
            await end_transaction(ctx.pool, conn)
            return Claimed(exhausted=True)
        tx = _ClaimTransaction(conn, remaining=len(records))
        deliveries = Claimed(exhausted=len(records) < limit)
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
                await self._leave_transaction(delivery)
                return Chained(claim_error=exc)
            tx.failed = True
            await self._leave_transaction(delivery)
            return Chained(error=exc)
        except BaseException:
            tx.failed = True
            delivery.settled = True
            await self._leave_transaction(delivery)
            raise
        # The claim's transaction carries on, on the same connection.
        delivery.settled = True
        delivery.conn = None
        tx.remaining = 0
        self._in_work.discard(delivery)
        records = self._taken(results, len(settling))
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
            await self._leave_transaction(delivery)

    async def settle_batch_and_claim(
        self, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch does not chain its claim in this form."""
        return await self.settle_batch(items), Chained()

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
                await self._leave_transaction(delivery)

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

    async def _leave_transaction(self, delivery: Delivery) -> None:
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
            await self._leave_transaction(delivery)

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

    def start_serving(self) -> None:
        """Nothing held for the process."""

    def stop_serving(self) -> None:
        """Nothing held for the process."""

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
