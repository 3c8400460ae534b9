"""The row lock form: FOR UPDATE SKIP LOCKED in a transaction held while the handler runs.

The claim's transaction is the lock: settlements run in it and commit; a dropped delivery
rolls back and its row returns at once. The attempt is counted when a retry settles. The rows
of one claim (a batch) share the transaction, which commits all-or-nothing when the last of
them finishes; a batch settles in one round trip. A settling worker may begin its next claim's
transaction on the same connection, in the round trip that commits (settle_and_claim). The
claim's transaction is its holder's (trinbox._holders.claim_transaction).

Counting the attempt at claim (``InboxQueue.count_attempt_at_claim()``, the plan's count and
relock in ``take``, its guard in ``lock``/``unlock``): a claim takes two round trips. The first
takes the queue's guard (a session lock, before the transaction begins, so that a snapshot taken
at the transaction's first read comes after the wait), begins and selects with ``FOR UPDATE SKIP
LOCKED``. The second counts the attempt of each row it locked and commits, begins the
deliveries' transaction, locks the rows again by id and lets the guard go. The rows are locked
by no transaction between the count's commit and the relock: the guard keeps every other
counting claim of the queue out of that gap (it is checked to be held: a claim without it
fails), and it is let go only after the relock has returned. So under the guard the relock finds
every counted row: a row is counted once per delivery. A process that dies after the count's
commit leaves the count standing (the server ends its session, its locks and its guard); one
that dies before it counted nothing and ran no handler. A retry settles by rollback, the count
standing. The deliveries report the attempt before the count, as the lease and advisory forms'
do: the runtime moves a row whose earlier deliveries died past ``max_attempts`` to its dead
letter (``counts_at_claim``).

The guard orders only counting claims: a subscription of the same rows without the opt-in can
lock a row in the gap, which is then counted once without a delivery.

A settling worker claims for itself as in the plain form, its settlement committing first in the
round trip that takes the guard and selects. A connection that failed while it may hold the
guard is closed, never given back, so that the server lets the guard go.
Under ``InboxQueue.limit`` each row holds a slot of its key. PostgreSQL's claim is one
statement, its slots locks of the transaction. MySQL's slots are session locks (the plan's
``slot_rows``, ``slot_lock``, ``slot_release``): the claim takes them, reads its keys'
candidate ids and locks as many by id, in round trips of its own; the claim's transaction lets
them go when it ends (before its connection goes back to the pool, or by abandoning it), and
such a claim does not chain into a settlement.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

import trio

from .._dialects._count_at_claim import GUARD_TAKEN
from .._drivers._base import Connection, Op, Record
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    FormTraits,
    Step,
    held,
    step_statements,
    values_of,
)
from .._holders.claim_transaction import SAVEPOINT, ClaimTransaction
from .._holders.connections import close, end_transaction, give_back
from .._holders.settlement import settle_alone, settlement_ran, step_ops
from ..errors import BatchRolledBack, DatabaseError, TrinboxError
from .custom import bare_delivery, claimed_ids, delivery_of, rows_of
from .heads import due_groups

__all__ = ["RowLockForm"]

logger = logging.getLogger("trinbox.settle")


class RowLockForm:
    """Claims and settles rows of one row lock table for one subscription."""

    closed = 0

    def __init__(self, ctx: FormContext) -> None:
        self._ctx = ctx
        self._in_work: set[Delivery] = set()
        # Over every group of a FIFO table, each claim reads the groups first, and a custom
        # claim runs the queue's function: a settling worker does not chain its claim into
        # its settlement.
        # A limited claim's session slots (MySQL) are let go only once its transaction has
        # ended, so no next claim chains into that transaction either.
        self._release = ctx.statements.slot_release
        chains = ctx.statements.heads is None and ctx.custom is None and self._release is None
        # Counting at claim: the claim counts the attempt in a commit of its own, then
        # relocks (the plan's count and relock, under its guard).
        self._counts = ctx.count_at_claim
        self.traits = FormTraits(
            holds_connections=True,
            feeds_every_worker=False,
            chains=chains,
            counts_at_claim=self._counts,
        )

    @property
    def in_work(self) -> int:
        return len(self._in_work)

    async def claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        if ctx.custom is not None:
            return await self._claim_custom(limit)
        if self._counts:
            return await self._claim_counted(limit)
        if ctx.statements.heads is not None:
            return await self._claim_a_head()
        if ctx.statements.slot_rows is not None:
            return await self._claim_slots(limit)
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

    async def _claim_slots(self, limit: int) -> Claimed:
        """A limited claim whose slots are session locks (MySQL, ``_session_slots.py``): the
        slots each key took, after the claim's begin; each such key's candidate ids; then as
        many of its candidates locked by id as it took slots, a candidate another claim holds
        giving way to the key's next one in another round trip. Its slots are let go with
        its transaction."""
        ctx = self._ctx
        st = ctx.statements
        assert st.slot_rows is not None and st.slot_lock is not None
        values: dict[str, object] = {"group": ctx.group, "now": ctx.clock(), "limit": limit}
        conn = await ctx.pool.acquire("row lock delivery")
        records: list[Record] = []
        try:
            ops = [Op("begin", st.begin.sql)]
            ops += [Op("fetch", claim.sql, claim.bind(values)) for claim in st.claim]
            taken = [cast("list[Record]", found) for found in (await conn.script(ops))[1:]]
            counts = [[(k, int(str(n)), int(str(got))) for k, n, got in rows] for rows in taken]
            # A slot another claim took after this one read it free: claim again at once.
            contended = any(got < tried for rows in counts for _, tried, got in rows)
            # Never more rows than distinct slots tried (a session's GET_LOCK of a name it
            # holds returns 1 again).
            wanted = [(key, min(got, tried)) for key, tried, got in counts[-1] if got]
            reads = [
                Op("fetch", st.slot_rows.sql, st.slot_rows.bind({**values, "key": key}))
                for key, _ in wanted
            ]
            found = await conn.script(reads) if reads else []
            candidates = [[row[0] for row in cast("list[Record]", ids)] for ids in found]
            records = await self._lock_slots(conn, [n for _, n in wanted], candidates, values)
            if records and ctx.transactional:
                await conn.execute(f"SAVEPOINT {SAVEPOINT}")
        except BaseException:
            await end_transaction(ctx.pool, conn, self._release)
            raise
        claimed = await self._claimed(conn, records, limit)
        claimed.exhausted = claimed.exhausted and not contended
        return claimed

    async def _lock_slots(
        self,
        conn: Connection,
        needs: list[int],
        candidates: list[list[object]],
        values: dict[str, object],
    ) -> list[Record]:
        """Lock ``needs[n]`` rows of key ``n`` among its ``candidates[n]`` by id, in order:
        each round trip the next ones, as many as the key still needs."""
        lock = self._ctx.statements.slot_lock
        assert lock is not None
        records: list[Record] = []
        needs = list(needs)
        while True:
            tried: list[int] = []  # the key of each lock op
            ops: list[Op] = []
            for n, need in enumerate(needs):
                for ident in candidates[n][:need]:
                    ops.append(Op("fetch", lock.sql, lock.bind({**values, "id": ident})))
                    tried.append(n)
                del candidates[n][:need]
            if not ops:
                return records
            for n, found in zip(tried, await conn.script(ops), strict=True):
                rows = cast("list[Record]", found)
                records += rows
                needs[n] -= len(rows)

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
        return cast("list[Record]", records)  # a fetch's result

    async def _claimed(self, conn: Connection, records: list[Record], limit: int) -> Claimed:
        """The deliveries of a claim's rows, holding its transaction on ``conn``; none (the
        transaction rolled back, the connection given back) when it took no row."""
        return await self._hold(conn, [delivery_of(self._ctx, record) for record in records], limit)

    async def _hold(self, conn: Connection, taken: list[Delivery], limit: int) -> Claimed:
        """``taken`` holding the claim's transaction on ``conn``."""
        ctx = self._ctx
        if not taken:
            await end_transaction(ctx.pool, conn, self._release)
            return Claimed(exhausted=True)
        tx = ClaimTransaction(
            ctx.pool, conn, ctx.spec.label, remaining=len(taken), release=self._release
        )
        for delivery in taken:
            delivery.conn = conn
            delivery.batch = tx
            delivery.tx_open = ctx.transactional
        deliveries = Claimed(taken, exhausted=len(taken) < limit)
        self._in_work.update(deliveries)
        return deliveries

    async def _claim_custom(self, limit: int) -> Claimed:
        """The queue's own claim in the delivery's transaction: its ids (the rows it locked),
        then their rows; an id whose fetch read no row is claimed bare."""
        ctx = self._ctx
        conn = await ctx.pool.acquire("row lock delivery")
        try:
            await conn.begin(ctx.statements.begin.sql)
            ids = await claimed_ids(ctx, conn, limit)
            rows = await rows_of(ctx, conn, ids) if ids else {}
            if ids and ctx.transactional:
                await conn.execute(f"SAVEPOINT {SAVEPOINT}")
        except BaseException:
            await end_transaction(ctx.pool, conn)
            raise
        taken = [
            delivery_of(ctx, rows[ident]) if ident in rows else bare_delivery(ctx, ident)
            for ident in ids
        ]
        return await self._hold(conn, taken, limit)

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and, in the same round trip on its connection, begin the
        next claim's transaction and select: the worker that frees up claims for itself. A
        step with nothing to commit (it settles by rollback) settles alone."""
        tx = delivery.batch
        assert isinstance(tx, ClaimTransaction)
        if tx.remaining != 1 or tx.failed or not step_statements(self._ctx.statements, step):
            return await settle_alone(self.settle, delivery, step)
        if self._counts:
            return await self._settle_and_claim_counted(delivery, tx, step, limit)
        settling = [*self._step_ops(delivery, step), Op("commit")]
        try:
            results = await tx.conn.script([*settling, *self._claim_ops(limit)])
        except TrinboxError as exc:
            delivery.settled = True
            if settlement_ran(exc, len(settling)):
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
        assert isinstance(tx, ClaimTransaction)
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
        assert isinstance(tx, ClaimTransaction)
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
                    settling = step_ops(self._ctx.statements, delivery, step, now)
                    ops += settling
                    owners += [i] * len(settling)
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

    async def _run_step(self, tx: ClaimTransaction, delivery: Delivery, step: Step) -> None:
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
        ops: list[Op] = []
        if delivery.tx_open and not isinstance(step, Ack):
            # Every outcome but ack discards the handler's writes first.
            ops.append(Op("execute", f"ROLLBACK TO SAVEPOINT {SAVEPOINT}"))
        # A statement changing no row still settles: the transaction is the lock.
        return ops + step_ops(self._ctx.statements, delivery, step, self._ctx.clock())

    async def _leave_transaction(self, delivery: Delivery) -> None:
        """The delivery is done with its claim's transaction (the last one ends it)."""
        self._in_work.discard(delivery)
        tx = delivery.batch
        assert isinstance(tx, ClaimTransaction)
        delivery.conn = None
        await tx.leave()

    async def release(self, delivery: Delivery) -> None:
        """A dropped delivery finishes without writing; the last one rolls back."""
        if delivery.settled:
            return
        delivery.settled = True
        tx = delivery.batch
        assert isinstance(tx, ClaimTransaction)
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
        assert isinstance(tx, ClaimTransaction)
        if not tx.ended:
            tx.failed = True
            tx.abandon()

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

    # -- counting the attempt at claim --------------------------------------------------------

    async def _claim_counted(self, limit: int) -> Claimed:
        """Under the guard: select and lock, then count, commit and relock (``_count``); a
        connection that failed while it may hold the guard is closed, never given back."""
        ctx = self._ctx
        conn = await ctx.pool.acquire("row lock delivery")
        try:
            results = await conn.script(self._select_ops(limit))
            self._check_guard(results[0])
            records = results[-1]
            assert isinstance(records, list)
            relocked = await self._count(conn, records)
        except BaseException:
            await close(ctx.pool, conn)
            raise
        return await self._counted(conn, records, relocked, limit)

    def _guard(self, *, unlock: bool) -> Op:
        """Take (waiting) or let go of the subscription's guard, named for its table and
        group: the claims of one group lock rows of that group only."""
        ctx = self._ctx
        st = ctx.statements.unlock if unlock else ctx.statements.lock
        assert st is not None
        key = f"trinbox-count:{ctx.spec.qualified_name}:{ctx.group or ''}"
        return Op("execute" if unlock else "fetch", st.sql, st.bind({"key": key}))

    def _select_ops(self, limit: int) -> list[Op]:
        """The guard, then the claim's transaction and its select (``_claim_ops`` without the
        savepoint: the relock's transaction takes it)."""
        assert self._ctx.statements.guard is None  # no FIFO group (refused by the queue)
        ops = self._claim_ops(limit)
        return [self._guard(unlock=False), *ops[:2]]

    def _check_guard(self, found: object) -> None:
        """Go on only under the guard: a claim without it could count a row that another
        claim counted and has not relocked yet."""
        assert isinstance(found, list)
        rows = cast("list[Record]", found)  # the lock statement's fetch
        value = rows[0][0] if rows and len(rows[0]) else None
        if value == GUARD_TAKEN:
            return
        st = self._ctx.statements.lock
        assert st is not None
        msg = (
            f"{self._ctx.spec.label}: .count_attempt_at_claim() claims under a session lock of "
            f"the queue, found the lock statement returned {value!r} instead of "
            f"{GUARD_TAKEN} (the lock was not taken); check the server's lock functions "
            f"(GET_LOCK, pg_advisory_lock) and their limits, or drop .count_attempt_at_claim()"
        )
        raise DatabaseError(msg, statement=st.sql)

    async def _count(self, conn: Connection, records: list[Record]) -> list[Record]:
        """One round trip under the guard: count the attempt of each locked row and commit,
        begin the deliveries' transaction, lock the rows again by id, let the guard go. A
        claim that found no row commits (nothing) and lets the guard go."""
        if not records:
            await conn.script([Op("commit"), self._guard(unlock=True)])
            return []
        ops, first, count = self._count_ops(records)
        results = await conn.script(ops)
        return self._relocked(results, first, count)

    def _count_ops(self, records: list[Record]) -> tuple[list[Op], int, int]:
        """The count's round trip: the statements, the index of the first relock, and how
        many rows it relocks. The relocks read the attempt as before the count. The guard is
        let go after the last relock, and only then."""
        ctx = self._ctx
        st = ctx.statements
        assert st.begin is not None
        count, relock = st.take
        now = ctx.clock()
        ops: list[Op] = []
        ids: list[object] = []
        for record in records:
            ident = values_of(record, ctx.spec)[ctx.spec.id.column]
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
        return ops, first, len(ids)

    @staticmethod
    def _relocked(results: Sequence[object], first: int, count: int) -> list[Record]:
        relocked: list[Record] = []
        for found in results[first : first + count]:
            assert isinstance(found, list)
            relocked += found
        return relocked

    async def _counted(
        self,
        conn: Connection,
        records: list[Record],
        relocked: list[Record],
        limit: int,
    ) -> Claimed:
        """The deliveries of the relocked rows, holding the relock's transaction on ``conn``
        (``exhausted`` read from the select)."""
        exhausted = len(records) < limit
        if not relocked:
            if records:
                await end_transaction(self._ctx.pool, conn)
            else:
                await give_back(self._ctx.pool, conn)
            return Claimed(exhausted=exhausted)
        deliveries = await self._claimed(conn, relocked, limit)
        deliveries.exhausted = exhausted
        return deliveries

    async def _settle_and_claim_counted(
        self, delivery: Delivery, tx: ClaimTransaction, step: Step, limit: int
    ) -> Chained:
        """Settle a single delivery and claim for its worker on its connection: the
        settlement's statements and commit, the guard, the next claim's transaction and
        select in one round trip, then the count's (``_count``). A failure before the
        settlement's commit fails the settlement; after it, only the claim. A failed
        connection is closed (it may hold the guard)."""
        settling = [*self._step_ops(delivery, step), Op("commit")]
        committed = False
        try:
            try:
                results = await tx.conn.script([*settling, *self._select_ops(limit)])
            except DatabaseError as exc:
                committed = settlement_ran(exc, len(settling))
                raise
            committed = True
            self._check_guard(results[len(settling)])
            records = results[-1]
            assert isinstance(records, list)
            relocked = await self._count(tx.conn, records)
        except BaseException as exc:
            delivery.settled = True
            tx.abandon()
            if committed:
                tx.written += 1
                tx.committed = True
            else:
                tx.failed = True
            await self._leave_transaction(delivery)
            if not isinstance(exc, TrinboxError):
                raise
            return Chained(claim_error=exc) if committed else Chained(error=exc)
        delivery.settled = True
        delivery.conn = None
        tx.remaining = 0
        self._in_work.discard(delivery)
        claimed = await self._counted(tx.conn, records, relocked, limit)
        return Chained(claimed=claimed)
