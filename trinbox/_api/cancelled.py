"""What ``broker.cancel(Row, id)`` found and did."""

from __future__ import annotations

from enum import Enum
from typing import final

__all__ = ["CancelResult"]


@final
class CancelResult(Enum):
    """What a cancel of one row did:

    - ``QUEUED``: the row was queued (unfinished, not in work) and is settled as cancelled
      at once, as a drop settles it (deleted, or ProcessedAt stamped with a NULL Result): it
      is never claimed again;
    - ``RUNNING``: the row is in work (a handler holds it; in the advisory form, a handler
      holds its key), so nothing changed;
    - ``FINISHED``: the row had finished already (acked, dropped, or in its dead letter
      group): it stays as it settled;
    - ``NOT_FOUND``: no row has that id (on a table whose settlement deletes, a finished row
      too, and one moved into a dead letter table).
    """

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    NOT_FOUND = "not_found"

    @property
    def cancelled(self) -> bool:
        """The row was cancelled by this call."""
        return self is CancelResult.QUEUED
