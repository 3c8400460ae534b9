"""Context keys a handler takes after its message, by annotation.

async def handle(
    job: Job, attempt: keys.Attempt, row_id: keys.RowId, tx: keys.Tx, headers: keys.Headers,
    out: keys.Out
) -> HandlerOutcome: ...

``keys.Out``, the handler's follow-up messages by name, comes last.
"""

from __future__ import annotations

from ._api.handles import AnyTx as Tx
from ._api.handles import Attempt as Attempt
from ._api.handles import CancelRequested as CancelRequested
from ._api.handles import Out as Out
from ._api.handles import Pool as Pool
from ._api.handles import Progress as Progress
from ._api.handles import RowId as RowId
from ._api.headers import Headers as Headers

__all__ = ["Attempt", "CancelRequested", "Headers", "Out", "Pool", "Progress", "RowId", "Tx"]
