"""Letting go of a held connection, one verb each: ``give_back`` returns it to its pool,
``close`` closes it for good (gracefully, within the bound around it), ``abandon`` (the
pool's) drops it at once with no I/O wait; ``end_transaction`` rolls back, then gives back or
abandons; ``give_back_released`` first lets go of the session locks a transaction took (MySQL's
limit slots), abandoning the connection where that is not confirmed. Every holder lets go
through these."""

from __future__ import annotations

import logging

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Pool
from ..errors import ConnectionLost

__all__ = ["close", "end_transaction", "give_back", "give_back_released", "rollback_quietly"]

logger = logging.getLogger("trinbox.drivers")


async def give_back(pool: Pool, conn: Connection) -> None:
    """Return a connection to its pool; one that cannot be returned is closed. The pools
    shield and bound their own cleanup (a connection still inside a transaction is rolled
    back first), so a clean connection goes back without a cancel scope per call."""
    try:
        await pool.give_back(conn)
    except Exception:
        logger.warning("could not return a connection; closing it", exc_info=True)
        await close(pool, conn)


async def close(pool: Pool, conn: Connection) -> None:
    """Close a connection for good: gracefully within the bound of the runtime around it
    (trinbox._bounds), else at once."""
    with cleanup_scope() as scope:
        try:
            await pool.close(conn)
        except Exception:
            logger.warning("closing a connection failed", exc_info=True)
    if scope.cancelled_caught:
        pool.abandon(conn)


async def rollback_quietly(conn: Connection) -> bool:
    """Roll back, shielded within the bound around it; whether it was confirmed."""
    with cleanup_scope():
        try:
            await conn.rollback()
            return True
        except ConnectionLost:
            return False  # the driver ended the session: nothing is left to roll back
        except Exception:
            logger.warning("rollback failed", exc_info=True)
    return False


async def give_back_released(pool: Pool, conn: Connection, release: Statement | None) -> None:
    """Give back a connection whose transaction has ended, once ``release`` (``None``:
    nothing to let go) has let go of the session locks it took; one whose release is not
    confirmed in time is abandoned, so that the server ends its session and its locks."""
    if release is not None:
        released = False
        with cleanup_scope():
            try:
                await conn.fetch(release.sql)
                released = True
            except Exception:
                logger.warning("releasing session locks failed; closing", exc_info=True)
        if not released:
            pool.abandon(conn)
            return
    await give_back(pool, conn)


async def end_transaction(pool: Pool, conn: Connection, release: Statement | None = None) -> bool:
    """Roll back and return the connection (after ``release``, as ``give_back_released``);
    one whose rollback is not confirmed in time is abandoned, so the server ends its
    transaction. Whether the rollback was confirmed."""
    if await rollback_quietly(conn):
        await give_back_released(pool, conn, release)
        return True
    pool.abandon(conn)
    return False
