"""The advisory form: each row is held by a lock on its key, rendered by the database from the
table's template; rows that share a key go into work one at a time.

On PostgreSQL and MySQL the lock lives in a session: each delivery keeps the session that locked
its key, with no transaction open, until it settles; then the key is unlocked and the session
goes back to the pool (or is closed when the unlock is not confirmed). SQLite has no session
locks, so the process keeps the keys in work in a registry, keyed by database file; one process
serves a database file (a subscription's startup refuses a second, trinbox._holders.sqlite_key).
Its candidate select passes over the keys the registry holds, so one claim feeds every free
worker with rows of different keys, and a settlement that frees a key wakes the claim loop: the
key's next row is claimed at once, not a poll interval later.

With session locks, a settling worker unlocks its key and reads the next claim's candidates in
one round trip, and its session goes on to lock the first of them (settle_and_claim). On SQLite
the settlement, its key let go and the worker's next claim are one call on a worker thread in
one transaction (trinbox._holders.sqlite_key.KeyClaim); so are a batch's settlement and
its worker's next batch (settle_batch_and_claim).
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, stops
from .._errors import Closed, DatabaseError, SettlementError, TrinboxError
from .._holders._base import Ack, Chained, Delivery, Step, step_statements, step_values
from .._holders.connections import give_back, rollback_quietly
from .._holders.sqlite_key import let_key_go
from .advisory_claim import AdvisoryClaims

__all__ = ["AdvisoryForm"]


class AdvisoryForm(AdvisoryClaims):
    """Claims and settles rows of one advisory table for one subscription."""

    # -- settle --------------------------------------------------------------------------

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """With session locks the deliveries settle side by side, each on the session that
        holds its key; on SQLite in one transaction (:meth:`_settle_keys_together`); in
        transactional mode each on its own."""
        errors: list[TrinboxError | None] = [None] * len(items)
        if self._registry is not None and not self._ctx.transactional:
            return await self._settle_keys_together(items)

        async def settle_one(i: int) -> None:
            try:
                await self.settle(*items[i])
            except TrinboxError as exc:
                errors[i] = exc

        if self._sessions:
            async with trio.open_nursery() as nursery:
                for i in range(len(items)):
                    nursery.start_soon(settle_one, i)
        else:
            for i in range(len(items)):
                await settle_one(i)
        return errors

    async def _settle_keys_together(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """SQLite: a batch's statements in one transaction on one worker-thread call; its keys
        leave the registry once it committed. Deliveries shutdown released, and moves into
        another table, settle alone, and so does each row of a batch whose transaction
        failed (none of it took effect)."""
        ctx = self._ctx
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
            values = {"id": delivery.id, "now": now, **step_values(step)}
            ops += [Op("execute", st.sql, st.bind(values)) for st in statements]
        if together:
            ops.append(Op("commit"))
            self._settling.update(together)
            try:
                conn = await ctx.pool.acquire("settlement")
                try:
                    await conn.script(ops)
                finally:
                    await give_back(ctx.pool, conn)  # rolls back what a failure left open
            except TrinboxError:
                # Nothing of the batch took effect: each settles alone, so one row's failure
                # leaves the others of its batch standing.
                self._settling.difference_update(together)
                alone = list(range(len(items)))
                together = []
            finally:
                for delivery in together:
                    delivery.settled = True
                    self._settling.discard(delivery)
                    self._in_work.discard(delivery)
                    assert self._registry is not None
                    let_key_go(self._registry, str(delivery.key))
                if together:
                    ctx.wake()  # the keys are free
        for i in alone:
            try:
                await self.settle(*items[i])
            except TrinboxError as exc:
                errors[i] = exc
        return errors

    async def settle_batch_and_claim(
        self, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """SQLite: a batch's settlement, its keys let go, and the claim of the worker's next
        batch, in one transaction on one worker-thread call, as :meth:`settle_and_claim` for
        a single delivery. A batch whose transaction fails (nothing of it took effect, its
        keys still held) settles row by row; anything else settles as :meth:`settle_batch`
        does, and claims nothing."""
        ctx = self._ctx
        keys = self._process_keys
        if keys is None or ctx.transactional:
            return await self.settle_batch(items), Chained()
        threads = keys.threads
        now = ctx.clock()
        settling: list[Op] = []
        for delivery, step in items:
            statements = step_statements(ctx.statements, step)
            if delivery.released or len(statements) > 1:
                return await self._settle_keys_together(items), Chained()
            values = {"id": delivery.id, "now": now, **step_values(step)}
            settling += [Op("execute", st.sql, st.bind(values)) for st in statements]
        if threads is None:  # claims statement by statement: the batch settles alone
            return await self._settle_keys_together(items), Chained()
        conn = await threads.acquire("settlement")
        deliveries = [delivery for delivery, _ in items]
        self._settling.update(deliveries)
        self._claiming += 1
        plan = self._key_claim(limit, settling, frees=[str(d.key) for d in deliveries])
        ran = False
        try:
            claim_error = await keys.claim(conn, plan)
            ran = True
        except TrinboxError:
            claim_error = None  # rolled back, the keys held again: each settles alone below
        except BaseException:
            # Cut off (a cancel past the bound): as a single delivery's, each ends here and
            # its key goes; its row returns if the settlement did not commit.
            ran = True
            raise
        finally:
            self._claiming -= 1
            self._settling.difference_update(deliveries)
            await give_back(ctx.pool, conn)
            if ran:
                for delivery in deliveries:
                    delivery.settled = True
                    self._in_work.discard(delivery)
                if not plan.freed:
                    assert self._registry is not None
                    for delivery in deliveries:
                        let_key_go(self._registry, str(delivery.key))
                    ctx.wake()
        if not ran:
            errors: list[TrinboxError | None] = [None] * len(items)
            for i, item in enumerate(items):
                try:
                    await self.settle(*item)
                except TrinboxError as exc:
                    errors[i] = exc
            return errors, Chained()
        claimed = await self._registered(plan)
        if claim_error is not None or len(claimed) < len(deliveries):
            ctx.wake()  # keys were freed that no row of this claim took
        if claim_error is not None:
            return [None] * len(items), Chained(claim_error=claim_error)
        return [None] * len(items), Chained(claimed=claimed)

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and unlock its key, then read the next claim's candidates,
        in one round trip on the delivery's session; the session goes on to lock the first
        of them. On SQLite, settlement and claim are one call on the worker thread
        (:meth:`_settle_and_claim_keys`). Transactional mode and moves into another table
        settle alone."""
        ctx = self._ctx
        statements = step_statements(ctx.statements, step)
        if (
            self._registry is not None
            and not ctx.transactional
            and not delivery.released
            and len(statements) <= 1
        ):
            return await self._settle_and_claim_keys(delivery, statements, step, limit)
        session = delivery.conn
        if (
            not self._sessions
            or ctx.transactional
            or session is None
            or delivery.released
            or len(statements) > 1
        ):
            try:
                await self.settle(delivery, step)
            except TrinboxError as exc:
                return Chained(error=exc)
            return Chained()
        unlock = ctx.statements.unlock
        assert unlock is not None
        values = {"id": delivery.id, "now": ctx.clock(), **step_values(step)}
        settling = [Op("execute", st.sql, st.bind(values)) for st in statements]
        unlocking = Op("fetch", unlock.sql, unlock.bind({"key": str(delivery.key)}))
        self._settling.add(delivery)
        self._claiming += 1
        try:
            candidates, now, wanted = self._candidates(limit)
            try:
                results = await session.script([*settling, unlocking, candidates])
            except TrinboxError as exc:
                if (
                    not isinstance(exc, DatabaseError)
                    or exc.step is None
                    or exc.step < len(settling)
                ):
                    return Chained(error=exc)  # the session is unlocked (or closed) below
                if exc.step == len(settling):
                    delivery.unlocked = False  # the unlock itself failed: close the session
                    return Chained()
                unlocked = exc.results[len(settling)]
                delivery.unlocked = isinstance(unlocked, list) and not stops(unlocked)
                return Chained(claim_error=exc)
            delivery.unlocked = not stops(results[len(settling)])
            rows = results[-1]
            assert isinstance(rows, list)
            if not delivery.unlocked:
                return Chained()
            # The key is unlocked and the session free: it carries on into the claim.
            delivery.conn = None
        finally:
            self._claiming -= 1
            delivery.settled = True
            self._settling.discard(delivery)
            self._in_work.discard(delivery)
            if delivery.conn is not None:
                await self._give_back_key(delivery)
        try:
            claimed = await self._take_rows(session, rows, limit, wanted, now)
        except TrinboxError as exc:
            # Settled and unlocked; the claim failed (it released what it had taken).
            ctx.wake()
            return Chained(claim_error=exc)
        if not claimed:
            ctx.wake()  # the session went back to the pool: a claim waiting for one may go on
        return Chained(claimed=claimed)

    async def _settle_and_claim_keys(
        self, delivery: Delivery, statements: Sequence[Statement], step: Step, limit: int
    ) -> Chained:
        """SQLite: the settlement, its key let go, and the claim of the worker's next row, in
        one transaction on one worker-thread call. The key leaves the registry inside it, so
        the claim may take the key's next row; a claim that fails leaves the settlement
        standing (it runs again on its own)."""
        ctx = self._ctx
        keys = self._process_keys
        assert keys is not None
        if keys.threads is None:  # claims statement by statement: the step settles alone
            try:
                await self.settle(delivery, step)
            except TrinboxError as exc:
                return Chained(error=exc)
            return Chained()
        conn = await keys.threads.acquire("settlement")
        values = {"id": delivery.id, "now": ctx.clock(), **step_values(step)}
        settling = [Op("execute", st.sql, st.bind(values)) for st in statements]
        self._settling.add(delivery)
        self._claiming += 1
        plan = self._key_claim(limit, settling, frees=(str(delivery.key),))
        try:
            claim_error = await keys.claim(conn, plan)
        except TrinboxError as exc:
            ctx.wake()  # rolled back: the row returns, its key is let go below
            return Chained(error=exc)
        finally:
            self._claiming -= 1
            delivery.settled = True
            self._settling.discard(delivery)
            self._in_work.discard(delivery)
            await give_back(ctx.pool, conn)
            if not plan.freed:
                assert self._registry is not None
                let_key_go(self._registry, str(delivery.key))
                ctx.wake()
        claimed = await self._registered(plan)
        if claim_error is not None:
            ctx.wake()
            return Chained(claim_error=claim_error)
        if not claimed:
            ctx.wake()  # the key is free and nothing claimed: the claim loop may go on
        return Chained(claimed=claimed)

    async def settle(self, delivery: Delivery, step: Step) -> None:
        if delivery.released:
            msg = (
                f"{self._ctx.spec.label}: shutdown released the key of row {delivery.id!r} and "
                f"its row is back in the queue; the settlement had no effect"
            )
            raise Closed(msg)
        self._settling.add(delivery)
        try:
            await self._run_step(delivery, step)
        finally:
            delivery.settled = True
            self._settling.discard(delivery)
            self._in_work.discard(delivery)
            await self._give_back_key(delivery)

    async def _run_step(self, delivery: Delivery, step: Step) -> None:
        statements = step_statements(self._ctx.statements, step)
        values = {"id": delivery.id, "now": self._ctx.clock(), **step_values(step)}
        conn = delivery.conn
        if delivery.tx_open:
            assert conn is not None
            if isinstance(step, Ack):
                await self._run(conn, statements, values, in_transaction=True)
                await conn.commit()
                delivery.tx_open = False
                return
            delivery.tx_open = False
            if not await rollback_quietly(conn):
                msg = (
                    f"{self._ctx.spec.label}: the handler's transaction of row {delivery.id!r} "
                    f"did not roll back (its connection is lost); the row returns to the queue"
                )
                raise SettlementError(msg)
        if self._sessions and conn is not None and len(statements) <= 1:
            # One round trip: the statement (committing on its own) and the unlock.
            unlock = self._ctx.statements.unlock
            assert unlock is not None
            ops = [Op("execute", st.sql, st.bind(values)) for st in statements]
            ops.append(Op("fetch", unlock.sql, unlock.bind({"key": str(delivery.key)})))
            results = await conn.script(ops)
            delivery.unlocked = not stops(results[-1])
            return
        if not statements:
            return
        if conn is None:
            conn = await self._ctx.pool.acquire("settlement")
            try:
                await self._run(conn, statements, values, in_transaction=False)
            finally:
                await give_back(self._ctx.pool, conn)
        else:
            await self._run(conn, statements, values, in_transaction=False)

    async def _run(
        self,
        conn: Connection,
        statements: Sequence[Statement],
        values: dict[str, object],
        *,
        in_transaction: bool,
    ) -> None:
        # A statement that changes nothing still settles: the lock, not a token, holds the row.
        if len(statements) == 1 or in_transaction:
            for statement in statements:
                await conn.execute(statement.sql, statement.bind(values))
            return
        await conn.begin(self._ctx.statements.plain_begin.sql)
        try:
            for statement in statements:
                await conn.execute(statement.sql, statement.bind(values))
            await conn.commit()
        except BaseException:
            await rollback_quietly(conn)
            raise
