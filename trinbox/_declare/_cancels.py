"""``CancelRequests``: the table where ``broker.cancel(Row, id)`` asks the process that holds
a row in work to cancel its handler.

    CANCELS = CancelRequests("trinbox_cancels")
    broker.use_cancel_requests(CANCELS)         # in every process, the cancelling one too

One row per (table, row id), written by a cancel that finds the row in work and no handler of
its own process holding it; each subscription with deliveries in work reads its table's
requests once a poll interval, cancels the handler of each row it holds, and deletes the
request. A request lapses ``expire_after`` after it was written (a minute unless given): one
whose row finished, or was given back, before a holder read it never cancels a later delivery
of the row past that, and the next request written deletes it. Pure declaration: the
statements are the dialect's (``_dialects/cancels.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["CancelRequests"]


@final
@dataclass(frozen=True, slots=True)
class CancelRequests:
    """The cancel request table ``[schema.]table``, which ``broker.create_tables(requests)``
    and ``trinbox schema`` create."""

    table: str = "trinbox_cancels"
    schema: str | None = None
    expire_after: timedelta = timedelta(minutes=1)

    def __post_init__(self) -> None:
        where = f"CancelRequests({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a cancel request {what} is named by a non-empty str, found "
                    f"{name!r}; name it, like CancelRequests('app_cancels')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)
        lapse: object = self.expire_after  # whatever a caller passed
        if not isinstance(lapse, timedelta) or lapse <= timedelta(0):
            msg = (
                f"{where}: a cancel request lapses after a positive timedelta, found "
                f"expire_after={lapse!r}; pass one longer than the poll interval of every "
                f"process that serves the queue, like expire_after=timedelta(minutes=1)"
            )
            raise DeclarationError(msg)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
