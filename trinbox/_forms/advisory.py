"""The advisory form: each row is held by a lock on its key, rendered by the database from the
table's template; rows that share a key go into work one at a time.

On PostgreSQL and MySQL the lock lives in a session: each delivery keeps the session that locked
its key, with no transaction open, until it settles; then the key is unlocked and the session
goes back to the pool (or is closed when the unlock is not confirmed). SQLite has no session
locks, so the process keeps the keys in work in a registry, keyed by database file; one process
serves a database file (a subscription's startup refuses a second, trinbox._drivers._sqlite_keys).
Its candidate select passes over the keys the registry holds, so one claim feeds every free
worker with rows of different keys, and a settlement that frees a key wakes the claim loop: the
key's next row is claimed at once, not a poll interval later.

With session locks, a settling worker unlocks its key and reads the next claim's candidates in
one round trip, and its session goes on to lock the first of them (settle_and_claim).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record, Result, stops
from .._errors import Closed, DatabaseError, SettlementError, TrinboxError
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
    give_back,
    rollback_quietly,
    step_statements,
    step_values,
    values_of,
)

__all__ = ["AdvisoryForm", "KeyRegistry"]

logger = logging.getLogger("trinbox.settle")


class KeyRegistry:
    """Keys in work in this process, per database: SQLite's stand-in for session locks."""

    _by_database: dict[str, set[str]] = {}  # noqa: RUF012 - process-wide on purpose

    @classmethod
    def keys(cls, database: str) -> set[str]:
        return cls._by_database.setdefault(database, set())


class AdvisoryForm:
    """Claims and settles rows of one advisory table for one subscription."""

    def __init__(self, ctx: FormContext) -> None:
        self._ctx = ctx
        st = ctx.statements
        self._sessions = st.lock is not None
        # A delivery holds a connection where the lock lives in a session, and in
        # transactional mode (its transaction's). Both selects pass over keys in work, so a
        # claim may feed every free worker.
        self.traits = FormTraits(
            holds_connections=self._sessions or ctx.transactional,
            feeds_every_worker=True,
            chains=self._sessions,
        )
        self._registry = None if self._sessions else KeyRegistry.keys(ctx.pool.identity)
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

    # -- claim ---------------------------------------------------------------------------

    async def claim(self, limit: int) -> Claimed:
        self._claiming += 1
        try:
            return await self._claim(limit)
        finally:
            self._claiming -= 1

    async def _claim(self, limit: int) -> Claimed:
        ctx = self._ctx
        session = await ctx.pool.acquire()
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
                        session = await ctx.pool.try_acquire()
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
                            await self._close(session)
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
                    await self._close(suspect)
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
        lock = self._ctx.statements.lock
        assert lock is not None
        lock_op = Op("fetch", lock.sql, lock.bind({"key": key}))
        results = await session.script([lock_op, *self._take_ops(row_id, now)], until_empty=True)
        if stops(results[0]):
            return False, None
        return True, self._taken(results[1:], row_id)

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

    async def _begin_transaction(self, delivery: Delivery) -> None:
        """Transactional mode: the handler's transaction opens on the key's session."""
        if delivery.conn is None:
            delivery.conn = await self._ctx.pool.acquire()
        begin = self._ctx.statements.begin
        await delivery.conn.begin(begin.sql if begin else "BEGIN")
        delivery.tx_open = True

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None and delivery.tx_open
        return delivery.conn

    # -- settle --------------------------------------------------------------------------

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """Each delivery settles on its own; with session locks they settle side by side,
        each on the session that holds its key."""
        errors: list[TrinboxError | None] = [None] * len(items)

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

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and unlock its key, then read the next claim's candidates,
        in one round trip on the delivery's session; the session goes on to lock the first
        of them. Transactional mode, SQLite's key registry, and moves into another table
        settle alone."""
        ctx = self._ctx
        statements = step_statements(ctx.statements, step)
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
                await self._let_go(delivery)
        try:
            claimed = await self._take_rows(session, rows, limit, wanted, now)
        except TrinboxError as exc:
            # Settled and unlocked; the claim failed (it released what it had taken).
            ctx.wake()
            return Chained(claim_error=exc)
        if not claimed:
            ctx.wake()  # the session went back to the pool: a claim waiting for one may go on
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
            await self._let_go(delivery)

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
            conn = await self._ctx.pool.acquire()
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
        await conn.begin(self._ctx.dialect.plain_begin().sql)
        try:
            for statement in statements:
                await conn.execute(statement.sql, statement.bind(values))
            await conn.commit()
        except BaseException:
            await rollback_quietly(conn)
            raise

    async def _let_go(self, delivery: Delivery) -> None:
        """Unlock the key and return the session, or close it when the unlock is unconfirmed."""
        conn, delivery.conn = delivery.conn, None
        if delivery.tx_open and conn is not None:
            delivery.tx_open = False
            if not await rollback_quietly(conn):
                await self._close(conn)
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
            await self._close(conn)
        self._ctx.wake()  # a session is free again: a claim waiting for one may go on

    async def _unlock(self, conn: Connection, key: str, *, held: bool) -> bool:
        """Whether the session confirmed the unlock."""
        unlock = self._ctx.statements.unlock
        assert unlock is not None
        with cleanup_scope():
            try:
                rows = await conn.fetch(unlock.sql, unlock.bind({"key": key}))
                if rows and rows[0][0]:
                    return True
            except Exception:
                logger.warning("unlocking %r failed", key, exc_info=True)
                return False
        if held:
            logger.warning(
                "%s: the unlock of %r was not confirmed; closing its session",
                self._ctx.spec.label,
                key,
            )
        return False

    async def _close(self, conn: Connection) -> None:
        self._closing += 1
        try:
            await discard(self._ctx.pool, conn)
        finally:
            self._closing -= 1
            # Shutdown reports the sessions it closed or waited for, not earlier ones.
            if self._shutting:
                self.closed += 1

    def begin_shutdown(self) -> None:
        """Shutdown began: count the sessions that close from now on."""
        self._shutting = True

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
                await self._close(conn)

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
        await self._close(conn)
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
        return released, self.closed

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
