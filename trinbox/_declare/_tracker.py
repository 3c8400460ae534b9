"""``Tracker``: the table where a consumer keeps the ids of the outbox records it has handled.

    seen = Tracker("billing_seen")
    app.include(broker, handle_order)   # with InboxQueue(Orders, "orders").tracked(seen)

A delivery whose headers carry an outbox record's id (``trinbox.outbox.ID_HEADER``: a relay
into this broker writes it) runs its handler once per (consumer, record id): a record the relay
sent again (a relay that died after its send, before its mark) is acked without the handler.
Pure declaration: the statements are the dialect's (``_dialects/seen.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["Tracker"]


@final
@dataclass(frozen=True, slots=True)
class Tracker:
    """The seen-records table ``[schema.]table`` of a tracked subscription
    (``InboxQueue(...).tracked(tracker)``), which ``broker.create_tables(tracker)`` and
    ``trinbox schema`` create: one row per (consumer, record id) handled. ``consumer`` names
    the subscription in it (default: the queue's table and name, so two subscriptions of one
    record each run their handler, and one table serves many); one name, one handling."""

    table: str
    schema: str | None = None
    consumer: str | None = None

    def __post_init__(self) -> None:
        where = f"Tracker({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a seen-records {what} is named by a non-empty str, found "
                    f"{name!r}; name it, like Tracker('billing_seen')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)
        consumer: object = self.consumer  # untyped callers pass anything
        if consumer is not None and (not isinstance(consumer, str) or not consumer):
            msg = (
                f"{where}: a consumer is named by a non-empty str, found {self.consumer!r}; "
                f"name it, or leave consumer= out for the queue's own name"
            )
            raise DeclarationError(msg)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
