"""Context keys a handler takes after its message, by annotation.

async def handle(
    job: Job, attempt: keys.Attempt, row_id: keys.RowId, tx: keys.Tx
) -> HandlerOutcome: ...
"""

from __future__ import annotations

from ._runtime.handles import AnyTx as Tx
from ._runtime.handles import Attempt as Attempt
from ._runtime.handles import Pool as Pool
from ._runtime.handles import RowId as RowId

__all__ = ["Attempt", "Pool", "RowId", "Tx"]
