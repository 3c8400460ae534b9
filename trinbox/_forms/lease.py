"""The lease form: the claim writes a lease expiry into the row, counts the attempt and commits;
the expiry is the delivery's token, and every settlement holds only while the token does.

While a handler runs, the keeper moves every in-work lease forward, a round every third of the
lease; a round that fails is tried again within a second, so a lease of more than three
seconds outlives two failed rounds in a row. A delivery dropped unsettled clears its lease at
once; after a crash the row returns when the lease ends.

Rows settled alike go to the database together (a batch's rows, and single settlements that
finish at the same time), each still conditioned on its own token; where the claim is one
statement, a settling worker claims its next row in the same round trip.

The token and the keeper live in trinbox._holders.lease_token, with their one lock order: a
delivery's token, then a pooled connection; a task that holds a connection never waits for a
token. The form reaches a connection for a settlement only through the tokens it holds
(``LeaseTokens.holding``); the claim holds no token.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    FormTraits,
    Step,
    attempt_of,
    batch_event,
    lease_expiry,
    step_statements,
    step_values,
    values_of,
)
from .._holders.connections import end_transaction, give_back, rollback_quietly
from .._holders.lease_token import HeldTokens, LeaseKeeper, LeaseTokens
from .._holders.settlement import settle_alone, settle_each, settlement_ran
from ..errors import LeaseLost, TrinboxError
from ._coalesce import SettleTogether
from .lease_claims import (
    custom_lease_claim,
    guarded_claim,
    heads_claim,
    limited_claim,
    rated_claim,
    select_and_stamp,
)

__all__ = ["LeaseForm"]

logger = logging.getLogger("trinbox.settle")


class LeaseForm:
    """Claims and settles rows of one lease table for one subscription."""

    closed = 0

    def __init__(self, ctx: FormContext, tokens: LeaseTokens, keeper: LeaseKeeper) -> None:
        """``tokens``, ``keeper``: the lease's holder and its keeper, as the form table built
        them (trinbox._holders.lease_token)."""
        self._ctx = ctx
        # In transactional mode each delivery holds its transaction's connection; the
        # keeper's round takes one more.
        self.traits = FormTraits(
            holds_connections=ctx.transactional,
            feeds_every_worker=True,
            chains=self.claims_in_one_statement,
            upkeep_connections=1,
            counts_at_claim=True,
        )
        self._tokens = tokens
        self._keeper = keeper
        self._in_work = tokens.in_work
        self._together = SettleTogether(self.settle_batch)
        self._lease_seconds = int(ctx.lease.total_seconds())

    @property
    def in_work(self) -> int:
        return len(self._in_work)

    @property
    def claims_in_one_statement(self) -> bool:
        """PostgreSQL and SQLite claim with one statement; MySQL selects, then stamps (and a
        FIFO group's claim on a server runs its guard first, and a limited claim on a server
        its lock)."""
        plan = self._ctx.statements
        return (
            len(plan.claim) == 1
            and plan.guard is None
            and plan.limit_lock is None
            and not plan.rated
        )

    async def claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        conn = await ctx.pool.acquire("claim")
        try:
            # "now" is read after the connection is acquired, so a pool wait cannot shorten
            # the lease.
            now = ctx.clock()
            token = lease_expiry(now, ctx.lease)
            values: dict[str, object] = {
                "group": ctx.group,
                "now": now,
                "limit": limit,
                "lease": token,
                "lease_seconds": self._lease_seconds,
            }
            if ctx.custom is not None:
                # Exhausted by what it took: ids the stamps left out (their leases held)
                # would be claimed again at once, and again.
                taken = await custom_lease_claim(ctx, conn, values)
            else:
                records = await self._claim_rows(conn, values)
                taken = [self._delivery(record, token) for record in records]
        finally:
            await give_back(ctx.pool, conn)
        deliveries = Claimed(taken, exhausted=self._exhausted(len(taken), limit))
        self._in_work.update(deliveries)
        if ctx.transactional:
            await self._open_transactions(deliveries)
        return deliveries

    async def _claim_rows(self, conn: Connection, values: dict[str, object]) -> list[Record]:
        """The rows the plan's claim took, in the claim's shape: a limited claim behind its
        lock, over every group's heads, a FIFO group's behind its guard, one statement, or
        MySQL's select and stamps."""
        ctx = self._ctx
        claim = ctx.statements.claim
        if ctx.statements.rated:
            return await rated_claim(ctx, conn, values)
        if ctx.statements.limit_lock is not None:
            return await limited_claim(ctx, conn, values)
        if ctx.statements.heads is not None:
            return await heads_claim(ctx, conn, values)
        if ctx.statements.guard is not None:
            return await guarded_claim(ctx, conn, values)
        if len(claim) == 1:
            return await conn.fetch(claim[0].sql, claim[0].bind(values))
        return await select_and_stamp(ctx, conn, values)

    def _exhausted(self, taken: int, limit: int) -> bool:
        """Whether the claim found no more rows: fewer than asked, or for a limited claim (its
        window bounded: other keys' rows may wait beyond it) none."""
        return taken == 0 if self._ctx.limited else taken < limit

    def _delivery(self, record: Record, token: object) -> Delivery:
        spec = self._ctx.spec
        if len(record) > len(spec.columns):
            # The database clock: the claim returns the expiry the server wrote, the token.
            token, record = record[-1], record[: len(spec.columns)]
        values = values_of(record, spec)
        return Delivery(
            values=values,
            id=values[spec.id.column],
            attempt=attempt_of(spec, values),
            token=token,
        )

    async def _open_transactions(self, deliveries: list[Delivery]) -> None:
        """Transactional mode: one transaction per delivery, on its own connection. If one
        cannot open, every row of the claim is released and the claim fails."""
        ctx = self._ctx
        try:
            for delivery in deliveries:
                conn = await ctx.pool.acquire("delivery transaction")
                delivery.conn = conn
                await conn.begin(ctx.statements.begin.sql)
                delivery.tx_open = True
        except BaseException:
            with cleanup_scope():
                for delivery in deliveries:
                    await self.release(delivery)
            raise

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None and delivery.tx_open
        return delivery.conn

    async def settle(self, delivery: Delivery, step: Step) -> None:
        if delivery.tx_open or batch_event(step) is None:
            await self._settle_one(delivery, step)
        else:
            # Settlements that finish together go to the database together.
            await self._together.settle(delivery, step)

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and claim the next rows for its worker in the same round
        trip: the settlement's statement, then the one-statement claim (PostgreSQL, SQLite).
        Dead letters, transactional mode and the MySQL claim of several statements settle
        alone."""
        ctx = self._ctx
        event = batch_event(step)
        if ctx.transactional or event is None or not self.claims_in_one_statement:
            return await settle_alone(self.settle, delivery, step)
        (single,) = step_statements(ctx.statements, step)
        claim = ctx.statements.claim[0]
        async with self._tokens.holding([delivery]) as held:
            try:
                if delivery.lease_lost:
                    return Chained(error=self._lost(delivery))
                try:
                    conn = await held.acquire("settlement")
                except TrinboxError as exc:
                    return Chained(error=exc)  # nothing ran: the lease ends by itself
                try:
                    settle_op = Op("execute", *self._bound(single, delivery, step_values(step)))
                    # "now" is read after the connection is acquired, as in claim().
                    now = ctx.clock()
                    token = lease_expiry(now, ctx.lease)
                    values = {
                        "group": ctx.group,
                        "now": now,
                        "limit": limit,
                        "lease": token,
                        "lease_seconds": self._lease_seconds,
                    }
                    claim_op = Op("fetch", claim.sql, claim.bind(values))
                    try:
                        changed, records = await conn.script([settle_op, claim_op])
                    except TrinboxError as exc:
                        if not settlement_ran(exc, 1):
                            return Chained(error=exc)
                        # The settlement ran; only the claim failed.
                        error = None if exc.results[0] else self._lost(delivery)
                        return Chained(error=error, claim_error=exc)
                finally:
                    await held.give_back(conn)
            finally:
                # Settled, or failed for good: either way out of work (and out of the keeper).
                self._forget(delivery)
        assert isinstance(records, list)
        claimed = Claimed(
            (self._delivery(record, token) for record in records),
            exhausted=self._exhausted(len(records), limit),
        )
        self._in_work.update(claimed)
        return Chained(error=None if changed else self._lost(delivery), claimed=claimed)

    def _forget(self, delivery: Delivery) -> None:
        delivery.settled = True
        self._in_work.discard(delivery)

    async def _settle_one(self, delivery: Delivery, step: Step) -> None:
        try:
            if delivery.tx_open and isinstance(step, Ack):
                # Takes the token ahead of a running extension: that extension may wait on
                # locks this very transaction holds.
                await self._ack_in_transaction(delivery, step)
                return
            await self._end_transaction(delivery)
            async with self._tokens.holding([delivery]) as held:
                if delivery.lease_lost:
                    raise self._lost(delivery)
                await self._run_step(held, delivery, step)
        finally:
            delivery.settled = True
            self._in_work.discard(delivery)

    async def settle_batch_and_claim(
        self, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch does not chain its claim in this form."""
        return await self.settle_batch(items), Chained()

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """Rows settled alike share a statement (PostgreSQL) or a transaction of single-row
        statements (MySQL, SQLite); each row still settles only while its lease holds, and a
        row whose lease is gone fails alone. A group whose statement fails is settled again
        row by row, so one bad row leaves the others' settlements in place."""
        errors: list[TrinboxError | None] = [None] * len(items)
        groups: dict[tuple[str, object, object, object], list[int]] = {}
        alone: list[int] = []
        for i, (delivery, step) in enumerate(items):
            event = batch_event(step)
            if event is None or delivery.tx_open:
                alone.append(i)
            else:
                bound = step_values(step)
                # Alike: the same event and values (a delay; an ack's result, where kept).
                result = bound.get("result") if self._ctx.spec.result is not None else None
                key = (event, bound.get("retry_at"), bound.get("delay"), result)
                groups.setdefault(key, []).append(i)
        for members in groups.values():
            if len(members) == 1:
                alone.extend(members)
                continue
            step = items[members[0]][1]
            outcome, again = await self._settle_alike([items[i][0] for i in members], step)
            for i, error in zip(members, outcome, strict=True):
                errors[i] = error
            alone.extend(members[k] for k in again)
        order = sorted(alone)
        alone_errors = await settle_each(self._settle_one, [items[i] for i in order])
        for i, error in zip(order, alone_errors, strict=True):
            errors[i] = error
        return errors

    async def _settle_alike(
        self, deliveries: list[Delivery], step: Step
    ) -> tuple[list[TrinboxError | None], list[int]]:
        """One step for several deliveries, while no extension moves their tokens: the error
        of each, and the deliveries left to settle one by one (their statement failed)."""
        errors: list[TrinboxError | None] = [None] * len(deliveries)
        again: list[int] = []
        async with self._tokens.holding(deliveries) as held:
            by_token: dict[object, list[int]] = {}
            for i, delivery in enumerate(deliveries):
                if delivery.lease_lost:
                    errors[i] = self._lost(delivery)
                else:
                    by_token.setdefault(delivery.token, []).append(i)
            for members in by_token.values():
                try:
                    kept = await self._run_alike(held, [deliveries[i] for i in members], step)
                except TrinboxError:
                    logger.warning(
                        "%s: settling %d rows in one statement failed; settling them one by one",
                        self._ctx.spec.label,
                        len(members),
                        exc_info=True,
                    )
                    again.extend(members)
                    continue
                for i, settled in zip(members, kept, strict=True):
                    if not settled:
                        errors[i] = self._lost(deliveries[i])
        for i, delivery in enumerate(deliveries):
            if i not in again:
                delivery.settled = True
                self._in_work.discard(delivery)
        return errors, again

    async def _run_alike(
        self, held: HeldTokens, deliveries: list[Delivery], step: Step
    ) -> list[bool]:
        """Run one step for deliveries holding the same token; which of them it settled."""
        ctx = self._ctx
        extra = step_values(step)
        event = batch_event(step)
        assert event is not None
        batch = ctx.statements.batch_statement(event)
        conn = await held.acquire("settlement")
        try:
            if batch is not None:
                values = {
                    "ids": [d.id for d in deliveries],
                    "token": deliveries[0].token,
                    "now": ctx.clock(),
                    **extra,
                }
                settled = {record[0] for record in await conn.fetch(batch.sql, batch.bind(values))}
                return [d.id in settled for d in deliveries]
            (single,) = step_statements(ctx.statements, step)
            ops = [
                Op("begin", ctx.statements.plain_begin.sql),
                *(Op("execute", *self._bound(single, d, extra)) for d in deliveries),
                Op("commit"),
            ]
            results = await conn.script(ops)
            return [changed != 0 for changed in results[1:-1]]
        finally:
            # A transaction the script left open (it failed) is rolled back here.
            await held.give_back(conn)

    async def _ack_in_transaction(self, delivery: Delivery, step: Step) -> None:
        conn = delivery.conn
        assert conn is not None
        try:
            ack = self._ctx.statements.ack
            changed = await conn.execute(*self._bound(ack, delivery, step_values(step)))
            if changed == 0:
                raise self._lost(delivery)
            await conn.commit()
            delivery.tx_open = False
        finally:
            await self._end_transaction(delivery)

    async def _end_transaction(self, delivery: Delivery) -> None:
        """Discard the handler's writes (when still open) and give the connection back."""
        conn = delivery.conn
        if conn is None:
            return
        delivery.conn = None
        if delivery.tx_open:
            delivery.tx_open = False
            await end_transaction(self._ctx.pool, conn)
            return
        await give_back(self._ctx.pool, conn)

    async def _run_step(self, held: HeldTokens, delivery: Delivery, step: Step) -> None:
        statements = step_statements(self._ctx.statements, step)
        extra = step_values(step)
        async with held.connection("settlement") as conn:
            if len(statements) == 1:
                changed = await conn.execute(*self._bound(statements[0], delivery, extra))
                if changed == 0:
                    raise self._lost(delivery)
                return
            # A move into another table: copy and delete in one transaction; if either
            # changes nothing another claim took the row in between, so undo the move.
            await conn.begin(self._ctx.statements.plain_begin.sql)
            try:
                for statement in statements:
                    if await conn.execute(*self._bound(statement, delivery, extra)) == 0:
                        raise self._lost(delivery)
                await conn.commit()
            except BaseException:
                await rollback_quietly(conn)
                raise

    def _bound(
        self, statement: Statement, delivery: Delivery, extra: dict[str, object] | None = None
    ) -> tuple[str, tuple[object, ...]]:
        values = {"id": delivery.id, "token": delivery.token, "now": self._ctx.clock()}
        if extra:
            values.update(extra)
        return statement.sql, statement.bind(values)

    def _lost(self, delivery: Delivery) -> LeaseLost:
        msg = (
            f"{self._ctx.spec.label}: a settlement holds only while its lease does, found the "
            f"lease of row {delivery.id!r} ran out and another claim took it; the settlement "
            f"had no effect (keep handlers within the lease, or lengthen it)"
        )
        return LeaseLost(msg, id=delivery.id)

    async def release(self, delivery: Delivery) -> None:
        """Clear the lease by its token, so the row returns at once (attempt already counted)."""
        if delivery.settled:
            return
        delivery.settled = True
        self._in_work.discard(delivery)
        await self._end_transaction(delivery)
        # An extension in flight may move the token: wait for it, then clear by the current one.
        async with self._tokens.holding([delivery]) as held:
            if delivery.lease_lost:
                return
            release = self._ctx.statements.release
            assert release is not None
            async with held.connection("release") as conn:
                await conn.execute(*self._bound(release, delivery))

    async def release_for_shutdown(self, delivery: Delivery) -> bool:
        """Shutdown stopped the handler: return the row as a drop would."""
        if delivery.settled:
            return False
        await self.release(delivery)
        return True

    def abandon(self, delivery: Delivery) -> None:
        """The release ran out of time: its transaction's connection is closed at once; a lease
        that could not be cleared ends by itself."""
        delivery.settled = True
        self._in_work.discard(delivery)
        conn, delivery.conn = delivery.conn, None
        delivery.tx_open = False
        if conn is not None:
            self._ctx.pool.abandon(conn)

    def start_serving(self) -> None:
        """Nothing held for the process."""

    def stop_serving(self) -> None:
        """Nothing held for the process."""

    def begin_shutdown(self) -> None:
        pass

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The lease keeper's rounds (trinbox._holders.lease_token)."""
        await self._keeper.keep(task_status=task_status)

    async def extend_all(self) -> None:
        """One round of the keeper, now."""
        await self._keeper.extend_all()

    async def shutdown(self) -> tuple[int, int]:
        # Leases need nothing at shutdown: every delivery still in work was released when its
        # handler stopped, and a lease left behind ends by itself.
        return 0, 0
