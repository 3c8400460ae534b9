"""Context keys a handler takes after its message, by annotation.

async def handle(
    job: Job, attempt: keys.Attempt, row_id: keys.RowId, tx: keys.Tx, out: keys.Out
) -> HandlerOutcome: ...

``keys.Out``, the handler's follow-up messages by name, comes last.
"""

from __future__ import annotations

from ._api.handles import AnyTx as Tx
from ._api.handles import Attempt as Attempt
from ._api.handles import Out as Out
from ._api.handles import Pool as Pool
from ._api.handles import RowId as RowId

__all__ = ["Attempt", "Out", "Pool", "RowId", "Tx"]
