"""SQLite's process keys as an advisory hold (trinbox._holders.advisory_hold.AdvisoryHold):
one subscription's keys in this process's registry, the file lock while it serves them
(trinbox._holders.sqlite_key), and every claim, and every settlement chained with its worker's
next claim, as one call on a connection's thread (``KeyClaim``)."""

from __future__ import annotations

from collections.abc import Sequence

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, ThreadedConnection, ThreadedPool
from ..errors import DatabaseError, TrinboxError
from ._base import Chained, Claimed, Delivery, FormContext, FormTraits, Step, step_statements
from .advisory_hold import KeyWork
from .connections import give_back, rollback_quietly
from .settlement import settle_each, step_ops
from .sqlite_key import (
    KeyClaim,
    KeyRegistry,
    SlotRule,
    hold,
    let_go,
    let_key_go,
    run_key_claim,
)

__all__ = ["ProcessKeys"]


class ProcessKeys:
    """The process keys one subscription serves: its database's keys in the registry, the
    file lock while it serves them, and claims run as one call on a connection's thread
    (``pool``: the SQLite driver's, whose connections run functions on their own thread)."""

    __slots__ = ("_serving", "keys", "rule", "threads")

    def __init__(self, pool: ThreadedPool, ctx: FormContext) -> None:
        self.threads = pool
        self.keys = KeyRegistry.keys(pool.identity)
        self._serving = False
        # Under a limit, the slots are kept with the keys: one process serves a file's keys,
        # so its registry sees every row in work (sqlite_key.SlotRule).
        limits = ctx.limits
        self.rule = (
            None
            if limits is None
            else SlotRule(
                (ctx.spec.qualified_name, ctx.group),
                limits.per_key,
                limits.whole,
                KeyRegistry.slots(pool.identity),
            )
        )

    def start_serving(self) -> None:
        """Serve the file's keys (``StartupError`` when another process does)."""
        if not self._serving:
            hold(self.threads.path)
            self._serving = True

    def stop_serving(self) -> None:
        """Stop serving them: the last holder of this process frees the file lock."""
        if self._serving:
            self._serving = False
            let_go(self.threads.path)

    async def _run_claim(self, conn: ThreadedConnection, plan: KeyClaim) -> DatabaseError | None:
        """Run ``plan`` on ``conn``'s thread: the error of its claim when it failed after its
        settlement took effect. A claim cut off after its commit lets its keys go (their rows
        stay claimable, their attempt counted, as a take cut after its statement)."""
        try:
            await conn.run_on_thread(
                lambda session: run_key_claim(session, plan), "BEGIN IMMEDIATE"
            )
        except BaseException:
            plan.forget()
            raise
        return plan.claim_error

    # -- the advisory hold (trinbox._holders.advisory_hold.AdvisoryHold) ---------------------

    def traits(self, transactional: bool) -> FormTraits:
        # A delivery holds a connection in transactional mode only (its transaction's). The
        # select passes over the keys in work, so a claim may feed every free worker.
        return FormTraits(
            holds_connections=transactional,
            feeds_every_worker=True,
            # Settlement and claim in one call on the worker thread.
            chains=not transactional,
            # A batch's settlement and its worker's next claim in one call.
            chains_batches=not transactional,
            counts_at_claim=True,  # the take counts the attempt and commits
        )

    async def claim(self, work: KeyWork, limit: int) -> Claimed:
        conn = await self.threads.acquire("advisory session")
        try:
            plan = self._key_claim(work, limit)
            await self._run_claim(conn, plan)
        finally:
            await give_back(self.threads, conn)
        return await self._registered(work, plan)

    def _key_claim(
        self,
        work: KeyWork,
        limit: int,
        settle: list[Op] | None = None,
        frees: Sequence[str] = (),
    ) -> KeyClaim:
        """The claim of ``limit`` rows in one call, after a settlement's ``settle``
        statements (freeing the keys ``frees``) where one chains it."""
        candidates = work.ctx.statements.claim[0]
        values, now, wanted = work.claim_values(limit)

        def select(held: list[str], counts: str) -> Op:
            bound = {**values, "held": held, "counts": counts}
            return Op("fetch", candidates.sql, candidates.bind(bound))

        def take(row_id: object) -> list[Op]:
            return work.take_ops(row_id, now)

        return KeyClaim(self.keys, select, take, limit, wanted, settle or (), frees, rule=self.rule)

    async def _registered(self, work: KeyWork, plan: KeyClaim) -> Claimed:
        """The deliveries of a claim; in transactional mode each opens its handler's
        transaction (dropped, with every row of the claim, when one cannot)."""
        taken = [work.delivery(record, key, conn=None) for key, record in plan.taken]
        work.working.update(taken)
        if work.ctx.transactional:
            try:
                for delivery in taken:
                    await work.begin_transaction(delivery)
            except BaseException:
                with cleanup_scope():
                    for delivery in taken:
                        await work.release(delivery)
                raise
        # Under a limit the candidates are ranked per limit key: rows of other keys may lie
        # past them, so only a claim that took nothing ran dry.
        exhausted = not taken if self.rule is not None else plan.read < plan.wanted
        return Claimed(taken, exhausted=exhausted)

    async def let_go(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        self.keys.discard(str(delivery.key))
        if conn is not None:
            await give_back(work.ctx.pool, conn)
        work.ctx.wake()  # the key is free: its next row may be claimed now

    async def release(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        self.keys.discard(str(delivery.key))
        if conn is not None:
            if delivery.tx_open:
                await rollback_quietly(conn)
            await give_back(work.ctx.pool, conn)
        work.ctx.wake()  # the row is back and its key free

    def forget(self, key: str) -> None:
        self.keys.discard(key)

    async def let_go_for_shutdown(
        self, work: KeyWork, delivery: Delivery, conn: Connection | None
    ) -> bool:
        self.keys.discard(str(delivery.key))
        if conn is not None:
            await give_back(work.ctx.pool, conn)
        return True

    async def run_statements(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None:
        await work.run_plain(delivery.conn, statements, values)

    async def settle_batch(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """In one transaction (:meth:`_settle_keys_together`); in transactional mode each
        delivery on its own, one after another."""
        if work.ctx.transactional:
            return await settle_each(work.settle, items)
        return await self._settle_keys_together(work, items)

    async def _settle_keys_together(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """A batch's statements in one transaction on one worker-thread call; its keys leave
        the registry once it committed. Deliveries shutdown released, and moves into another
        table, settle alone, and so does each row of a batch whose transaction failed (none
        of it took effect)."""
        ctx = work.ctx
        errors: list[TrinboxError | None] = [None] * len(items)
        together: list[Delivery] = []
        alone: list[int] = []
        ops = [Op("execute", "BEGIN IMMEDIATE")]
        now = ctx.clock()
        for i, (delivery, step) in enumerate(items):
            statements = step_statements(ctx.statements, step)
            if delivery.released or len(statements) > 1:
                alone.append(i)
                continue
            together.append(delivery)
            ops += step_ops(ctx.statements, delivery, step, now)
        if together:
            ops.append(Op("commit"))
            work.settling.update(together)
            try:
                conn = await ctx.pool.acquire("settlement")
                try:
                    await conn.script(ops)
                finally:
                    await give_back(ctx.pool, conn)  # rolls back what a failure left open
            except TrinboxError:
                # Nothing of the batch took effect: each settles alone, so one row's failure
                # leaves the others of its batch standing.
                work.settling.difference_update(together)
                alone = list(range(len(items)))
                together = []
            finally:
                for delivery in together:
                    delivery.settled = True
                    work.settling.discard(delivery)
                    work.working.discard(delivery)
                    let_key_go(self.keys, str(delivery.key))
                if together:
                    ctx.wake()  # the keys are free
        alone_errors = await settle_each(work.settle, [items[i] for i in alone])
        for i, error in zip(alone, alone_errors, strict=True):
            errors[i] = error
        return errors

    async def settle_batch_and_claim(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch's settlement, its keys let go, and the claim of the worker's next batch,
        in one transaction on one worker-thread call, as :meth:`settle_and_claim` for a
        single delivery. A batch whose transaction fails (nothing of it took effect, its
        keys still held) settles row by row; anything else settles as :meth:`settle_batch`
        does, and claims nothing."""
        ctx = work.ctx
        now = ctx.clock()
        settling: list[Op] = []
        for delivery, step in items:
            statements = step_statements(ctx.statements, step)
            if delivery.released or len(statements) > 1:
                return await self._settle_keys_together(work, items), Chained()
            settling += step_ops(ctx.statements, delivery, step, now)
        conn = await self.threads.acquire("settlement")
        deliveries = [delivery for delivery, _ in items]
        work.settling.update(deliveries)
        work.claiming += 1
        plan = self._key_claim(work, limit, settling, frees=[str(d.key) for d in deliveries])
        ran = False
        try:
            claim_error = await self._run_claim(conn, plan)
            ran = True
        except TrinboxError:
            claim_error = None  # rolled back, the keys held again: each settles alone below
        except BaseException:
            # Cut off (a cancel past the bound): as a single delivery's, each ends here and
            # its key goes; its row returns if the settlement did not commit.
            ran = True
            raise
        finally:
            work.claiming -= 1
            work.settling.difference_update(deliveries)
            await give_back(ctx.pool, conn)
            if ran:
                for delivery in deliveries:
                    delivery.settled = True
                    work.working.discard(delivery)
                if not plan.freed:
                    for delivery in deliveries:
                        let_key_go(self.keys, str(delivery.key))
                    ctx.wake()
        if not ran:
            return await settle_each(work.settle, items), Chained()
        claimed = await self._registered(work, plan)
        if claim_error is not None or len(claimed) < len(deliveries):
            ctx.wake()  # keys were freed that no row of this claim took
        if claim_error is not None:
            return [None] * len(items), Chained(claim_error=claim_error)
        return [None] * len(items), Chained(claimed=claimed)

    async def settle_and_claim(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        step: Step,
        limit: int,
    ) -> Chained:
        """The settlement, its key let go, and the claim of the worker's next row, in one
        transaction on one worker-thread call. The key leaves the registry inside it, so the
        claim may take the key's next row; a claim that fails leaves the settlement standing
        (it runs again on its own)."""
        ctx = work.ctx
        conn = await self.threads.acquire("settlement")
        settling = step_ops(ctx.statements, delivery, step, ctx.clock())
        work.settling.add(delivery)
        work.claiming += 1
        plan = self._key_claim(work, limit, settling, frees=(str(delivery.key),))
        try:
            claim_error = await self._run_claim(conn, plan)
        except TrinboxError as exc:
            ctx.wake()  # rolled back: the row returns, its key is let go below
            return Chained(error=exc)
        finally:
            work.claiming -= 1
            delivery.settled = True
            work.settling.discard(delivery)
            work.working.discard(delivery)
            await give_back(ctx.pool, conn)
            if not plan.freed:
                let_key_go(self.keys, str(delivery.key))
                ctx.wake()
        claimed = await self._registered(work, plan)
        if claim_error is not None:
            ctx.wake()
            return Chained(claim_error=claim_error)
        if not claimed:
            ctx.wake()  # the key is free and nothing claimed: the claim loop may go on
        return Chained(claimed=claimed)
