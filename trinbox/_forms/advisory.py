"""The advisory form: each row is held by a lock on its key, rendered by the database from the
table's template; rows that share a key go into work one at a time.

What holds a key is the form table's choice (trinbox._forms.table): a server session's lock
on PostgreSQL and MySQL (trinbox._holders.session_lock), this process's key on SQLite, which
has no session locks (trinbox._holders.process_keys). The form keeps the deliveries in work and
the steps every hold shares (the take, the handler's transaction, the settlement's statements,
shutdown), and calls its hold's verbs (trinbox._holders.advisory_hold.AdvisoryHold) for the rest,
never asking which one it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record, Result
from .._holders._base import (
    Ack,
    Chained,
    Claimed,
    Delivery,
    FormContext,
    Step,
    attempt_of,
    step_statements,
    step_values,
    values_of,
)
from .._holders.advisory_hold import AdvisoryHold
from .._holders.connections import close, give_back, rollback_quietly
from .._holders.settlement import settle_alone
from ..errors import Closed, SettlementError, TrinboxError

__all__ = ["AdvisoryForm"]


class AdvisoryForm:
    """Claims and settles rows of one advisory table for one subscription."""

    def __init__(self, ctx: FormContext, hold: AdvisoryHold) -> None:
        """``hold``: what holds a key, as the form table chose it (session locks on
        PostgreSQL and MySQL, SQLite's process keys)."""
        self.ctx = ctx
        self._hold = hold
        self.traits = hold.traits(ctx.transactional)
        self.working: set[Delivery] = set()
        self.claiming = 0  # claims in flight
        self.settling: set[Delivery] = set()
        self._closing = 0  # sessions being closed (unconfirmed unlocks, drops)
        # Shutdown began: a session that held a lock and closes from now on is counted.
        self._shutting = False
        self.closed = 0

    @property
    def in_work(self) -> int:
        return len(self.working)

    def delivery(self, record: Record, key: str, conn: Connection | None) -> Delivery:
        spec = self.ctx.spec
        values = values_of(record, spec)
        return Delivery(
            values=values,
            id=values[spec.id.column],
            attempt=attempt_of(spec, values),
            key=key,
            conn=conn,
        )

    async def hand_back(self, delivery: Delivery) -> None:
        """End the handler's transaction, if open, and let the hold let go of the key and
        the delivery's connection."""
        conn, delivery.conn = delivery.conn, None
        if delivery.tx_open and conn is not None:
            delivery.tx_open = False
            if not await rollback_quietly(conn):
                await self.close_session(conn)
                conn = None
        await self._hold.let_go(self, delivery, conn)

    async def close_session(self, conn: Connection) -> None:
        self._closing += 1
        try:
            await close(self.ctx.pool, conn)
        finally:
            self._closing -= 1
            # Shutdown reports the sessions it closed or waited for, not earlier ones.
            if self._shutting:
                self.closed += 1

    def begin_shutdown(self) -> None:
        """Shutdown began: count the sessions that close from now on."""
        self._shutting = True

    def start_serving(self) -> None:
        """Serve the hold's keys (SQLite: ``StartupError`` when another process does)."""
        self._hold.start_serving()

    def stop_serving(self) -> None:
        self._hold.stop_serving()

    # -- drop and shutdown -----------------------------------------------------------------

    async def release(self, delivery: Delivery) -> None:
        """A dropped delivery: its key let go and its session never reused, so its row
        returns at once; the caller bounds this by five seconds."""
        if delivery.settled:
            return
        delivery.settled = True
        self.working.discard(delivery)
        conn, delivery.conn = delivery.conn, None
        await self._hold.release(self, delivery, conn)

    def abandon(self, delivery: Delivery) -> None:
        """The release ran out of time: close the key's session at once (the server frees the
        lock) and forget the key."""
        delivery.settled = True
        self.working.discard(delivery)
        self._hold.forget(str(delivery.key))
        conn, delivery.conn = delivery.conn, None
        if conn is not None:
            self.ctx.pool.abandon(conn)

    async def release_for_shutdown(self, delivery: Delivery) -> bool:
        """Shutdown: let go of the key and return the session; whether the key was released
        (an unconfirmed unlock closes the session instead)."""
        if delivery.settled:
            return False
        delivery.settled = True
        delivery.released = True
        self.working.discard(delivery)
        conn, delivery.conn = delivery.conn, None
        if delivery.tx_open and conn is not None:
            delivery.tx_open = False
            await rollback_quietly(conn)
        return await self._hold.let_go_for_shutdown(self, delivery, conn)

    async def shutdown(self) -> tuple[int, int]:
        self.begin_shutdown()
        released = 0
        try:
            with cleanup_scope():
                for delivery in list(self.working - self.settling):
                    if await self.release_for_shutdown(delivery):
                        released += 1
        finally:
            # Whatever ended the subscription, no key stays registered after it: a new App in
            # this process must be able to take the key's rows again.
            for delivery in list(self.working):
                self.abandon(delivery)
            self.stop_serving()
        return released, self.closed

    async def keep(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    # -- claim ---------------------------------------------------------------------------

    async def claim(self, limit: int) -> Claimed:
        self.claiming += 1
        try:
            return await self._hold.claim(self, limit)
        finally:
            self.claiming -= 1

    def claim_values(self, limit: int) -> tuple[dict[str, object], datetime, int]:
        """The candidate select's values for a claim of ``limit`` rows, its "now", and how
        many rows it reads: claims of this subscription running side by side read the same
        first rows, so one candidate more for each of the others leaves this one something
        to lock."""
        ctx = self.ctx
        now = ctx.clock()
        wanted = limit + self.claiming - 1
        return {"group": ctx.group, "now": now, "limit": wanted}, now, wanted

    def take_ops(self, row_id: object, now: object) -> list[Op]:
        values = {"id": row_id, "group": self.ctx.group, "now": now}
        take = self.ctx.statements.take
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

    def taken(self, results: list[Result], row_id: object) -> Record | None:
        """The row a take read, or ``None`` when the row was no longer claimable."""
        if len(results) < len(self.ctx.statements.take):
            return None  # an UPDATE changed nothing, so the script stopped
        records = results[-1]
        if not isinstance(records, list) or not records:
            return None
        if len(records) != 1:
            msg = f"a take reads one row, found {len(records)} for id {row_id!r}"
            raise RuntimeError(msg)
        return records[0]

    async def begin_transaction(self, delivery: Delivery) -> None:
        """Transactional mode: the handler's transaction opens on the key's session."""
        if delivery.conn is None:
            delivery.conn = await self.ctx.pool.acquire("delivery transaction")
        await delivery.conn.begin(self.ctx.statements.begin.sql)
        delivery.tx_open = True

    async def open_transaction(self, delivery: Delivery) -> Connection:
        assert delivery.conn is not None and delivery.tx_open
        return delivery.conn

    # -- settle --------------------------------------------------------------------------

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """As the hold settles a batch: side by side on their sessions, or in one
        transaction (SQLite), or one by one."""
        return await self._hold.settle_batch(self, items)

    async def settle_batch_and_claim(
        self, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch's settlement and its worker's next claim, chained where the hold can
        (SQLite: one call on the worker thread); transactional mode settles alone."""
        if self.ctx.transactional:
            return await self.settle_batch(items), Chained()
        return await self._hold.settle_batch_and_claim(self, items, limit)

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery, let go of its key and claim the worker's next rows, in
        one round trip where the hold can; transactional mode, deliveries shutdown released
        and moves into another table settle alone."""
        statements = step_statements(self.ctx.statements, step)
        if self.ctx.transactional or delivery.released or len(statements) > 1:
            return await settle_alone(self.settle, delivery, step)
        return await self._hold.settle_and_claim(self, delivery, statements, step, limit)

    async def settle(self, delivery: Delivery, step: Step) -> None:
        if delivery.released:
            msg = (
                f"{self.ctx.spec.label}: shutdown released the key of row {delivery.id!r} and "
                f"its row is back in the queue; the settlement had no effect"
            )
            raise Closed(msg)
        self.settling.add(delivery)
        try:
            await self._run_step(delivery, step)
        finally:
            delivery.settled = True
            self.settling.discard(delivery)
            self.working.discard(delivery)
            await self.hand_back(delivery)

    async def _run_step(self, delivery: Delivery, step: Step) -> None:
        statements = step_statements(self.ctx.statements, step)
        values = {"id": delivery.id, "now": self.ctx.clock(), **step_values(step)}
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
                    f"{self.ctx.spec.label}: the handler's transaction of row {delivery.id!r} "
                    f"did not roll back (its connection is lost); the row returns to the queue"
                )
                raise SettlementError(msg)
        await self._hold.run_statements(self, delivery, statements, values)

    async def run_plain(
        self,
        conn: Connection | None,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None:
        """A settlement's statements on ``conn``, or on a connection of the pool's."""
        if not statements:
            return
        if conn is None:
            conn = await self.ctx.pool.acquire("settlement")
            try:
                await self._run(conn, statements, values, in_transaction=False)
            finally:
                await give_back(self.ctx.pool, conn)
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
        await conn.begin(self.ctx.statements.plain_begin.sql)
        try:
            for statement in statements:
                await conn.execute(statement.sql, statement.bind(values))
            await conn.commit()
        except BaseException:
            await rollback_quietly(conn)
            raise
