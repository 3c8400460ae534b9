"""The pause watcher: one task of ``App.serve`` per broker with a pause table
(``pauses=Pauses(..)``), whatever the number of its subscriptions. It reads every pause in
one statement each poll interval of the broker (at once when a NOTIFY says the table
changed) into the broker's pause board, whose gates the claim loops and the settlements
that would claim again read (``_broker/pausing.py``). No leader and no counter: the rows are
the pauses, so a pause covers every process and outlives them.

A failed read is logged and the pauses last read hold until the next one succeeds.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from .._broker.broker import SqlBroker
from .._dialects.pauses import PausePlan
from .._holders.connections import give_back
from ..errors import SchemaError, TrinboxError

__all__ = ["PauseWatcher"]

logger = logging.getLogger("trinbox.app")


class PauseWatcher:
    """The reader of one broker's pause table."""

    def __init__(self, broker: SqlBroker[Any], plan: PausePlan) -> None:
        self.broker = broker
        self.plan = plan
        self._scope = trio.CancelScope()
        assert broker.pauses is not None
        self.label = broker.pauses.label

    async def open(self) -> None:
        """Prepare the pause table's statements (a missing table stops the startup, naming
        the fix) and read the pauses, before any subscription claims."""
        pool = self.broker.pool
        conn = await pool.acquire("pauses startup")
        try:
            for statement in self.plan.checked:
                try:
                    await conn.prepare(statement.sql)
                except TrinboxError as exc:
                    msg = (
                        f"{self.broker.url_label}: a broker keeps its paused queues in its "
                        f"pause table, found {statement.event} failing on {self.label}: {exc}; "
                        f"create it with broker.create_tables(pauses) in an on_startup hook, "
                        f"or from trinbox schema MODULE:PAUSES in your migrations"
                    )
                    raise SchemaError(msg, table=self.label, statement=statement.sql) from exc
        finally:
            await give_back(pool, conn)
        await self.read()

    async def read(self) -> None:
        """One read of every pause into the board."""
        board = self.broker.pause_board
        writes = board.writes
        pool = self.broker.pool
        conn = await pool.acquire("read pauses")
        try:
            rows = await conn.fetch(self.plan.read.sql)
        finally:
            await give_back(pool, conn)
        board.read(((str(row[0]), str(row[1])) for row in rows), writes=writes)

    def stop(self) -> None:
        self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the pauses each poll interval, or at once when poked, until ``stop``."""
        board = self.broker.pause_board
        poll = self.broker.poll_interval.total_seconds()
        with self._scope:
            task_status.started()
            while True:
                with trio.move_on_after(poll):
                    await board.wait_poked()
                try:
                    await self.read()
                except Exception:  # the database away, or a driver's untranslated error
                    board.read_failures += 1
                    logger.warning(
                        "%s: reading the pauses in %s failed; the pauses read last hold, "
                        "again in %s s",
                        self.broker.url_label,
                        self.label,
                        poll,
                        exc_info=True,
                    )
