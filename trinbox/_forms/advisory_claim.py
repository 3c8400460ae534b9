"""The advisory form's claim: read candidates past the keys in work, lock each key (a session
lock, or this process's registry on SQLite) and take its row.

On SQLite the whole claim is one call on the connection's worker thread, in one transaction
(trinbox._holders.sqlite_key.KeyClaim): the select reads past the keys in work as they are
when it runs, and each key enters the registry as its row is taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import trio

from .._bounds import cleanup_scope
from .._drivers._base import Connection, Op, Record, Result, stops
from .._holders._base import Claimed, Delivery
from .._holders.connections import give_back
from .._holders.sqlite_key import KeyClaim
from .advisory_keys import AdvisoryKeys

__all__ = ["AdvisoryClaims"]


class AdvisoryClaims(AdvisoryKeys):
    """Claims rows of one advisory table for one subscription."""

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

    async def _begin_transaction(self, delivery: Delivery) -> None:
        """Transactional mode: the handler's transaction opens on the key's session."""
        if delivery.conn is None:
            delivery.conn = await self._ctx.pool.acquire("delivery transaction")
        await delivery.conn.begin(self._ctx.statements.begin.sql)
        delivery.tx_open = True

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None and delivery.tx_open
        return delivery.conn
