"""A subscription over every group of a FIFO table (``InboxQueue(..).every_group()``): the
groups whose head is due, read before the claim of each one's head.

The read locks nothing and only orders the work: the claim of each head, as a subscription to
that group claims it (its guard, then the head), decides. So the read may name a group that
another claimer takes meanwhile; such a group takes nothing, and the claim goes on to the next
group named. The read names more groups than the claim may take for that reason.
"""

from __future__ import annotations

from collections.abc import Collection

from .._drivers._base import Connection
from .._holders._base import FormContext

__all__ = ["PASSED_OVER", "due_groups"]

# Groups read beyond the rows the claim may take: those another claimer holds are passed over.
PASSED_OVER = 16


async def due_groups(
    ctx: FormContext, conn: Connection, now: object, wanted: int, busy: Collection[object] = ()
) -> list[object]:
    """The groups whose head is due, in the order of their heads: enough for ``wanted``
    claims, past ``busy`` (groups this subscription has in work, left out of the list)."""
    heads = ctx.statements.heads
    assert heads is not None
    values = {"now": now, "limit": wanted + len(busy) + PASSED_OVER}
    found = await conn.fetch(heads.sql, heads.bind(values))
    return [record[0] for record in found if record[0] not in busy]
