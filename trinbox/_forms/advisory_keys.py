"""The advisory form's hold on keys: what a delivery in work holds (a session lock on PostgreSQL
and MySQL, an entry of this process's key registry on SQLite), and letting go of it: after a
settlement, on a drop, at shutdown.
"""

from __future__ import annotations

import logging

import trio

from .._bounds import cleanup_scope
from .._drivers._base import Connection, Record
from .._holders._base import Delivery, FormContext, FormTraits, attempt_of, values_of
from .._holders.connections import close, give_back, rollback_quietly
from .._holders.sqlite_key import ProcessKeys

__all__ = ["AdvisoryKeys"]

logger = logging.getLogger("trinbox.settle")


class AdvisoryKeys:
    """The keys one advisory subscription holds, and letting go of them."""

    def __init__(self, ctx: FormContext, process_keys: ProcessKeys | None) -> None:
        """``process_keys``: SQLite's, where no session holds a lock (the holder table chose)."""
        self._ctx = ctx
        self._process_keys = process_keys
        self._sessions = process_keys is None
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
        self._registry = None if process_keys is None else process_keys.keys
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
