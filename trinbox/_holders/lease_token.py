"""The lease token: what holds a lease row, the expiry its claim wrote, valid while the row
still holds it; and the keeper that moves every lease in work forward.

One lock order, so that nothing here waits in a circle: **a delivery's token, then a pooled
connection; a task that holds a connection never waits for a token.**

- A settlement or a release takes its delivery's token, then a connection for its statements:
  ``LeaseTokens.holding`` takes the tokens, and the connection is reached only through it.
  In transactional mode the delivery gives its transaction's connection back before it takes
  the token; its ack in the transaction takes no token (it runs on the connection it holds,
  and a round may be waiting on that very transaction's row locks).
- The keeper takes its connection first, then, without waiting, the token of each delivery
  in work: a token in use belongs to a settlement or a release under way, and that delivery
  sits the round out. It moves every lease of the round in one statement (MySQL: a locking
  select and an update in one transaction), so the settlements of those deliveries wait for
  their tokens only while that statement runs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

import trio

from .._bounds import EXTEND_ERROR_WAIT
from .._drivers._base import Connection, Op, Pool
from ._base import Delivery, FormContext, lease_expiry
from .connections import give_back

__all__ = ["HeldTokens", "LeaseKeeper", "LeaseTokens"]

logger = logging.getLogger("trinbox.settle")


class LeaseTokens:
    """The tokens of one subscription's deliveries in work (``in_work``), and which of them
    are in use right now, by a settlement or an extension round: a settlement waits for the
    round, so it always binds the current token, and the round passes over a token in use
    instead of waiting (see the lock order above). One set per form instead of a lock per
    delivery: a batch takes its hundred rows without a checkpoint."""

    def __init__(self, pool: Pool) -> None:
        self.in_work: set[Delivery] = set()  # every delivery whose lease the keeper moves
        self._pool = pool
        self._in_use: set[Delivery] = set()
        self._waiting = 0
        self._freed = trio.Event()

    @asynccontextmanager
    async def holding(self, deliveries: Sequence[Delivery]) -> AsyncGenerator[HeldTokens]:
        """Take the token of each of ``deliveries`` (waiting for a round that uses one), and
        give them back on leaving; pooled connections are reached through what this yields,
        so a connection is always taken after the tokens."""
        taken: list[Delivery] = []
        try:
            for delivery in deliveries:
                await self._take(delivery)
                taken.append(delivery)
            yield HeldTokens(self._pool)
        finally:
            for delivery in taken:
                self.give(delivery)

    async def _take(self, delivery: Delivery) -> None:
        while delivery in self._in_use:
            self._waiting += 1
            try:
                await self._freed.wait()
            finally:
                self._waiting -= 1
        self._in_use.add(delivery)

    def try_take(self, delivery: Delivery) -> bool:
        """Take the token if no one uses it; never waits (the keeper's round, which holds a
        connection already)."""
        if delivery in self._in_use:
            return False
        self._in_use.add(delivery)
        return True

    def give(self, delivery: Delivery) -> None:
        self._in_use.discard(delivery)
        if self._waiting:
            self._freed.set()
            self._freed = trio.Event()


class HeldTokens:
    """Tokens taken (``LeaseTokens.holding``): the way to a pooled connection for the
    statements they condition."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def acquire(self, holder: str) -> Connection:
        return await self._pool.acquire(holder)

    async def give_back(self, conn: Connection) -> None:
        await give_back(self._pool, conn)

    @asynccontextmanager
    async def connection(self, holder: str) -> AsyncGenerator[Connection]:
        conn = await self._pool.acquire(holder)
        try:
            yield conn
        finally:
            await give_back(self._pool, conn)


class LeaseKeeper:
    """The lease keeper of one subscription: a round every third of the lease over the
    deliveries in work (``tokens.in_work``), one statement a round."""

    def __init__(self, ctx: FormContext, tokens: LeaseTokens) -> None:
        self._ctx = ctx
        self._tokens = tokens
        self._in_work = tokens.in_work
        self._lease_seconds = int(ctx.lease.total_seconds())

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Rounds by deadline, every third of the lease counted from the start of the last
        (a round that ran long is followed at once, never by a burst). A round that fails,
        whatever the exception, is logged and tried again ``EXTEND_ERROR_WAIT`` later (or at
        the next round's time, if that comes first): one failed round costs a second, not a
        third of the lease. The rounds are timed by Trio's monotonic clock, never by comparing
        a token with a clock: a token the server made says nothing about the host's time."""
        task_status.started()
        interval = self._ctx.lease.total_seconds() / 3
        due = trio.current_time() + interval
        while True:
            await trio.sleep_until(due)
            started = trio.current_time()
            due = started + interval
            if not self._in_work:
                continue
            try:
                await self.extend_all()
            except Exception:
                # Never trio.Cancelled (a BaseException): the keeper stops when cancelled.
                logger.warning(
                    "a lease extension round failed for %s; trying again in %g s",
                    self._ctx.spec.label,
                    EXTEND_ERROR_WAIT,
                    exc_info=True,
                )
                due = min(due, trio.current_time() + EXTEND_ERROR_WAIT)

    async def extend_all(self) -> None:
        """One round: the connection first, then the tokens that are free (the lock order
        above), and every lease they hold moved forward in one statement."""
        ctx = self._ctx
        conn = await ctx.pool.acquire("lease keeper")
        try:
            # No checkpoint from the first token taken to the statement's start.
            taken = [
                delivery
                for delivery in list(self._in_work)
                if not delivery.settled
                and not delivery.lease_lost
                and self._tokens.try_take(delivery)
            ]
            try:
                if taken:
                    moved = await self._extend(conn, taken)
                    for delivery in taken:
                        # A delivery settled meanwhile (acked in its transaction, or released:
                        # the release waits for this token) is not reported on.
                        report = not delivery.settled
                        if delivery.id in moved:
                            delivery.token = moved[delivery.id]
                        else:
                            delivery.lease_lost = True
                        if report:
                            ctx.extended(delivery, not delivery.lease_lost)  # logs a loss
            finally:
                for delivery in taken:
                    self._tokens.give(delivery)
        finally:
            await give_back(ctx.pool, conn)

    async def _extend(self, conn: Connection, deliveries: list[Delivery]) -> dict[object, object]:
        """Move the leases of ``deliveries`` that their tokens still hold; the new token of
        each row moved, by id. The new expiry is the host's now plus the lease, or the
        server's (read back, so that the token is the value the row holds)."""
        ctx = self._ctx
        new: object = lease_expiry(ctx.clock(), ctx.lease)
        tokens = [ctx.dialect.driver_value(delivery.token) for delivery in deliveries]
        values: dict[str, object] = {
            "lease": new,
            "lease_seconds": self._lease_seconds,
            "ids": [ctx.dialect.driver_value(delivery.id) for delivery in deliveries],
            "tokens": tokens,
        }
        # The progress reported since the last write, NULL for a row whose value is written
        # already; a round with nothing new runs the plain extension.
        progress: list[float | None] = [
            None if delivery.progress == delivery.progress_written else delivery.progress
            for delivery in deliveries
        ]
        writes = bool(ctx.statements.extend_progress) and any(p is not None for p in progress)
        if writes:
            values["progress"] = progress
        moved = await self._run(conn, deliveries, values, tokens, new, progress if writes else None)
        if writes:
            for delivery, value in zip(deliveries, progress, strict=True):
                if value is not None and delivery.id in moved:
                    delivery.progress_written = value
        return moved

    async def _run(
        self,
        conn: Connection,
        deliveries: list[Delivery],
        values: dict[str, object],
        tokens: list[object],
        new: object,
        progress: list[float | None] | None,
    ) -> dict[object, object]:
        """Run the round's statements (``progress``: the values its extension writes too)."""
        ctx = self._ctx
        round_ = ctx.statements.extend if progress is None else ctx.statements.extend_progress
        if len(round_) == 1:
            (extend,) = round_
            records = await conn.fetch(extend.sql, extend.bind(values))
            return {record[0]: record[1] if len(record) > 1 else new for record in records}
        # MySQL: lock the rows their tokens still hold (reading the server's new expiry on the
        # database clock), then move exactly those, in one transaction.
        count = len(deliveries)
        select, update = ctx.statements.extend_for(count, progress=progress is not None)
        for i, delivery in enumerate(deliveries):
            values[f"id{i}"] = delivery.id
            values[f"token{i}"] = tokens[i]
            if progress is not None:
                values[f"progress{i}"] = progress[i]
        opened = await conn.script(
            [
                Op("begin", ctx.statements.claim_begin.sql),
                Op("fetch", select.sql, select.bind(values)),
            ]
        )
        held = opened[1]
        assert isinstance(held, list)
        if not held:
            await conn.commit()
            return {}
        if len(held[0]) > 1:
            new = values["lease"] = held[0][1]
        await conn.script([Op("execute", update.sql, update.bind(values)), Op("commit")])
        return {record[0]: new for record in held}
