"""What a handler may take besides its message: ``keys.Attempt``, ``keys.RowId``, ``keys.Tx``,
``keys.Pool``, ``keys.Out``, ``keys.CancelRequested``, ``keys.Progress``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, Generic, NewType, TypeAlias, cast, final, overload

from typing_extensions import TypeVar

from .._declare._capabilities import RowOf, Serves
from .._declare._inbox import Inbox, row_fields, row_headers, row_unique
from .._declare._markers import Form
from .._dialects._portable import bind_portable
from .._dialects._statement import ParamStyle
from .._drivers._base import Connection, Record
from .._drivers._base import Pool as DriverPool
from .._holders._base import Delivery
from .._holders.connections import give_back, rollback_quietly
from ..errors import TransactionHeld
from .published import OnDuplicate, Published
from .routes import Reply, Route, Routes

__all__ = ["Attempt", "CancelRequested", "Held", "Out", "Pool", "Progress", "RowId", "Tx"]


class CancelRequested:
    """Whether ``broker.cancel`` asked for this delivery's handler to stop: ``bool(requested)``
    reads it at any time, in a shielded block too (``trio.CancelScope(shield=True)``), where
    the cancel that comes with it waits for the block's end. Cooperative code checks it
    between steps, finishes or rolls back what it has half done, and leaves the block; the
    next checkpoint outside raises ``trio.Cancelled``."""

    __slots__ = ("_read",)

    def __init__(self) -> None:
        self._read: Callable[[], bool] = lambda: False

    def watch(self, read: Callable[[], bool]) -> None:
        """Read the request from ``read`` (the delivery runner's, once the call is in work)."""
        self._read = read

    def __bool__(self) -> bool:
        return self._read()

    def __repr__(self) -> str:
        return f"CancelRequested({self._read()})"


@final
class Progress:
    """How far the delivery's handler has got: ``progress.set(0.4)`` records the fraction of
    the work done, from 0 to 1 (no I/O; it returns at once). The latest value is what counts:
    in the lease form the lease keeper writes it to the row's ``Progress`` column with its next
    extension (the same statement, no round trip of its own), where ``trinbox inspect`` reads
    it; ``app.statistics()`` shows it in every form, for the deliveries in work."""

    __slots__ = ("_delivery", "_value")

    def __init__(self) -> None:
        self._delivery: Delivery | None = None
        self._value: float | None = None

    def watch(self, delivery: Delivery) -> None:
        """Record the values on ``delivery`` (the delivery runner's, once the call is in
        work)."""
        self._delivery = delivery
        delivery.progress = self._value

    def set(self, fraction: float) -> None:
        """Record ``fraction`` (0 to 1) as the work done so far."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            msg = (
                f"keys.Progress.set takes the fraction of the work done, a number from 0 to 1, "
                f"found {fraction!r} of type {type(fraction).__name__}; pass done / total, "
                f"like progress.set(3 / 10)"
            )
            raise TypeError(msg)
        value = float(fraction)
        if not 0.0 <= value <= 1.0:  # NaN compares False: refused too
            msg = (
                f"keys.Progress.set takes the fraction of the work done, a number from 0 to 1, "
                f"found {fraction!r}; pass done / total, like progress.set(3 / 10) (not a "
                f"percentage: 40 % is 0.4)"
            )
            raise ValueError(msg)
        self._value = value
        if self._delivery is not None:
            self._delivery.progress = value

    @property
    def value(self) -> float | None:
        """The latest fraction set, ``None`` before the first."""
        return self._value

    def __repr__(self) -> str:
        return f"Progress({self._value})"


Attempt = NewType("Attempt", int)
"""The delivery's attempt as the claim found it: 1 on the first delivery."""

RowId = NewType("RowId", object)
"""The delivery's row id, the value of the row's ``Id`` field as the row class types it (an
``int`` for a generated id): an ``object`` to mypy, since each table has its own id type."""

WriteRow = Callable[..., Awaitable[tuple[str, str | None, Published]]]
"""How a ``Tx`` publishes: its broker writes the row on the given connection, and says where
it went (the table and group to wake once the transaction commits) and what the publish
returns (the row holding its dedup key). The same for a publish by name, where the broker's
routes lead it."""

WriteMany = Callable[..., Awaitable[tuple[list[tuple[str, str | None]], list[Published]]]]
"""How a ``Tx`` publishes a batch: its broker writes the rows on the given connection, and
says where they went (each table and group once) and what each item's publish returns."""

D = TypeVar("D", bound=Serves[Any], covariant=True, default=Any)
F = TypeVar("F", bound=Form)
T = TypeVar("T")

# What a kept Tx raises, by where its transaction came from.
DELIVERY = (
    "a delivery's transaction ends with its delivery, found keys.Tx used after the delivery "
    "settled; do the work inside the handler, or use keys.Pool or broker.transaction() for "
    "work that outlives it"
)
BLOCK = (
    "a transaction from broker.transaction() ends with its async with block, found its Tx "
    "used after the block; do the work inside the block, or open another transaction with "
    "async with broker.transaction() as tx"
)
OUT_SETTLED = (
    "a delivery's follow-ups are written when it settles, found keys.Out's reply(..) after "
    "the delivery settled; reply inside the handler, or publish with broker.publish_named"
)
HELD = (
    "a connection from keys.Pool.connection() goes back to the pool with its async with "
    "block, found it used after the block; do the work inside the block, or take another "
    "with async with pool.connection() as conn"
)


class _Runs:
    """Statements on one connection. Parameters given one by one take the database driver's
    own placeholders (``$1`` PostgreSQL, ``%s`` MySQL, ``?`` SQLite; on MySQL a literal ``%``
    is then written ``%%``, also in a statement without parameters); one mapping takes the
    portable ``:name`` placeholders, the same text on every database (``_portable.py``)."""

    _conn: Connection
    _style: ParamStyle

    def _bound(self, sql: str, params: tuple[object, ...]) -> tuple[str, Sequence[object]]:
        if len(params) == 1 and isinstance(params[0], Mapping):
            values = cast("Mapping[str, object]", params[0])
            return bind_portable(sql, values, self._style)
        return sql, params

    async def execute(self, sql: str, *params: object) -> int:
        """Run a statement; the number of rows an INSERT, UPDATE or DELETE changed (rows
        matched, on MySQL too). Other statements return the driver's own count (DDL: 0 on
        PostgreSQL and MySQL, -1 on SQLite); read rows with :meth:`fetch`."""
        return await self._conn.execute(*self._bound(sql, params))

    async def fetch(self, sql: str, *params: object) -> list[Record]:
        """Run a query; its rows as tuples."""
        return await self._conn.fetch(*self._bound(sql, params))

    async def fetchval(self, sql: str, *params: object) -> object:
        """The first column of the first row, or ``None``."""
        rows = await self._conn.fetch(*self._bound(sql, params))
        return rows[0][0] if rows else None


@final
class Tx(_Runs, Generic[D]):
    """A transaction: the delivery's in transactional mode (ack commits what was written
    through it, every other outcome discards it), or one from ``broker.transaction()``.

    The type argument is the broker's dialect where it is known (``broker.transaction()`` on
    a ``SqlBroker[Sqlite]`` yields a ``Tx[Sqlite]``, whose ``publish`` refuses a row lock row
    as the broker's does); a handler's ``keys.Tx`` is ``Tx[Any]``."""

    def __init__(
        self,
        conn: Connection,
        write: WriteRow,
        style: ParamStyle,
        *,
        ended: str = DELIVERY,
        write_named: WriteRow | None = None,
        write_many: WriteMany | None = None,
    ) -> None:
        self._tx_conn: Connection | None = conn
        self._style = style
        self._write = write
        self._write_named = write_named
        self._write_many = write_many
        self._ended = ended
        self.published: list[tuple[str, str | None]] = []

    @property
    def _conn(self) -> Connection:  # type: ignore[override]
        if self._tx_conn is None:
            raise TransactionHeld(self._ended)
        return self._tx_conn

    def end(self) -> None:
        """The transaction is over (its delivery settled, its block ended), and so is this
        handle: what a holder of it runs raises ``TransactionHeld``, never a statement on a
        connection the pool has lent to another task."""
        self._tx_conn = None

    def _written(self, written: tuple[str, str | None, Published]) -> Published:
        """What a publish returns; where it went, to wake once the transaction commits (a
        duplicate wrote nothing, and wakes nothing)."""
        table, group, found = written
        if not found.duplicate:
            self.published.append((table, group))
        return found

    @overload
    async def publish(
        self: AnyTx,
        row_type: type[Inbox[Any, Any]],
        message: object = ...,
        *,
        headers: Mapping[str, str] | None = ...,
        unique: str | None = ...,
        on_duplicate: OnDuplicate = ...,
        **columns: object,
    ) -> Published: ...
    @overload
    async def publish(
        self: Tx[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        message: object = ...,
        *,
        headers: Mapping[str, str] | None = ...,
        unique: str | None = ...,
        on_duplicate: OnDuplicate = ...,
        **columns: object,
    ) -> Published: ...
    async def publish(
        self,
        row_type: Any,
        message: object = None,
        *,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Published:
        """Write a row into a queue table inside this transaction; it commits with it
        (``headers``, ``unique`` and the rest as ``broker.publish`` takes them). A duplicate
        of a dedup key held by a row of another transaction not committed yet waits for it
        to commit or roll back."""
        written = await self._write(
            self._conn,
            row_type,
            message,
            headers=headers,
            unique=unique,
            on_duplicate=on_duplicate,
            **columns,
        )
        return self._written(written)

    @overload
    async def publish_many(
        self: AnyTx,
        row_type: type[Inbox[Any, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = ...,
        headers: Mapping[str, str] | None = ...,
        on_duplicate: OnDuplicate = ...,
        chunk: int = ...,
        **columns: object,
    ) -> list[Published]: ...
    @overload
    async def publish_many(
        self: Tx[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = ...,
        headers: Mapping[str, str] | None = ...,
        on_duplicate: OnDuplicate = ...,
        chunk: int = ...,
        **columns: object,
    ) -> list[Published]: ...
    async def publish_many(
        self,
        row_type: Any,
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        on_duplicate: OnDuplicate = "return",
        chunk: int = 1000,
        **columns: object,
    ) -> list[Published]:
        """Write one row per item inside this transaction, one statement per chunk (see
        ``SqlBroker.publish_many``); they commit with it, and wake each subscription of
        their groups once it commits. A failure leaves the transaction to roll back: a
        batch that raised may have written some of its rows in it."""
        if self._write_many is None:
            msg = "this transaction publishes no batches: its broker writes none"
            raise TypeError(msg)
        written, found = await self._write_many(
            self._conn,
            row_type,
            items,
            delay=delay,
            headers=headers,
            on_duplicate=on_duplicate,
            chunk=chunk,
            **columns,
        )
        for where in written:
            if where not in self.published:
                self.published.append(where)
        return found

    @overload
    async def publish_named(
        self,
        to: Route[T],
        message: T,
        *,
        delay: timedelta | None = ...,
        headers: Mapping[str, str] | None = ...,
        unique: str | None = ...,
        on_duplicate: OnDuplicate = ...,
        **columns: object,
    ) -> Published: ...
    @overload
    async def publish_named(
        self,
        to: str,
        message: object,
        *,
        delay: timedelta | None = ...,
        headers: Mapping[str, str] | None = ...,
        unique: str | None = ...,
        on_duplicate: OnDuplicate = ...,
        **columns: object,
    ) -> Published: ...
    async def publish_named(
        self,
        to: str | Route[Any],
        message: object,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Published:
        """Write ``message`` by name inside this transaction, where the broker's routes lead
        it (see ``SqlBroker.publish_named``); it commits with the transaction."""
        if self._write_named is None:
            msg = "this transaction publishes no names: its broker has no routes to lead them"
            raise TypeError(msg)
        written = await self._write_named(
            self._conn,
            to,
            message,
            delay=delay,
            headers=headers,
            unique=unique,
            on_duplicate=on_duplicate,
            **columns,
        )
        return self._written(written)

    @overload
    async def publish_row(
        self: AnyTx,
        row: RowOf[Any, Any],
        *,
        delay: timedelta | None = ...,
        on_duplicate: OnDuplicate = ...,
    ) -> Published: ...
    @overload
    async def publish_row(
        self: Tx[Serves[tuple[F, Any]]],
        row: RowOf[F, Any],
        *,
        delay: timedelta | None = ...,
        on_duplicate: OnDuplicate = ...,
    ) -> Published: ...
    async def publish_row(
        self, row: Any, *, delay: timedelta | None = None, on_duplicate: OnDuplicate = "return"
    ) -> Published:
        """Write ``row``, an instance of a row class, inside this transaction (see
        ``SqlBroker.publish_row``)."""
        fields = row_fields(row, delay=delay is not None)
        written = await self._write(
            self._conn,
            type(row),
            None,
            delay=delay,
            headers=row_headers(row),
            unique=row_unique(row),
            on_duplicate=on_duplicate,
            **fields,
        )
        return self._written(written)


AnyTx: TypeAlias = Tx[Serves[object]]
"""A handler's ``keys.Tx``, whatever the broker: ``Serves`` is contravariant, so
``Serves[object]`` is below every dialect and its ``publish`` takes every row class.
No ``Any`` in it, so that a type checker picks one handler overload for a handler that takes
it."""


@final
class Held(_Runs):
    """One pooled connection lent by ``keys.Pool.connection()``: the same ``execute``,
    ``fetch`` and ``fetchval`` as the pool's, all on this connection (a ``BEGIN`` on it holds
    until a ``COMMIT`` or the block's end)."""

    def __init__(self, conn: Connection, style: ParamStyle) -> None:
        self._held: Connection | None = conn
        self._style = style

    @property
    def _conn(self) -> Connection:  # type: ignore[override]
        if self._held is None:
            raise TransactionHeld(HELD)
        return self._held

    def end(self) -> None:
        """The block ended and the connection went back to the pool: what a holder of this
        handle runs raises ``TransactionHeld``, never a statement on a connection the pool
        has lent to another task."""
        self._held = None


@final
class Pool(_Runs):
    """The broker's pool: each statement runs on a connection of its own and commits on its
    own, whatever the delivery's outcome."""

    def __init__(self, pool: DriverPool, style: ParamStyle) -> None:
        self._pool = pool
        self._style = style

    async def execute(self, sql: str, *params: object) -> int:
        async with self.connection() as held:
            return await held.execute(sql, *params)

    async def fetch(self, sql: str, *params: object) -> list[Record]:
        async with self.connection() as held:
            return await held.fetch(sql, *params)

    async def fetchval(self, sql: str, *params: object) -> object:
        rows = await self.fetch(sql, *params)
        return rows[0][0] if rows else None

    @asynccontextmanager
    async def connection(self) -> AsyncGenerator[Held, None]:
        """A pooled connection for several statements, with the same methods as the pool's
        (never the driver's own connection: its internals are trinbox's); returned, rolled
        back if a transaction is left open, when the block ends."""
        conn = await self._pool.acquire("keys.Pool")
        held = Held(conn, self._style)
        try:
            yield held
        finally:
            held.end()
            if conn.in_transaction:
                await rollback_quietly(conn)
            await give_back(self._pool, conn)


@final
class Out:
    """A handler's out slots: follow-up messages by name, ``out.reply(name, message)`` as
    often as the handler likes. They are written when the delivery is acked, in its
    transaction on a transactional mount (so they commit with the ack and never without it),
    where the broker's routes lead their names; every other outcome discards them. A name no
    route leads raises ``NoRoute`` at the call, in the handler."""

    def __init__(self, routes: Routes) -> None:
        self._routes = routes
        self._replies: list[Reply] | None = []

    @overload
    def reply(
        self, to: Route[T], message: T, *, delay: timedelta | None = ..., **columns: object
    ) -> None: ...
    @overload
    def reply(
        self, to: str, message: object, *, delay: timedelta | None = ..., **columns: object
    ) -> None: ...
    def reply(
        self,
        to: str | Route[Any],
        message: object,
        *,
        delay: timedelta | None = None,
        **columns: object,
    ) -> None:
        """Send ``message`` to ``to`` (a name, or an exact route) once the delivery is acked;
        ``columns`` give the row's other fields, ``delay`` makes it due later."""
        if self._replies is None:
            raise TransactionHeld(OUT_SETTLED)
        self._routes.lead(to, where="keys.Out.reply")
        self._replies.append(Reply(to, message, delay, columns))

    def take(self) -> list[Reply]:
        """The follow-ups sent so far, in order; the slots close (a later reply raises
        ``TransactionHeld``)."""
        replies, self._replies = self._replies or [], None
        return replies
