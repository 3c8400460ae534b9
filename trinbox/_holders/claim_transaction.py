"""The claim's transaction: what holds a row lock row, the open transaction on a pooled
connection in which the claim's ``FOR UPDATE SKIP LOCKED`` locked it.

The rows of one claim (a batch) share it. Its deliveries settle in it one at a time (its
``lock``); the last to leave ends it: it commits what was written, unless a settlement failed
(then everything rolls back and every row returns), and the connection goes back to the pool;
one whose rollback is not confirmed is abandoned, so that the server ends the transaction.
Locks of the session the claim took beside its rows (MySQL's limit slots) are let go after the
transaction ends (``release``), before the connection goes back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Pool
from ..errors import DatabaseError
from .connections import end_transaction, give_back_released

__all__ = ["SAVEPOINT", "ClaimTransaction"]

logger = logging.getLogger("trinbox.settle")

SAVEPOINT = "trinbox_claim"
"""The handler's savepoint in transactional mode: every outcome but ack rolls back to it."""


@dataclass(eq=False)
class ClaimTransaction:
    """The transaction one claim opened on ``conn``, shared by its ``remaining`` deliveries;
    the only owner of the connection until it ends."""

    pool: Pool
    conn: Connection
    label: str  # the table, for the log
    remaining: int
    written: int = 0
    failed: bool = False
    committed: bool = False  # the last settlement committed with its statement
    ended: bool = False  # the connection went back to the pool, or was abandoned
    lock: trio.Lock = field(default_factory=trio.Lock)
    # Run once the transaction has ended: the session locks the claim took (limit slots).
    release: Statement | None = None

    async def leave(self) -> None:
        """One delivery is done with the transaction; the last one ends it, within the bound
        of the settlement or the drop around it (trinbox._bounds)."""
        self.remaining -= 1
        if self.remaining > 0 or self.ended:
            return
        committed = self.committed
        with cleanup_scope():
            if self.written and not self.failed and not committed:
                try:
                    await self.conn.commit()
                    committed = True
                except DatabaseError:
                    logger.warning("%s: commit failed", self.label, exc_info=True)
            if self.failed and self.written and not committed:
                logger.warning(
                    "%s: a settlement of the batch failed; rolled back %d settlements",
                    self.label,
                    self.written,
                )
        self.ended = True
        if committed:
            await give_back_released(self.pool, self.conn, self.release)
        else:
            await end_transaction(self.pool, self.conn, self.release)

    def abandon(self) -> None:
        """Close the connection at once (no I/O wait): the server rolls the transaction back,
        and every row of the claim returns."""
        if not self.ended:
            self.ended = True
            self.pool.abandon(self.conn)
