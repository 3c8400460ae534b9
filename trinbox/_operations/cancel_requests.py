"""Lapsed cancel requests deleted (or counted) now, for ``trinbox prune``: the requests of a
broker's ``CancelRequests`` table past their ``expire_after``, which a new request deletes
too. One statement: the table only ever holds requests of rows that were in work when a
cancel found them."""

from __future__ import annotations

from typing import Any

from .._broker.broker import SqlBroker
from .._holders.connections import give_back

__all__ = ["prune_lapsed"]


async def prune_lapsed(broker: SqlBroker[Any], *, dry_run: bool) -> int:
    """Delete the lapsed requests of ``broker``'s cancel request table (``dry_run``: count
    them only), on the broker's clock, and say how many."""
    plan = broker.cancel_requests
    assert plan is not None, "a broker that uses cancel requests"
    values = {"now": broker.clock()}
    conn = await broker.pool.acquire("cancel requests prune")
    try:
        if dry_run:
            st = plan.lapsed_count
            rows = await conn.fetch(st.sql, st.bind(values))
            return int(str(rows[0][0]))  # an int, or MySQL's Decimal
        st = plan.lapsed
        return await conn.execute(st.sql, st.bind(values))
    finally:
        await give_back(broker.pool, conn)
