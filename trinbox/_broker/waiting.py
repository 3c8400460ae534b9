"""``broker.wait(Row, id)``: how a row settled, read from the row itself.

Nothing but the row says it, so nothing else can disagree: its ProcessedAt field is set by the
ack and the drop, its Result field by the ack alone (the handler's result as JSON, ``null``
when it left none; a drop writes NULL), and a row moved to its dead letter is gone from the
table (a dead letter table) or unfinished with its OriginGroup set (a dead letter group). The
wait reads the row once a poll interval, on the broker's clock (Trio's, so that a test under
``VirtualClock`` waits no real time), until it is settled, and at once when a settlement in
this process or a notification from another says a row of its table settled.

A handler that waits for a row of its own queue could wait for ever: every worker of a
saturated queue waiting on a row that only a free worker would handle. ``HANDLING`` holds the
(table, group) of the subscription whose handler runs in the current task, set by the
delivery runner; a wait on a row of that queue is refused.
"""

from __future__ import annotations

import json
import types
import typing
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

import trio

from .._api.handler import decode_row
from .._declare._inbox import spec_of
from .._declare._spec import ColumnSpec, TableSpec
from .._dialects._statement import P
from .._holders._base import values_of
from .._holders.connections import give_back
from ..errors import DeclarationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._api.codecs import Codec
    from .._dialects._base import Dialect
    from .._drivers._base import Pool

__all__ = ["HANDLING", "SETTLED_CHANNEL", "Settled", "SettledRows", "wait_settled"]

R = TypeVar("R")

HANDLING: ContextVar[tuple[str, str | None] | None] = ContextVar("trinbox_handling", default=None)
"""The (qualified table, group) of the subscription whose handler runs in this task (group
``None``: every group of the table)."""

SETTLED_CHANNEL = "trinbox_settled"
"""The NOTIFY channel that tells other processes a table's rows settled (payload: the table's
qualified name): one fixed channel, so a process listens on it without knowing beforehand
which tables it will wait on."""

Outcome = Literal["ack", "drop", "dead_letter"]


class SettledRows:
    """What wakes a wait before its poll interval. Settled here: the broker's deliveries that
    settled a row of a table (the delivery runner says so). Settled elsewhere: a notification
    on ``SETTLED_CHANNEL`` naming the table, where the broker listens. A woken wait reads its
    row again at once; a row settled by a process that announces nothing is seen at the next
    poll.

    The tables settled here are also kept for the broker's announcer (started where
    notifications exist), which tells other processes once per table while its NOTIFY is in
    flight, never in a settlement's own round trip."""

    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}
        self._unannounced: set[str] | None = None  # None: nobody announces
        self._marked = trio.Event()

    def settled(self, table: str) -> None:
        """A row of ``table`` settled: every wait on it reads its row again."""
        event = self._events.pop(table, None)
        if event is not None:
            event.set()

    def settled_here(self, table: str) -> None:
        """A delivery of this process settled a row of ``table``."""
        self.settled(table)
        if self._unannounced is not None:
            self._unannounced.add(table)
            self._marked.set()

    def all_settled(self) -> None:
        """Every wait reads its row again (notifications may have been missed)."""
        events, self._events = self._events, {}
        for event in events.values():
            event.set()

    def event(self, table: str) -> trio.Event:
        """Set at the next settlement of a row of ``table`` that this process hears of."""
        found = self._events.get(table)
        if found is None:
            found = self._events[table] = trio.Event()
        return found

    def announcing(self, on: bool) -> None:
        """Keep the tables settled here for an announcer (from now on), or stop keeping them."""
        self._unannounced = set() if on else None

    async def unannounced(self) -> list[str]:
        """The tables settled here since the last take, once there is one."""
        assert self._unannounced is not None, "announcing(True) first"
        while not self._unannounced:
            self._marked = trio.Event()
            await self._marked.wait()
        return self.take_unannounced()

    def take_unannounced(self) -> list[str]:
        """The tables settled here since the last take, maybe none."""
        tables = sorted(self._unannounced or ())
        if self._unannounced:
            self._unannounced = set()
        return tables


@dataclass(frozen=True, slots=True)
class Settled(Generic[R]):
    """How a row settled (``broker.wait``): ``outcome`` is ``"ack"``, ``"drop"`` or
    ``"dead_letter"``; ``row`` is the row as it settled, an instance of its row class (its
    Result field decoded into the field's type, so ``settled.row.<field>`` is typed as the
    class declares it), ``None`` when a move into a dead letter table took it out of the
    table; ``result`` is the Result field's value (``None`` unless acked with one)."""

    outcome: Outcome
    row: R | None
    result: object = None


async def wait_settled(
    dialect: Dialect,
    pool: Callable[[], Pool],
    codec: Codec,
    interval: float,
    row_type: type[R],
    ident: object,
    woken: SettledRows | None = None,
) -> Settled[R]:
    """How the row ``ident`` of ``row_type`` settled, read on a connection of ``pool()``
    every ``interval`` seconds until it has (``SqlBroker.wait``), and at once when ``woken``
    says a row of its table settled in this process."""
    spec = spec_of(row_type)
    result = spec.result
    if result is None:
        msg = (
            f"broker.wait reads how a row settled from its ProcessedAt and Result fields, "
            f"found {spec.label} without a Result field; add one, like result: "
            f"Annotated[Receipt | None, Result()] = None, beside a ProcessedAt field"
        )
        raise DeclarationError(msg)
    d = dialect
    statement = d.render(
        "wait",
        f"SELECT {d.select_list(spec)} FROM {d.table(spec)} WHERE {d.column(spec.id)} = " + P("id"),
    )
    params = statement.bind({"id": d.driver_value(ident)})  # bound as the publish binds it
    first = True
    while True:
        # Taken before the read: a settlement during the read wakes the next wait.
        settled = woken.event(spec.qualified_name) if woken is not None else None
        found_pool = pool()
        conn = await found_pool.acquire("wait")
        try:
            records = await conn.fetch(statement.sql, params)
        finally:
            await give_back(found_pool, conn)
        values = values_of(records[0], spec) if records else None
        if first:
            _refuse_own_queue(spec, values, ident)
            first = False
        found = _settled(spec, result, values, codec)
        if found is not None:
            return typing.cast("Settled[R]", found)
        if settled is None:
            await trio.sleep(interval)
        else:
            with trio.move_on_after(interval):
                await settled.wait()


def _refuse_own_queue(spec: TableSpec, values: dict[str, object] | None, ident: object) -> None:
    handling = HANDLING.get()
    if handling is None or handling[0] != spec.qualified_name:
        return
    table, group = handling
    row_group = None if values is None or spec.group is None else values[spec.group.column]
    if group is not None and row_group is not None and row_group != group:
        return
    queue = table if group is None else f"{table} (group {group!r})"
    msg = (
        f"a handler waits for rows of other queues only (every worker of a saturated queue "
        f"waiting on a row only a free worker would handle waits for ever), found "
        f"broker.wait({spec.row_type.__qualname__ if spec.row_type else spec.table}, "
        f"{ident!r}) in a handler of {queue}; publish the row and return, and take its result "
        f"in a handler of a queue of its own (a reply), or wait outside the handler"
    )
    raise DeclarationError(msg)


def _settled(
    spec: TableSpec, result: ColumnSpec, values: dict[str, object] | None, codec: Codec
) -> Settled[object] | None:
    """How the row read settled, or ``None`` while it is unfinished."""
    if values is None:
        return Settled("dead_letter", None)  # moved into its dead letter table
    assert spec.processed_at is not None  # a Result field needs one (the class statement)
    origin = spec.origin_group
    if values[spec.processed_at.column] is None:
        if origin is not None and values[origin.column] is not None:
            return Settled("dead_letter", _row(spec, values, result, None))
        return None
    raw = values[result.column]
    if raw is None:
        return Settled("drop", _row(spec, values, result, None))
    decoded = _decoded(raw, result.python_type, codec)
    return Settled("ack", _row(spec, values, result, decoded), decoded)


def _row(spec: TableSpec, values: dict[str, object], result: ColumnSpec, decoded: object) -> object:
    """The row class built from the row read, its Result field ``decoded``."""
    row = decode_row(spec, {**values, result.column: None})
    setattr(row, result.field, decoded)
    return row


def _decoded(raw: object, hint: object, codec: Codec) -> object:
    """The Result field's JSON (text from every driver) in the field's type: JSON ``null`` is
    ``None``, anything else is decoded by the codec into the type without its ``None``."""
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    if json.loads(text) is None:
        return None
    into = hint
    if typing.get_origin(into) is typing.Annotated:
        into = typing.get_args(into)[0]
    if isinstance(into, types.UnionType) or typing.get_origin(into) is typing.Union:
        members = [m for m in typing.get_args(into) if m is not type(None)]
        if len(members) == 1:
            into = members[0]
    return codec.decode(text.encode(), into)  # type: ignore[arg-type]  # a type form
