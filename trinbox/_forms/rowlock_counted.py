"""The row lock form counting the attempt at claim (``InboxQueue.count_attempt_at_claim()``).

A claim takes two round trips. The first takes the queue's guard (a session lock, before the
transaction begins, so that a snapshot taken at the transaction's first read comes after the
wait), begins and selects with ``FOR UPDATE SKIP LOCKED``. The second counts the attempt of
each row it locked and commits, begins the deliveries' transaction, locks the rows again by
id and lets the guard go. The rows are locked by no transaction between the count's commit
and the relock: the guard keeps every other counting claim of the queue out of that gap (it
is checked to be held: a claim without it fails), and it is let go only after the relock has
returned. So under the guard the relock finds every counted row: a row is counted once per
delivery. A process that dies after the count's commit leaves the count standing (the server
ends its session, its locks and its guard); one that dies before it counted nothing and ran
no handler. A retry settles by rollback, the count standing. The deliveries report the
attempt before the count, as the lease and advisory forms' do: the runtime moves a row whose
earlier deliveries died past ``max_attempts`` to its dead letter (``counts_at_claim``).

The guard orders only counting claims: a subscription of the same rows without the opt-in
can lock a row in the gap, which is then counted once without a delivery.

A settling worker claims for itself as in the plain form, its settlement committing first in
the round trip that takes the guard and selects. A connection that failed while it may hold
the guard is closed, never given back, so that the server lets the guard go.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .._dialects._count_at_claim import GUARD_TAKEN
from .._drivers._base import Connection, Op, Record
from .._errors import DatabaseError, TrinboxError
from .._holders._base import (
    Chained,
    Claimed,
    Delivery,
    FormContext,
    Step,
    step_statements,
    values_of,
)
from .._holders.connections import close, end_transaction, give_back
from .rowlock import SAVEPOINT, RowLockForm, _ClaimTransaction

__all__ = ["CountedRowLockForm"]


class CountedRowLockForm(RowLockForm):
    """The row lock form with ``count_attempt_at_claim()``: claims count, commit and relock."""

    def __init__(self, ctx: FormContext) -> None:
        super().__init__(ctx)
        self.traits = dataclasses.replace(self.traits, counts_at_claim=True)

    async def claim(self, limit: int) -> Claimed:
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
        value = found[0][0] if found and len(found[0]) else None
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
        claim = st.claim[0]
        now = ctx.clock()
        ops: list[Op] = []
        ids: list[object] = []
        for record in records:
            ident = values_of(claim, record, ctx.spec)[ctx.spec.id.column]
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

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and claim for its worker on its connection: the
        settlement's statements and commit, the guard, the next claim's transaction and
        select in one round trip, then the count's (``_count``). A failure before the
        settlement's commit fails the settlement; after it, only the claim. A failed
        connection is closed (it may hold the guard)."""
        tx = delivery.batch
        assert isinstance(tx, _ClaimTransaction)
        if tx.remaining != 1 or tx.failed or not step_statements(self._ctx.statements, step):
            return await super().settle_and_claim(delivery, step, limit)  # settles alone
        settling = [*self._step_ops(delivery, step), Op("commit")]
        committed = False
        try:
            try:
                results = await tx.conn.script([*settling, *self._select_ops(limit)])
            except DatabaseError as exc:
                committed = exc.step is not None and exc.step >= len(settling)
                raise
            committed = True
            self._check_guard(results[len(settling)])
            records = results[-1]
            assert isinstance(records, list)
            relocked = await self._count(tx.conn, records)
        except BaseException as exc:
            delivery.settled = True
            tx.ended = True
            self._ctx.pool.abandon(tx.conn)
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
