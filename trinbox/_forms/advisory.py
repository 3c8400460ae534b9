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
its worker's next batch (settle_batch_and_claim). What holds a key is the holder table's
choice (trinbox._holders.table): a server session lock (trinbox._holders.session_lock) or this
process's key (trinbox._holders.sqlite_key).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import cast

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record, Result, stops
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    FormTraits,
    Step,
    attempt_of,
    step_statements,
    step_values,
    values_of,
)
from .._holders.connections import close, give_back, rollback_quietly
from .._holders.session_lock import SessionLocks
from .._holders.sqlite_key import KeyClaim, ProcessKeys, let_key_go
from ..errors import Closed, DatabaseError, SettlementError, TrinboxError

__all__ = ["AdvisoryForm"]

logger = logging.getLogger("trinbox.settle")


class AdvisoryForm:
    """Claims and settles rows of one advisory table for one subscription."""

    def __init__(self, ctx: FormContext, holder: SessionLocks | ProcessKeys) -> None:
        """``holder``: what holds a key, as the holder table chose it (session locks on
        PostgreSQL and MySQL, SQLite's process keys)."""
        self._ctx = ctx
        self._locks = holder if isinstance(holder, SessionLocks) else None
        self._process_keys = holder if isinstance(holder, ProcessKeys) else None
        self._sessions = self._locks is not None
        # A delivery holds a connection where the lock lives in a session, and in
        # transactional mode (its transaction's). Both selects pass over keys in work, so a
        # claim may feed every free worker.
        self.traits = FormTraits(
            holds_connections=self._sessions or ctx.transactional,
            feeds_every_worker=True,
            # SQLite chains too: settlement and claim in one call on the worker thread.
            chains=self._sessions or not ctx.transactional,
            # SQLite only: a batch's settlement and its worker's next claim in one call.
            chains_batches=not self._sessions and not ctx.transactional,
            counts_at_claim=True,  # the take counts the attempt and commits
        )
        self._registry = None if self._process_keys is None else self._process_keys.keys
        self._in_work: set[Delivery] = set()
        self._claiming = 0  # claims in flight
        self._settling: set[Delivery] = set()
        self._closing = 0  # sessions being closed (unconfirmed unlocks, drops)
        # Shutdown began: a session that held a lock and closes from now on is counted.
        self._shutting = False
        self.closed = 0

    @property
    def in_work(self) -> int:
        return len(self._in_work)

    def _delivery(self, record: Record, key: str, conn: Connection | None) -> Delivery:
        spec = self._ctx.spec
        values = values_of(self._ctx.statements.take[-1], record, spec)
        return Delivery(
            values=values,
            id=values[spec.id.column],
            attempt=attempt_of(spec, values),
            key=key,
            conn=conn,
        )

    async def _give_back_key(self, delivery: Delivery) -> None:
        """Unlock the key and return the session, or close it when the unlock is unconfirmed."""
        conn, delivery.conn = delivery.conn, None
        if delivery.tx_open and conn is not None:
            delivery.tx_open = False
            if not await rollback_quietly(conn):
                await self._close_session(conn)
                conn = None
        if self._registry is not None:
            self._registry.discard(str(delivery.key))
            if conn is not None:
                await give_back(self._ctx.pool, conn)
            self._ctx.wake()  # the key is free: its next row may be claimed now
            return
        if conn is None:
            return
        confirmed = delivery.unlocked
        if confirmed is None:
            confirmed = await self._unlock(conn, str(delivery.key), held=True)
        elif not confirmed:
            logger.warning(
                "%s: the unlock of %r was not confirmed; closing its session",
                self._ctx.spec.label,
                delivery.key,
            )
        if confirmed:
            await give_back(self._ctx.pool, conn)
        else:
            await self._close_session(conn)
        self._ctx.wake()  # a session is free again: a claim waiting for one may go on

    async def _unlock(self, conn: Connection, key: str, *, held: bool) -> bool:
        """Whether the session confirmed the unlock."""
        assert self._locks is not None
        return await self._locks.unlock(conn, key, held=held)

    async def _close_session(self, conn: Connection) -> None:
        self._closing += 1
        try:
            await close(self._ctx.pool, conn)
        finally:
            self._closing -= 1
            # Shutdown reports the sessions it closed or waited for, not earlier ones.
            if self._shutting:
                self.closed += 1

    def begin_shutdown(self) -> None:
        """Shutdown began: count the sessions that close from now on."""
        self._shutting = True

    def start_serving(self) -> None:
        """Serve SQLite's process keys (``StartupError`` when another process does)."""
        if self._process_keys is not None:
            self._process_keys.start_serving()

    def stop_serving(self) -> None:
        if self._process_keys is not None:
            self._process_keys.stop_serving()

    # -- drop and shutdown -----------------------------------------------------------------

    async def release(self, delivery: Delivery) -> None:
        """A dropped delivery: unlock its key and close its session (never reused), so its row
        returns at once; the caller bounds this by five seconds."""
        if delivery.settled:
            return
        delivery.settled = True
        self._in_work.discard(delivery)
        conn, delivery.conn = delivery.conn, None
        if self._registry is not None:
            self._registry.discard(str(delivery.key))
            if conn is not None:
                if delivery.tx_open:
                    await rollback_quietly(conn)
                await give_back(self._ctx.pool, conn)
            self._ctx.wake()  # the row is back and its key free
            return
        if conn is not None:
            try:
                await self._unlock(conn, str(delivery.key), held=False)
            finally:
                await self._close_session(conn)

    def abandon(self, delivery: Delivery) -> None:
        """The release ran out of time: close the key's session at once (the server frees the
        lock) and forget the key."""
        delivery.settled = True
        self._in_work.discard(delivery)
        if self._registry is not None:
            self._registry.discard(str(delivery.key))
        conn, delivery.conn = delivery.conn, None
        if conn is not None:
            self._ctx.pool.abandon(conn)

    async def release_for_shutdown(self, delivery: Delivery) -> bool:
        """Shutdown: unlock the key and return the session; whether the lock was released (an
        unconfirmed unlock closes the session instead)."""
        if delivery.settled:
            return False
        delivery.settled = True
        delivery.released = True
        self._in_work.discard(delivery)
        conn, delivery.conn = delivery.conn, None
        if delivery.tx_open and conn is not None:
            delivery.tx_open = False
            await rollback_quietly(conn)
        if self._registry is not None:
            self._registry.discard(str(delivery.key))
            if conn is not None:
                await give_back(self._ctx.pool, conn)
            return True
        assert conn is not None
        if await self._unlock(conn, str(delivery.key), held=True):
            await give_back(self._ctx.pool, conn)
            return True
        await self._close_session(conn)
        return False

    async def shutdown(self) -> tuple[int, int]:
        self.begin_shutdown()
        released = 0
        try:
            with cleanup_scope():
                for delivery in list(self._in_work - self._settling):
                    if await self.release_for_shutdown(delivery):
                        released += 1
        finally:
            # Whatever ended the subscription, no key stays registered after it: a new App in
            # this process must be able to take the key's rows again.
            for delivery in list(self._in_work):
                self.abandon(delivery)
            self.stop_serving()
        return released, self.closed

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    # -- claim ---------------------------------------------------------------------------

    async def claim(self, limit: int) -> Claimed:
        self._claiming += 1
        try:
            return await self._claim(limit)
        finally:
            self._claiming -= 1

    async def _claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        threads = self._process_keys.threads if self._process_keys is not None else None
        if threads is not None:
            assert self._process_keys is not None
            conn = await threads.acquire("advisory session")
            try:
                plan = self._key_claim(limit)
                await self._process_keys.claim(conn, plan)
            finally:
                await give_back(ctx.pool, conn)
            return await self._registered(plan)
        session = await ctx.pool.acquire("advisory session")
        try:
            candidates, now, wanted = self._candidates(limit)
            rows = await session.fetch(candidates.sql, candidates.params)
        except BaseException:
            await give_back(ctx.pool, session)
            raise
        return await self._take_rows(session, rows, limit, wanted, now)

    def _candidates(self, limit: int) -> tuple[Op, datetime, int]:
        """The candidate select of a claim of ``limit`` rows, its "now", and how many rows
        it reads: claims of this subscription running side by side read the same first
        rows, so one candidate more for each of the others leaves this one something to
        lock."""
        ctx = self._ctx
        candidates = ctx.statements.claim[0]
        now = ctx.clock()
        wanted = limit + self._claiming - 1
        values: dict[str, object] = {"group": ctx.group, "now": now, "limit": wanted}
        if self._registry is not None:
            values["held"] = sorted(self._registry)  # SQLite's select passes over them
        return Op("fetch", candidates.sql, candidates.bind(values)), now, wanted

    def _key_claim(
        self, limit: int, settle: list[Op] | None = None, frees: Sequence[str] = ()
    ) -> KeyClaim:
        """SQLite: the claim of ``limit`` rows in one call, after a settlement's ``settle``
        statements (freeing the keys ``frees``) where one chains it."""
        ctx = self._ctx
        registry = self._registry
        assert registry is not None
        candidates = ctx.statements.claim[0]
        now = ctx.clock()
        wanted = limit + self._claiming - 1  # as _candidates
        values: dict[str, object] = {"group": ctx.group, "now": now, "limit": wanted}

        def select(held: list[str]) -> Op:
            return Op("fetch", candidates.sql, candidates.bind({**values, "held": held}))

        def take(row_id: object) -> list[Op]:
            return self._take_ops(row_id, now)

        return KeyClaim(registry, select, take, limit, wanted, settle or (), frees)

    async def _registered(self, plan: KeyClaim) -> Claimed:
        """The deliveries of a SQLite claim; in transactional mode each opens its handler's
        transaction (dropped, with every row of the claim, when one cannot)."""
        taken = [self._delivery(record, key, conn=None) for key, record in plan.taken]
        self._in_work.update(taken)
        if self._ctx.transactional:
            try:
                for delivery in taken:
                    await self._begin_transaction(delivery)
            except BaseException:
                with cleanup_scope():
                    for delivery in taken:
                        await self.release(delivery)
                raise
        return Claimed(taken, exhausted=plan.read < plan.wanted)

    async def _take_rows(
        self,
        session: Connection | None,
        rows: list[Record],
        limit: int,
        wanted: int,
        now: datetime,
    ) -> Claimed:
        """Lock and take candidates, the first on ``session`` (which this consumes), each next
        on a session of its own."""
        ctx = self._ctx
        suspect: Connection | None = None  # a session that may hold a lock we did not record
        suspect_key = ""
        taken: list[Delivery] = []
        try:
            # The select passes over keys in work (session locks: held anywhere; SQLite: held
            # by this process's registry), so a full select means more is due even when a
            # claim took fewer rows (rows of one key, the pool's sessions in use).
            exhausted = len(rows) < wanted
            seen: set[str] = set()
            for row_id, key in rows:
                if len(taken) >= limit:
                    break
                key = str(key)
                if key in seen:
                    continue  # one row per key per claim
                seen.add(key)
                if self._registry is not None:
                    assert session is not None
                    delivery = await self._take_registered(session, row_id, key, now)
                else:
                    if session is None:
                        # The next candidate needs a session of its own; a full pool ends the
                        # claim early instead of waiting, and so does the pool's last
                        # connection, which the subscription leaves to handlers and publishes.
                        if self._sessions_held() >= ctx.pool.max_size - 1:
                            break
                        session = await ctx.pool.try_acquire("advisory session")
                        if session is None:
                            break
                    suspect, suspect_key = session, key  # marked before the lock is sent
                    locked, record = await self._lock_and_take(session, row_id, key, now)
                    if not locked:
                        suspect = None
                        continue  # held elsewhere: the session tries the next candidate
                    if record is None:
                        # Another holder settled the row between select and lock.
                        if not await self._unlock(session, key, held=True):
                            await self._close_session(session)
                            session = None
                        suspect = None
                        continue
                    delivery = self._delivery(record, key, conn=session)
                    suspect = None
                    session = None
                if delivery is not None:
                    taken.append(delivery)
                    self._in_work.add(delivery)
            if ctx.transactional:
                for delivery in taken:
                    await self._begin_transaction(delivery)
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                # Only a stopping subscription cancels its claim: its closes are shutdown's.
                self.begin_shutdown()
            # Everything taken so far is dropped: rows return, no lock stays behind.
            with cleanup_scope():
                if suspect is not None:
                    session = None
                    await self._unlock(suspect, suspect_key, held=False)
                    await self._close_session(suspect)
                for delivery in taken:
                    await self.release(delivery)
            raise
        finally:
            if session is not None:
                await give_back(ctx.pool, session)
        return Claimed(taken, exhausted=exhausted)

    def _sessions_held(self) -> int:
        """Sessions the deliveries in work hold (this claim's taken ones too)."""
        return sum(1 for delivery in self._in_work if delivery.conn is not None)

    async def _take_registered(
        self, conn: Connection, row_id: object, key: str, now: object
    ) -> Delivery | None:
        registry = self._registry
        assert registry is not None
        if key in registry:
            return None
        registry.add(key)
        try:
            record = await self._take(conn, row_id, now)
        except BaseException:
            registry.discard(key)
            raise
        if record is None:
            registry.discard(key)
            return None
        return self._delivery(record, key, conn=None)

    async def _lock_and_take(
        self, session: Connection, row_id: object, key: str, now: object
    ) -> tuple[bool, Record | None]:
        """Lock the key on the session without waiting and, if it was taken, take the row, in
        one round trip: (whether the key was locked, the row taken or ``None``)."""
        assert self._locks is not None
        results = await self._locks.lock_and_take(session, key, self._take_ops(row_id, now))
        if results is None:
            return False, None
        return True, self._taken(results, row_id)

    async def _take(self, conn: Connection, row_id: object, now: object) -> Record | None:
        """The take counts the attempt and reads the row, and commits on its own."""
        results = await conn.script(self._take_ops(row_id, now), until_empty=True)
        return self._taken(results, row_id)

    def _take_ops(self, row_id: object, now: object) -> list[Op]:
        values = {"id": row_id, "group": self._ctx.group, "now": now}
        take = self._ctx.statements.take
        # MySQL counts with an UPDATE, then reads with a SELECT; elsewhere one statement
        # with RETURNING (or a SELECT without an attempt column) does both.
        return [
            Op(
                "execute" if len(take) > 1 and i < len(take) - 1 else "fetch",
                st.sql,
                st.bind(values),
            )
            for i, st in enumerate(take)
        ]

    def _taken(self, results: list[Result], row_id: object) -> Record | None:
        """The row a take read, or ``None`` when the row was no longer claimable."""
        if len(results) < len(self._ctx.statements.take):
            return None  # an UPDATE changed nothing, so the script stopped
        records = results[-1]
        if not isinstance(records, list) or not records:
            return None
        if len(records) != 1:
            msg = f"a take reads one row, found {len(records)} for id {row_id!r}"
            raise RuntimeError(msg)
        return records[0]

    async def _begin_transaction(self, delivery: Delivery) -> None:
        """Transactional mode: the handler's transaction opens on the key's session."""
        if delivery.conn is None:
            delivery.conn = await self._ctx.pool.acquire("delivery transaction")
        await delivery.conn.begin(self._ctx.statements.begin.sql)
        delivery.tx_open = True

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None and delivery.tx_open
        return delivery.conn

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
        assert self._locks is not None
        values = {"id": delivery.id, "now": ctx.clock(), **step_values(step)}
        settling = [Op("execute", st.sql, st.bind(values)) for st in statements]
        unlocking = self._locks.unlock_op(str(delivery.key))
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
                delivery.unlocked = isinstance(unlocked, list) and not stops(
                    cast("Result", unlocked)
                )
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
        if self._locks is not None and conn is not None and len(statements) <= 1:
            # One round trip: the statement (committing on its own) and the unlock.
            ops = [Op("execute", st.sql, st.bind(values)) for st in statements]
            ops.append(self._locks.unlock_op(str(delivery.key)))
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
