"""The server session lock: what holds an advisory row on PostgreSQL and MySQL, a lock on its
key held by one pooled session (``pg_try_advisory_lock``, ``GET_LOCK``) from the claim to the
settlement, with no transaction open.

The lock is tried without waiting, and the row taken, in one round trip; the unlock must be
confirmed, else the session is closed (never given back), so that the server ends it and frees
its locks. Each delivery keeps the session that locked its key until it settles; a settling
worker unlocks its key and reads the next claim's candidates in one round trip, and its session
goes on to lock the first of them (``settle_and_claim``).

Under a limit (``InboxQueue.limit``, trinbox._dialects._advisory_slots) the key's lock is
followed, in the same round trip, by the plan's ``key_slots``: the row's slots of its limit key
and of the queue, tried without waiting on the same session, all or nothing (none free: the
key is let go too and the claim tries its next candidate). The delivery keeps the slots' indexes
(``Delivery.slots``), and the one unlock lets go of the key and its slots together. The
candidates say how many slots each limit key had free, so a claim tries no more of a key's rows.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import cast

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._dialects.plans import Plan
from .._drivers._base import Connection, Op, Record, Result, stops
from ..errors import TrinboxError
from ._base import Chained, Claimed, Delivery, FormTraits, Step
from .advisory_hold import KeyWork
from .connections import give_back
from .settlement import settle_alone, settlement_ran, step_ops

__all__ = ["SessionLocks"]

logger = logging.getLogger("trinbox.settle")


class SessionLocks:
    """The session locks of one advisory subscription's keys."""

    __slots__ = ("_key_slots", "_label", "_lock", "_unlock")

    def __init__(self, plan: Plan, label: str) -> None:
        assert plan.lock is not None and plan.unlock is not None
        self._lock = plan.lock
        self._key_slots = plan.key_slots
        self._unlock = plan.unlock
        self._label = label

    def unlock_op(self, delivery: Delivery) -> Op:
        """The unlock of ``delivery``'s key and slots, as a step of a script (a settlement's
        round trip ends with it)."""
        return Op("fetch", self._unlock.sql, self._unlock.bind(_held(delivery)))

    async def lock_and_take(
        self, session: Connection, key: str, slot_key: object, group: str | None, take: list[Op]
    ) -> tuple[list[Result], dict[str, object] | None] | None:
        """Lock ``key`` on ``session`` without waiting, then (under a limit) the row's slots of
        ``slot_key`` and of the queue, and, if all were had, run ``take``, in one round trip:
        the take's results and the slots held, or ``None`` when another session holds the key
        or no slot was free (the session then holds nothing)."""
        values = {"key": key, "slot_key": slot_key, "group": group}
        ops = [Op("fetch", self._lock.sql, self._lock.bind(values))]
        if self._key_slots is not None:
            ops.append(Op("fetch", self._key_slots.sql, self._key_slots.bind(values)))
        results = await session.script([*ops, *take], until_empty=True)
        if any(stops(result) for result in results[: len(ops)]) or len(results) < len(ops):
            return None
        slots = None
        if self._key_slots is not None:
            got = results[1]
            assert isinstance(got, list)
            slots = {"group": group, "slot_key": slot_key, "slot": got[0][1], "whole": got[0][2]}
        return results[len(ops) :], slots

    async def unlock(self, conn: Connection, values: dict[str, object], *, held: bool) -> bool:
        """Whether the session confirmed the unlock of a key and its slots (``values``, as
        ``_held`` gives them; within the bound around it); ``held``: they were this
        session's, so an unconfirmed unlock is worth a warning."""
        key = values["key"]
        with cleanup_scope():
            try:
                rows = await conn.fetch(self._unlock.sql, self._unlock.bind(values))
                if rows and rows[0][0]:
                    return True
            except Exception:
                logger.warning("unlocking %r failed", key, exc_info=True)
                return False
        if held:
            logger.warning(
                "%s: the unlock of %r was not confirmed; closing its session", self._label, key
            )
        return False

    # -- the advisory hold (trinbox._holders.advisory_hold.AdvisoryHold) ---------------------

    def traits(self, transactional: bool) -> FormTraits:
        # A delivery holds the session of its lock; the select passes over keys locked
        # anywhere, so a claim may feed every free worker.
        return FormTraits(
            holds_connections=True,
            feeds_every_worker=True,
            chains=True,
            chains_batches=False,
            counts_at_claim=True,  # the take counts the attempt and commits
        )

    def start_serving(self) -> None:
        pass  # the server holds the locks: nothing to serve in this process

    def stop_serving(self) -> None:
        pass

    async def claim(self, work: KeyWork, limit: int) -> Claimed:
        ctx = work.ctx
        session = await ctx.pool.acquire("advisory session")
        try:
            candidates, now, wanted = _candidates(work, limit)
            rows = await session.fetch(candidates.sql, candidates.params)
        except BaseException:
            await give_back(ctx.pool, session)
            raise
        return await self._take_rows(work, session, rows, limit, wanted, now)

    async def _take_rows(
        self,
        work: KeyWork,
        session: Connection | None,
        rows: list[Record],
        limit: int,
        wanted: int,
        now: datetime,
    ) -> Claimed:
        """Lock and take candidates, the first on ``session`` (which this consumes), each next
        on a session of its own."""
        ctx = work.ctx
        suspect: Connection | None = None  # a session that may hold a lock we did not record
        suspect_key = ""
        taken: list[Delivery] = []
        try:
            # The select passes over keys locked anywhere, so a full select means more is
            # due even when a claim took fewer rows (rows of one key, the pool's sessions
            # in use).
            exhausted = len(rows) < wanted
            seen: set[str] = set()
            # Under a limit: the slots of each limit key this claim took (the candidates
            # say how many were free as they were read; the try-locks have the last word).
            took: Counter[object] = Counter()
            for row in rows:
                if len(taken) >= limit:
                    break
                row_id, key = row[0], str(row[1])
                slot_key: object = None
                if self._key_slots is not None:
                    slot_key, free, whole_free = row[2], row[3], row[4]
                    if whole_free is not None and len(taken) >= cast("int", whole_free):
                        break  # the queue's free slots are this claim's already
                    if free is not None and took[slot_key] >= cast("int", free):
                        continue  # so are this limit key's
                if key in seen:
                    continue  # one row per key per claim
                seen.add(key)
                if session is None:
                    # The next candidate needs a session of its own; a full pool ends the
                    # claim early instead of waiting, and so does the pool's last
                    # connection, which the subscription leaves to handlers and publishes.
                    if _sessions_held(work) >= ctx.pool.max_size - 1:
                        break
                    session = await ctx.pool.try_acquire("advisory session")
                    if session is None:
                        break
                suspect, suspect_key = session, key  # marked before the lock is sent
                got = await self.lock_and_take(
                    session, key, slot_key, ctx.group, work.take_ops(row_id, now)
                )
                if got is None:
                    suspect = None
                    continue  # held elsewhere, or no slot: the session tries the next one
                results, slots = got
                record = work.taken(results, row_id)
                if record is None:
                    # Another holder settled the row between select and lock.
                    if not await self.unlock(session, {"key": key, **(slots or {})}, held=True):
                        await work.close_session(session)
                        session = None
                    suspect = None
                    continue
                delivery = work.delivery(record, key, conn=session)
                delivery.slots = slots
                took[slot_key] += 1
                suspect = None
                session = None
                taken.append(delivery)
                work.working.add(delivery)
            if ctx.transactional:
                for delivery in taken:
                    await work.begin_transaction(delivery)
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                # Only a stopping subscription cancels its claim: its closes are shutdown's.
                work.begin_shutdown()
            # Everything taken so far is dropped: rows return, no lock stays behind.
            with cleanup_scope():
                if suspect is not None:
                    session = None
                    if self._key_slots is None:
                        # Under a limit the slots it may hold are unknown: the close frees all.
                        await self.unlock(suspect, {"key": suspect_key}, held=False)
                    await work.close_session(suspect)
                for delivery in taken:
                    await work.release(delivery)
            raise
        finally:
            if session is not None:
                await give_back(ctx.pool, session)
        if self._key_slots is not None:
            # Under a limit the candidates are a window ranked per limit key: rows of other
            # keys may lie past it, so only a claim that took nothing ran dry.
            exhausted = not taken
        return Claimed(taken, exhausted=exhausted)

    async def let_go(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        """Unlock the key and return the session, or close it when the unlock is
        unconfirmed."""
        if conn is None:
            return
        confirmed = delivery.unlocked
        if confirmed is None:
            confirmed = await self.unlock(conn, _held(delivery), held=True)
        elif not confirmed:
            logger.warning(
                "%s: the unlock of %r was not confirmed; closing its session",
                self._label,
                delivery.key,
            )
        if confirmed:
            await give_back(work.ctx.pool, conn)
        else:
            await work.close_session(conn)
        work.ctx.wake()  # a session is free again: a claim waiting for one may go on

    async def release(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        """Unlock the key and close its session (never reused)."""
        if conn is not None:
            try:
                await self.unlock(conn, _held(delivery), held=False)
            finally:
                await work.close_session(conn)

    def forget(self, key: str) -> None:
        pass  # closing the session frees its lock on the server

    async def let_go_for_shutdown(
        self, work: KeyWork, delivery: Delivery, conn: Connection | None
    ) -> bool:
        """Unlock the key and return the session; an unconfirmed unlock closes it instead."""
        assert conn is not None
        if await self.unlock(conn, _held(delivery), held=True):
            await give_back(work.ctx.pool, conn)
            return True
        await work.close_session(conn)
        return False

    async def run_statements(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None:
        conn = delivery.conn
        if conn is not None and len(statements) <= 1:
            # One round trip: the statement (committing on its own) and the unlock.
            ops = [Op("execute", st.sql, st.bind(values)) for st in statements]
            ops.append(self.unlock_op(delivery))
            results = await conn.script(ops)
            delivery.unlocked = not stops(results[-1])
            return
        await work.run_plain(conn, statements, values)

    async def settle_batch(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """Side by side, each on the session that holds its key."""
        errors: list[TrinboxError | None] = [None] * len(items)

        async def settle_one(i: int) -> None:
            try:
                await work.settle(*items[i])
            except TrinboxError as exc:
                errors[i] = exc

        async with trio.open_nursery() as nursery:
            for i in range(len(items)):
                nursery.start_soon(settle_one, i)
        return errors

    async def settle_batch_and_claim(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        return await self.settle_batch(work, items), Chained()  # batches do not chain here

    async def settle_and_claim(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        step: Step,
        limit: int,
    ) -> Chained:
        """Settle and unlock the key, then read the next claim's candidates, in one round
        trip on the delivery's session; the session goes on to lock the first of them."""
        ctx = work.ctx
        session = delivery.conn
        if session is None:
            return await settle_alone(work.settle, delivery, step)
        settling = step_ops(ctx.statements, delivery, step, ctx.clock())
        unlocking = self.unlock_op(delivery)
        work.settling.add(delivery)
        work.claiming += 1
        try:
            candidates, now, wanted = _candidates(work, limit)
            try:
                results = await session.script([*settling, unlocking, candidates])
            except TrinboxError as exc:
                if not settlement_ran(exc, len(settling)):
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
            work.claiming -= 1
            delivery.settled = True
            work.settling.discard(delivery)
            work.working.discard(delivery)
            if delivery.conn is not None:
                await work.hand_back(delivery)
        try:
            claimed = await self._take_rows(work, session, rows, limit, wanted, now)
        except TrinboxError as exc:
            # Settled and unlocked; the claim failed (it released what it had taken).
            ctx.wake()
            return Chained(claim_error=exc)
        if not claimed:
            ctx.wake()  # the session went back to the pool: a claim waiting for one may go on
        return Chained(claimed=claimed)


def _sessions_held(work: KeyWork) -> int:
    """Sessions the deliveries in work hold (this claim's taken ones too)."""
    return sum(1 for delivery in work.working if delivery.conn is not None)


def _candidates(work: KeyWork, limit: int) -> tuple[Op, datetime, int]:
    """The candidate select of a claim of ``limit`` rows, its "now", and how many rows it
    reads (``KeyWork.claim_values``)."""
    values, now, wanted = work.claim_values(limit)
    candidates = work.ctx.statements.claim[0]
    return Op("fetch", candidates.sql, candidates.bind(values)), now, wanted


def _held(delivery: Delivery) -> dict[str, object]:
    """What the unlock binds: the delivery's key, and its slots under a limit."""
    return {"key": str(delivery.key), **(delivery.slots or {})}
