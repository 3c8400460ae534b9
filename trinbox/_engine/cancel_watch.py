"""A subscription's watch of cancel requests (``broker.use_cancel_requests``): how a
``broker.cancel(Row, id)`` of another process reaches a handler of this one.

Once a poll interval (Trio's clock, the broker's in tests), or at once when PostgreSQL
announces a request for the table (``listen_notify``) or its listening connection comes back,
and only while this process has rows of the subscription's table in work (outside batches),
one statement reads the table's requests that have not lapsed; each row held here has its
handler cancelled (trinbox._broker.running) and its request deleted. Requests for rows this
process does not hold are left to the process that does. The poll needs no LISTEN: it works
behind PgBouncer in transaction mode. A failed read is logged and tried again at the next
interval; nothing it does stops the app.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from .._broker.broker import SqlBroker
from .._holders.connections import give_back
from ..errors import TrinboxError

__all__ = ["WatchCounts", "watch_cancels"]

logger = logging.getLogger("trinbox.cancel")


@dataclass
class WatchCounts:
    """What a subscription's watch did (``SubscriptionStatistics``): reads of the request
    table, the reads that failed, and the requests it served (handlers cancelled)."""

    polls: int = 0
    failed: int = 0
    served: int = 0


async def watch_cancels(
    broker: SqlBroker[Any], table: str, where: str, counts: WatchCounts
) -> None:
    """Serve the cancel requests of ``table``'s rows in work here, until cancelled."""
    if broker.cancel_requests is None:
        return  # the broker writes and reads no cancel requests (use_cancel_requests)
    interval = broker.poll_interval.total_seconds()
    while True:
        # A NOTIFY of a request for the table (listen_notify) ends the wait early.
        with trio.move_on_after(interval):
            await broker.cancel_wakes.event(table).wait()
        plan = broker.cancel_requests  # set before serve: checked above
        if not broker.running.held(table):
            continue
        try:
            pool = broker.pool
            conn = await pool.acquire("cancel requests")
            try:
                values: dict[str, object] = {"table": table, "now": broker.clock()}
                counts.polls += 1
                rows = await conn.fetch(plan.pending.sql, plan.pending.bind(values))
                for (row_id,) in rows:
                    ident = str(row_id)
                    if ident not in broker.running.held(table):
                        continue
                    if broker.running.cancel(table, ident) == "cancelled":
                        # Counted at the cancel: a shutdown may cancel the delete after it
                        # (the request then lapses).
                        counts.served += 1
                        logger.info("%s: row %s cancelled by a request", where, ident)
                        served = {"table": table, "row_id": ident}
                        await conn.execute(plan.served.sql, plan.served.bind(served))
            finally:
                await give_back(pool, conn)
        except TrinboxError:
            counts.failed += 1
            logger.warning("%s: reading the cancel requests failed", where, exc_info=True)
