"""The handlers running in this process, by row: what ``broker.cancel(Row, id)`` cancels
when the row it finds in work is held here.

Each delivery runner enters its unit of work (the rows it hands one handler call, with the
cancel scope around that call) for the length of the call, and leaves it when the call ends,
however it ends. A cancel of one of its rows cancels the scope: the handler sees
``trio.Cancelled``, and the runner settles the unit as cancelled. A unit of several rows (a
batch) is refused: its one handler call holds them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import trio

__all__ = ["Running", "RunningCall"]


@dataclass(eq=False)
class RunningCall:
    """One handler call: its scope, its rows, and whether a cancel reached it."""

    scope: trio.CancelScope
    table: str
    ids: tuple[str, ...]
    batch: bool
    requested: bool = field(default=False)


class Running:
    """The handler calls in work in this process, by (qualified table, row id as text)."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], RunningCall] = {}

    def enter(
        self, table: str, ids: Sequence[object], scope: trio.CancelScope, *, batch: bool
    ) -> RunningCall:
        call = RunningCall(scope, table, tuple(str(i) for i in ids), batch)
        for ident in call.ids:
            self._calls[(table, ident)] = call
        return call

    def leave(self, call: RunningCall) -> None:
        for ident in call.ids:
            if self._calls.get((call.table, ident)) is call:
                del self._calls[(call.table, ident)]

    def held(self, table: str) -> set[str]:
        """The ids (as text) of ``table``'s rows in work here, outside batches."""
        return {i for (t, i), call in self._calls.items() if t == table and not call.batch}

    def cancel(self, table: str, ident: object) -> Literal["cancelled", "batch"] | None:
        """Cancel the call that holds the row (``"cancelled"``), refuse a row of a batch
        (``"batch"``), or ``None`` when no call of this process holds it."""
        call = self._calls.get((table, str(ident)))
        if call is None:
            return None
        if call.batch:
            return "batch"
        call.requested = True
        call.scope.cancel()
        return "cancelled"
