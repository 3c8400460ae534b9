"""``SqlBroker``: one database, its pool, publishing, table creation, and wake-on-publish.

Nothing connects when a broker is made: its pool opens when the app serves. The type argument
is the dialect (``SqlBroker[Sqlite]``...), which lets type checkers refuse mounts it cannot
serve.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any, Generic, Literal, LiteralString, TypeVar, cast, overload
from urllib.parse import urlsplit

import trio

from .._api.cancelled import CancelResult
from .._api.codecs import Codec, Encoded, JsonCodec
from .._api.events import EventBus, PublishEvent, PublishStart, now_ns
from .._api.handles import BLOCK as TX_BLOCK
from .._api.handles import DELIVERY as TX_DELIVERY
from .._api.handles import Pool as HandlerPool
from .._api.handles import Tx
from .._api.headers import Carried
from .._api.published import NOT_READ, OnDuplicate, Published
from .._api.routes import Reply, Route, Routes, make_route
from .._declare._cancels import CancelRequests
from .._declare._capabilities import AnyDatabase, MySql, Postgres, RowOf, Serves, Sqlite
from .._declare._inbox import Inbox, row_fields, row_headers, row_unique, spec_of
from .._declare._limit_records import LimitRecords
from .._declare._markers import Form
from .._declare._pauses import Pauses
from .._declare._rates import Rates
from .._declare._spec import TableSpec
from .._declare._ticks import Ticks
from .._declare._tracker import Tracker
from .._dialects._base import Dialect
from .._dialects._paramstyle import (
    NamedStyle,
    Paramstyle,
    PositionalStyle,
    check_paramstyle,
    render_for_driver,
)
from .._dialects._rated import rates_ddl
from .._dialects._statement import render
from .._dialects.cancels import RequestPlan, cancel_plan, request_plan
from .._dialects.ddl import render_ddl
from .._dialects.limit_records import RecordPlan, record_plan
from .._dialects.pauses import WHOLE, PausePlan, pause_plan
from .._dialects.seen import check_group_name, seen_plan
from .._dialects.ticks import tick_plan
from .._drivers._base import Connection, Op, Pool
from .._drivers._urls import Kind, redacted
from .._holders._base import whole_seconds
from .._holders.cancelling import cancel_queued
from .._holders.connections import give_back, rollback_quietly
from .._util import HostClock, positive_duration
from ..errors import (
    CancelRefused,
    Closed,
    DatabaseError,
    DeclarationError,
    Duplicate,
    IntegrityError,
    LockNotAvailable,
)
from .backends import BACKENDS, Backend, backend_of_url
from .clocks import DatabaseClock, host_clock, uses_database_clock
from .freed import FreedSlots
from .many import (
    CHUNK,
    BatchLimits,
    BatchRow,
    batch_rows,
    check_chunk,
    chunked,
    merged,
    write_chunk,
)
from .pausing import PauseBoard
from .pgbouncer import PoolMode, check_listen, check_pool_mode, driver_options
from .publishing import aborted_by_notify, group_of, own_headers, row_values, with_added
from .running import Running
from .waiting import SETTLED_CHANNEL, Settled, SettledRows, wait_settled
from .wake import WakeBoard

__all__ = ["SqlBroker"]

publish_log = logging.getLogger("trinbox.publish")

# A publish with a dedup key writes its row or reads the key's holder; the holder may finish
# between the two (the key is free again), and the publish then writes again, this many
# times at most. A deadlock on the unique index (MySQL) is retried as often.
UNIQUE_TRIES = 3

Written = tuple[str, str | None, Published]
"""Where a ``Tx``'s publish went (the table and group to wake once it commits) and what it
returns."""

D = TypeVar("D", bound=Serves[Any], covariant=True)
F = TypeVar("F", bound=Form)
T = TypeVar("T")


class SqlBroker(Generic[D]):
    """A database whose tables are queues. Make one with ``SqlBroker.sqlite(url)``,
    ``.postgres(url)`` or ``.mysql(url)``."""

    def __init__(
        self,
        *,
        backend: Backend,
        url: str,
        dialect: Dialect,
        pool_size: int,
        poll_interval: timedelta | float,
        lease: timedelta | float,
        clock: HostClock | DatabaseClock | None,
        codec: Codec | None,
        listen_notify: bool = False,
        pgbouncer: PoolMode | None = None,
        pauses: Pauses | None = None,
    ) -> None:
        if pool_size < 2:
            msg = (
                f"a broker's pool keeps one connection for settlements and publishes, found "
                f"pool_size={pool_size}; use 2 or more"
            )
            raise ValueError(msg)
        self.backend = backend
        self.url = url
        self.dialect = dialect
        self.pool_size = pool_size
        self.poll_interval: timedelta = positive_duration("a poll interval", poll_interval)
        self.lease: timedelta = whole_seconds(positive_duration("a lease", lease))
        # The host's "now"; under the database clock the statements read the server's
        # (dialect.database_clock) and this one only bounds delays.
        self.clock: HostClock = host_clock(clock)
        self.codec: Codec = codec or JsonCodec()
        self.listen_notify = listen_notify
        self.pgbouncer: PoolMode | None = check_pool_mode(pgbouncer)
        self._pool_options = driver_options(self.pgbouncer)
        self.wakes: WakeBoard = WakeBoard()
        self.pauses: Pauses | None = _pauses(pauses)
        self.pause_plan: PausePlan | None = (
            None
            if self.pauses is None
            else pause_plan(dialect, self.pauses.table, self.pauses.schema, repr(self.pauses))
        )
        self.pause_board: PauseBoard = PauseBoard()
        self.settled_rows = SettledRows()  # wakes broker.wait once a delivery here settles
        self.freed_slots = FreedSlots()  # limited queues' rows finished here, to announce
        self.running = Running()  # the handler calls in work here, for broker.cancel
        # Where a cancel asks another process to cancel its handler (use_cancel_requests).
        self.cancel_requests: RequestPlan | None = None
        self.cancel_expiry = timedelta(0)  # how long a request lives (its expire_after)
        # Wakes the watch of a table's cancel requests (a NOTIFY of another process's).
        self.cancel_wakes = SettledRows()
        # Where each limited queue's subscription records its limits (use_limit_records).
        self.limit_records: RecordPlan | None = None
        self.limit_mismatch: Literal["warn", "refuse"] = "warn"
        self.process_id = uuid.uuid4().hex  # this broker's rows in the limit record table
        self.routes: Routes = Routes()
        self._pool: Pool | None = None
        self._closed = False
        self._queues: set[tuple[str, str | None]] = set()
        self.events: EventBus | None = None  # the serving app's hooks
        # What bounds a batch's statements, read once (batch publish); PostgreSQL's column
        # types by table, for its arrays.
        self._batch_limits: BatchLimits | None = None
        self._batch_types: dict[str, dict[str, str]] = {}

    # -- constructors -------------------------------------------------------------------------

    @staticmethod
    def sqlite(
        url: str,
        *,
        pool_size: int = 8,
        poll_interval: timedelta | float = 1.0,
        lease: timedelta | float = 30.0,
        clock: HostClock | DatabaseClock | None = None,
        codec: Codec | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[Sqlite]:
        """A SQLite database file (``sqlite:///path.db``); one process serves a file.

        ``clock``: the host's system clock unless given; ``DatabaseClock()`` reads SQLite's
        ``'now'`` in the statements (milliseconds). ``pauses``: the table of the paused
        queues (``broker.pause``), read by every serving process each poll interval."""
        broker = SqlBroker._made(
            BACKENDS["sqlite"], url, pool_size, poll_interval, lease, clock, codec, pauses=pauses
        )
        return cast("SqlBroker[Sqlite]", broker)

    @staticmethod
    def postgres(
        url: str,
        *,
        pool_size: int = 10,
        poll_interval: timedelta | float = 1.0,
        lease: timedelta | float = 30.0,
        clock: HostClock | DatabaseClock | None = None,
        codec: Codec | None = None,
        listen_notify: bool = False,
        pgbouncer: PoolMode | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[Postgres]:
        """A PostgreSQL database (asyncpg); ``listen_notify`` wakes subscriptions of other
        processes on publish.

        ``pgbouncer`` names PgBouncer's ``pool_mode`` when ``url`` goes through PgBouncer:
        ``"transaction"`` turns asyncpg's statement cache off (no named statement outlives its
        transaction, whose server session PgBouncer then hands to another client), and the
        app refuses at startup what needs a session of its own: the advisory form and
        ``listen_notify``. ``"session"`` (or ``None``, a direct connection) changes nothing:
        every form works.

        ``clock``: the server's (``DatabaseClock()``, ``statement_timestamp()``) unless
        given; ``SystemClock()`` or any callable is the host's. ``pauses``: the table of the
        paused queues (``broker.pause``), read by every serving process each poll interval
        (at once on a pause, with ``listen_notify``).
        """
        broker = SqlBroker._made(
            BACKENDS["postgres"],
            url,
            pool_size,
            poll_interval,
            lease,
            clock,
            codec,
            listen_notify=listen_notify,
            pgbouncer=pgbouncer,
            pauses=pauses,
        )
        return cast("SqlBroker[Postgres]", broker)

    @staticmethod
    def mysql(
        url: str,
        *,
        pool_size: int = 10,
        poll_interval: timedelta | float = 1.0,
        lease: timedelta | float = 30.0,
        clock: HostClock | DatabaseClock | None = None,
        codec: Codec | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[MySql]:
        """A MySQL 8.0.1+ or MariaDB 10.6+ database (aiomysql).

        ``clock``: the server's (``DatabaseClock()``, ``UTC_TIMESTAMP(6)``) unless given;
        ``SystemClock()`` or any callable is the host's. ``pauses``: the table of the
        paused queues (``broker.pause``), read by every serving process each poll interval."""
        broker = SqlBroker._made(
            BACKENDS["mysql"], url, pool_size, poll_interval, lease, clock, codec, pauses=pauses
        )
        return cast("SqlBroker[MySql]", broker)

    @staticmethod
    def from_url(
        url: str,
        *,
        pool_size: int | None = None,
        poll_interval: timedelta | float = 1.0,
        lease: timedelta | float = 30.0,
        clock: HostClock | DatabaseClock | None = None,
        codec: Codec | None = None,
        listen_notify: bool = False,
        pgbouncer: PoolMode | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[AnyDatabase]:
        """The broker of the database ``url`` names by its scheme: ``postgresql://`` (or
        ``postgres://``) as ``postgres(url)``, ``mysql://`` (or ``mariadb://``) as
        ``mysql(url)``, ``sqlite:///`` as ``sqlite(url)``, each with its own defaults
        (``pool_size`` left out: 10, or 8 on SQLite). ``listen_notify`` and ``pgbouncer`` are
        PostgreSQL's.

        The database is known only when the program runs, so mypy checks its mounts and
        publishes against what every database serves (``AnyDatabase``: the lease and
        advisory forms at the default isolation level); the constructors of each database give its
        own checks (a row lock table needs ``postgres(..)`` or ``mysql(..)``)."""
        backend = backend_of_url(url)
        if not backend.notify and (listen_notify or pgbouncer is not None):
            given = "listen_notify=True" if listen_notify else f"pgbouncer={pgbouncer!r}"
            msg = (
                f"{given} is a PostgreSQL setting, found a {backend.kind} URL ({redacted(url)}); "
                f"leave it out for this database"
            )
            raise ValueError(msg)
        broker = SqlBroker._made(
            backend,
            url,
            backend.pool_size if pool_size is None else pool_size,
            poll_interval,
            lease,
            clock,
            codec,
            listen_notify=listen_notify,
            pgbouncer=pgbouncer,
            pauses=pauses,
        )
        return cast("SqlBroker[AnyDatabase]", broker)

    @staticmethod
    def _made(
        backend: Backend,
        url: str,
        pool_size: int,
        poll_interval: timedelta | float,
        lease: timedelta | float,
        clock: HostClock | DatabaseClock | None,
        codec: Codec | None,
        *,
        listen_notify: bool = False,
        pgbouncer: PoolMode | None = None,
        pauses: Pauses | None = None,
    ) -> SqlBroker[Any]:
        """The broker of ``backend``: its URL and driver checked here (a missing driver or a
        port that is not a number fails at the line that made the broker, not at startup),
        its dialect on the clock given, else the backend's."""
        backend.check_url(url)
        database_clock = uses_database_clock(clock, default=backend.database_clock)
        return SqlBroker[Any](
            backend=backend,
            url=url,
            dialect=backend.dialect(database_clock=database_clock),
            pool_size=pool_size,
            poll_interval=poll_interval,
            lease=lease,
            clock=clock,
            codec=codec,
            listen_notify=listen_notify,
            pgbouncer=pgbouncer,
            pauses=pauses,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """The database family (``postgres``, ``mysql``, ``sqlite``)."""
        return self.backend.kind

    @property
    def needs_asyncio(self) -> bool:
        """Whether the driver runs on asyncio (inside the app's trio-asyncio loop)."""
        return not self.backend.in_process

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            msg = "the broker is not open: its pool opens when the app serves"
            raise Closed(msg)
        return self._pool

    @property
    def database(self) -> HandlerPool:
        """The pool as handlers see it (``keys.Pool``)."""
        return HandlerPool(self.pool, self.dialect.style)

    async def open(self) -> None:
        if self._pool is not None:
            return
        self._closed = False
        check_listen(self.pgbouncer, listen_notify=self.listen_notify, on=self.url_label)
        self._pool = await self.backend.open_pool(self.url, self.pool_size, self._pool_options)

    async def open_side_pool(self) -> Pool:
        """A one-connection pool beside the broker's (the LISTEN connection)."""
        return await self.backend.open_pool(self.url, 1, self._pool_options)

    @property
    def url_label(self) -> str:
        """The database without credentials, for messages."""
        if not self.backend.in_process:
            return redacted(self.url)
        parts = urlsplit(self.url)
        host = f"{parts.hostname}:{parts.port}" if parts.hostname else ""
        return f"{self.kind}://{host}{parts.path}"

    async def aclose(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        self._queues.clear()
        self.pause_board.forget_gates()
        if pool is not None:
            with trio.CancelScope(shield=True):
                await pool.aclose()

    def register_queue(self, spec: TableSpec, group: str | None) -> bool:
        """Claim (table, group) for one subscription; False if it is taken. ``None``, the
        whole table (a table without groups, or every group of a FIFO table), overlaps every
        group of the table."""
        key = (spec.qualified_name, group)
        if any(t == key[0] and (g == group or g is None or group is None) for t, g in self._queues):
            return False
        self._queues.add(key)
        return True

    async def create_tables(
        self,
        row_type: type | Tracker | Ticks | Pauses | CancelRequests | Rates | LimitRecords,
        *,
        dead_letter: str | None = None,
    ) -> None:
        """Create ``row_type``'s table and claim index, and its dead letter table when
        ``dead_letter`` names one as the mount does (or a ``Tracker``'s seen-records table,
        a ``Ticks``' tick table, a ``Pauses``' pause table, or a ``CancelRequests``'
        table), where they are missing: idempotent, for
        development and tests (an ``on_startup`` hook runs before the subscriptions check
        their tables). A production schema belongs to your migrations: ``trinbox schema``
        prints the same statements.

        One statement at a time on one connection (autocommit: each ``IF NOT EXISTS`` stands
        alone, and MySQL commits DDL anyway), once the server is known to take them all."""
        if isinstance(row_type, Tracker):
            label = row_type.label
            where = f"create_tables({row_type!r})"
            ddl = list(seen_plan(self.dialect, row_type.table, row_type.schema, where).ddl)
        elif isinstance(row_type, Ticks):
            label = row_type.label
            where = f"create_tables({row_type!r})"
            ddl = list(tick_plan(self.dialect, row_type.table, row_type.schema, where).ddl)
        elif isinstance(row_type, Pauses):
            label = row_type.label
            where = f"create_tables({row_type!r})"
            ddl = list(pause_plan(self.dialect, row_type.table, row_type.schema, where).ddl)
        elif isinstance(row_type, CancelRequests):
            label = row_type.label
            where = f"create_tables({row_type!r})"
            ddl = list(request_plan(self.dialect, row_type.table, row_type.schema, where).ddl)
        elif isinstance(row_type, LimitRecords):
            label = row_type.label
            where = f"create_tables({row_type!r})"
            ddl = list(record_plan(self.dialect, row_type.table, row_type.schema, where).ddl)
        elif isinstance(row_type, Rates):
            label = row_type.label
            ddl = list(rates_ddl(self.dialect, row_type, f"create_tables({row_type!r})"))
        else:
            spec = spec_of(row_type)
            label, ddl = spec.label, render_ddl(self.dialect, spec, dead_letter)
        statements = [render("ddl", sql, self.dialect.style) for sql in ddl]
        try:
            pool = self.pool
        except Closed:
            msg = (
                f"create_tables({label}) runs on the broker's pool, found the broker not "
                f"open (its pool opens when the app serves); call it in an on_startup hook, "
                f"which runs before the subscriptions check their tables"
            )
            raise Closed(msg) from None
        conn = await pool.acquire("create_tables")
        try:
            version_query = self.dialect.version_query
            if version_query is not None:
                rows = await conn.fetch(version_query)
                self.dialect.check_ddl_server([s.sql for s in statements], str(rows[0][0]))
            for statement in statements:
                await conn.execute(statement.sql, ())
        finally:
            await give_back(pool, conn)

    # -- pauses ----------------------------------------------------------------------------------

    async def pause(self, row_type: type[Inbox[Any, Any]], *, group: str | None = None) -> None:
        """Pause the queue of ``row_type``'s table (every subscription of it), or of its
        group ``group`` (the subscription ``InboxQueue(Row, group)``), in the pause table
        (``pauses=``): every process serving this broker's database stops claiming it within
        one poll interval (this process at once; the others at once too with
        ``listen_notify``), and after a restart. Deliveries in work finish, and their leases
        keep extending; a claim already running when the pause comes hands over what it
        took. A second pause changes nothing."""
        await self.write_pause(spec_of(row_type), group, pause=True)

    async def resume(self, row_type: type[Inbox[Any, Any]], *, group: str | None = None) -> None:
        """End the pause that ``pause(row_type, group=group)`` wrote: claiming starts again
        within one poll interval (at once in this process). A group's pause and the table's
        are two: resuming one leaves the other."""
        await self.write_pause(spec_of(row_type), group, pause=False)

    def paused(self, row_type: type[Inbox[Any, Any]], *, group: str | None = None) -> bool:
        """Whether this process holds the subscription of ``group`` of ``row_type``'s table
        paused, as it last read the pause table (or paused or resumed it itself)."""
        spec = spec_of(row_type)
        return self.pause_board.paused(spec.qualified_name, group)

    async def write_pause(self, spec: TableSpec, group: str | None, *, pause: bool) -> None:
        """Write (``pause``) or delete the pause of ``group`` of ``spec``'s table (``None``:
        the whole table): ``pause``/``resume``, and ``trinbox queues MODULE:APP pause|resume``."""
        verb = "pause" if pause else "resume"
        where = f"broker.{verb}({spec.label}{'' if group is None else f', group={group!r}'})"
        key = (spec.qualified_name, _pause_group(where, spec, group))
        plan = self.pause_plan
        if plan is None:
            msg = (
                f"{where}: a pause is kept in the broker's pause table, found a broker without "
                f"one; pass pauses=Pauses('app_pauses') to SqlBroker.{self.kind}(..) (create "
                f"it with broker.create_tables(pauses) or trinbox schema)"
            )
            raise DeclarationError(msg)
        try:
            pool = self.pool
        except Closed:
            msg = (
                f"{where} writes on the broker's pool, found the broker not open (its pool "
                f"opens when the app serves, or with await broker.open())"
            )
            raise Closed(msg) from None
        statement = plan.pause if pause else plan.resume
        values = {"tbl": key[0], "grp": key[1], "now": self.clock()}
        conn = await pool.acquire(verb)
        try:
            await conn.execute(statement.sql, statement.bind(values))
            notify = self.dialect.notify_statement()
            if self.listen_notify and notify is not None and self.pauses is not None:
                channel = self.pauses.label
                try:
                    await conn.execute(notify.sql, notify.bind({"channel": channel, "group": ""}))
                except DatabaseError:
                    publish_log.warning(
                        "%s: NOTIFY failed; the pause is written, and other processes read it "
                        "at their next poll",
                        where,
                        exc_info=True,
                    )
        finally:
            await give_back(pool, conn)
        if pause:
            self.pause_board.add(key)
        else:
            self.pause_board.discard(key)

    # -- routes ----------------------------------------------------------------------------------

    @overload
    def route(
        self: SqlBroker[Serves[tuple[F, Any]]], row_type: type[RowOf[F, Any]], pattern: str
    ) -> Route[object]: ...
    @overload
    def route(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        pattern: str,
        message: type[T],
    ) -> Route[T]: ...
    def route(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        pattern: str,
        message: type[Any] = object,
    ) -> Route[Any]:
        """Lead publishes of the name ``pattern`` into ``row_type``'s table, the name written
        into its ``Group`` field (a table without one is one queue: the name only picks the
        table); ``"prefix*"`` leads every name with that prefix. An exact route beats a
        prefix, the longer prefix the shorter, and a pattern routed again takes the last
        route. ``message`` names the messages' type, which type checkers then check wherever
        the route stands for its name (``publish_named``, ``reply``, ``keys.Out``).

        Routes are the broker's: declare them before ``app.include`` mounts a subscription
        by name (``RoutedQueue``) on it."""
        name = getattr(row_type, "__qualname__", repr(row_type))
        route = make_route(row_type, pattern, message, where=f"route({name}, {pattern!r})")
        self.dialect.check(route.spec)
        self.routes.add(route)
        return route

    # -- publishing ------------------------------------------------------------------------------

    async def publish(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Published:
        """Write a row into ``row_type``'s table and wake the local subscription of its group.

        ``message`` is encoded into the payload column (payload mode; leave it out in row
        mode); ``columns`` give the other fields by name (the group field names the queue);
        ``delay`` makes the row due later (needs a ``RetryAfter`` field); ``headers`` go into
        the ``Headers`` field (a table without one refuses them: ``HeaderRefused``).

        ``unique`` is the row's dedup key, written into the ``Unique`` field: when an
        unfinished row of the table holds it already, nothing is written and that row is
        returned (``Published.duplicate``), or ``Duplicate`` raised with
        ``on_duplicate="raise"``. A publish with a key returns the row that holds it; one
        without returns ``None`` (the plain insert, which reads nothing back).
        """
        return await self._publish(
            spec_of(row_type), message, delay, headers, columns, unique, on_duplicate
        )

    async def _publish(
        self,
        spec: TableSpec,
        message: object,
        delay: timedelta | None,
        headers: Mapping[str, str] | None,
        columns: dict[str, object],
        unique: object = None,
        on_duplicate: OnDuplicate = "return",
    ) -> Published:
        if self._closed:
            raise Closed("the broker is shut down; publish before shutdown")
        found = await self._write(
            spec, message, delay, columns, headers, None, unique, on_duplicate
        )
        if not found.duplicate:
            self.wakes.wake(spec.qualified_name, group_of(spec, columns))
        return found

    @overload
    async def publish_named(
        self,
        to: Route[T],
        message: T,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Published: ...
    @overload
    async def publish_named(
        self,
        to: str,
        message: object,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
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
        """Publish ``message`` by name: into the table the broker's routes lead ``to`` (a
        name, or an exact route), the name into its ``Group`` field, and wake the local
        subscription of that group. ``NoRoute`` when no route leads the name; ``headers``,
        ``unique`` and ``on_duplicate`` as ``publish`` takes them."""
        if self._closed:
            raise Closed("the broker is shut down; publish before shutdown")
        spec, fields = self._routed(to, columns, where="publish_named")
        return await self._publish(spec, message, delay, headers, fields, unique, on_duplicate)

    async def forward(self, name: str, payload: bytes, headers: Mapping[str, str]) -> None:
        """An outbox record relayed into this broker (``trinbox.outbox.into``): published by
        ``name`` where this broker's routes lead it, its payload's bytes written as they are
        (never through this broker's codec), its headers as the record had them, its id
        under ``ID_HEADER`` among them (so the table needs a Headers field)."""
        if self._closed:
            raise Closed("the broker is shut down; a relayed record is written before shutdown")
        spec, fields = self._routed(name, {}, where="a record relayed into the broker")
        await self._write(spec, Encoded(payload), None, fields, Carried(headers))
        self.wakes.wake(spec.qualified_name, group_of(spec, fields))

    async def write_reply(
        self, reply: Reply, conn: Connection | None, *, where: str
    ) -> tuple[str, str | None]:
        """A handler's follow-up message, where the routes lead its name: on ``conn``, the
        delivery's transaction (it commits with the ack, and the caller wakes its
        subscription then), else on a pooled connection of its own, woken at once. Where it
        went: the table and group."""
        if self._closed:
            raise Closed("the broker is shut down; a reply is written before shutdown")
        spec, fields = self._routed(reply.to, dict(reply.columns), where=where)
        await self._write(spec, reply.message, reply.delay, fields, None, conn)
        written = (spec.qualified_name, group_of(spec, fields))
        if conn is None:
            self.wakes.wake(*written)
        return written

    def _routed(
        self, to: str | Route[Any], columns: dict[str, object], *, where: str
    ) -> tuple[TableSpec, dict[str, object]]:
        """The table the routes lead ``to`` into, and the row's fields with the name in its
        Group field. A lookup: no query."""
        name, route = self.routes.lead(to, where=where)
        spec = route.spec
        group = spec.group
        if group is None:
            return spec, columns
        given = columns.get(group.field, name)
        if given != name:
            msg = (
                f"{where}: a message published by name goes into the Group field {group.field} "
                f"of {spec.label} as its name, found {group.field}={given!r} beside the name "
                f"{name!r}; leave {group.field}= out, or publish the name {given!r}"
            )
            raise DeclarationError(msg)
        return spec, {**columns, group.field: name}

    async def publish_row(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row: RowOf[F, Any],
        *,
        delay: timedelta | None = None,
        on_duplicate: OnDuplicate = "return",
    ) -> Published:
        """Write ``row``, an instance of a row class, into its table: ``publish`` with the
        row's fields as its columns, which the row's constructor has checked (names and
        types) where ``publish(Row, **columns)`` takes any keyword. Generated fields are left
        to the database; a Payload field is written as it is (bytes, not encoded); ``delay``
        sets the RetryAfter field over the row's value; a Headers field's value is the row's
        headers, a Unique field's its dedup key (``None``: none, and ``None`` returned)."""
        # RowOf in the signature: a dialect serves a union of forms, and Inbox's form is one.
        inbox = cast("Inbox[Any, Any]", row)
        fields = row_fields(inbox, delay=delay is not None)
        return await self._publish(
            spec_of(type(inbox)),
            None,
            delay,
            row_headers(inbox),
            fields,
            row_unique(inbox),
            on_duplicate,
        )

    async def publish_many(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        on_duplicate: OnDuplicate = "return",
        chunk: int = CHUNK,
        **columns: object,
    ) -> list[Published]:
        """Write one row per item into ``row_type``'s table, in one transaction, one
        statement per chunk of at most ``chunk`` rows (fewer where the server's limits say
        so), and wake each local subscription of their groups once.

        An item is a message, written with ``columns``, ``delay`` and ``headers`` as
        ``publish`` takes them, or a ``Message(message, delay=, headers=, unique=,
        **columns)`` with fields of its own (its columns and headers over the shared ones,
        its delay instead). Returns what each item's ``publish`` would, in the items' order,
        with every row's id read back: a keyed row held by an unfinished row is that row,
        ``duplicate=True`` (``Duplicate`` with ``on_duplicate="raise"``, and nothing
        written). All or nothing: a row refused (before anything is written) or a statement
        failed leaves none of the batch. An empty batch writes nothing."""
        if self._closed:
            raise Closed("the broker is shut down; publish before shutdown")
        written, found = await self._write_many(
            spec_of(row_type), items, delay, headers, columns, on_duplicate, chunk, None
        )
        for table, group in written:
            self.wakes.wake(table, group)
        return found

    async def _write_many_in(
        self,
        conn: Connection,
        row_type: type[Inbox[Any, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        on_duplicate: OnDuplicate = "return",
        chunk: int = CHUNK,
        **columns: object,
    ) -> tuple[list[tuple[str, str | None]], list[Published]]:
        """A ``Tx``'s batch: the rows written in its transaction, where they went (once per
        group), and what each item's publish returns."""
        return await self._write_many(
            spec_of(row_type), items, delay, headers, columns, on_duplicate, chunk, conn
        )

    async def _write_many(
        self,
        spec: TableSpec,
        items: Iterable[object],
        delay: timedelta | None,
        headers: Mapping[str, str] | None,
        columns: dict[str, object],
        on_duplicate: OnDuplicate,
        chunk: int,
        conn: Connection | None,
    ) -> tuple[list[tuple[str, str | None]], list[Published]]:
        where = "publish_many" if conn is None else "tx.publish_many"
        most = check_chunk(chunk, where)
        messages = merged(spec, items, delay=delay, headers=headers, columns=columns, where=where)
        if not messages:
            return [], []
        groups = {group_of(spec, m.columns) for m in messages}
        group = next(iter(groups)) if len(groups) == 1 else None
        events = self.events
        start, t0 = now_ns(), time.perf_counter()
        error: BaseException | None = None
        try:
            added: Mapping[str, str] = {}
            if events is not None and spec.headers is not None:
                added = events.publishing(
                    PublishStart(
                        spec.qualified_name,
                        group,
                        self.backend.system,
                        conn is not None,
                        start,
                        own_headers(headers),
                        rows=len(messages),
                    )
                )
            rows = batch_rows(self.dialect, spec, messages, self.clock(), self.codec, added, where)
            found = await self._write_many_on(conn, spec, rows, on_duplicate, most)
        except BaseException as exc:
            error = exc
            raise
        finally:
            if events is not None:
                events.published(
                    PublishEvent(
                        spec.qualified_name,
                        group,
                        self.backend.system,
                        conn is not None,
                        start,
                        time.perf_counter() - t0,
                        error,
                        rows=len(messages),
                    )
                )
        written = dict.fromkeys(
            (spec.qualified_name, row.group)
            for row, item in zip(rows, found, strict=True)
            if not item.duplicate
        )
        return list(written), found

    async def _write_many_on(
        self,
        conn: Connection | None,
        spec: TableSpec,
        rows: list[BatchRow],
        on_duplicate: OnDuplicate,
        chunk: int,
    ) -> list[Published]:
        """The batch on ``conn`` (the caller's transaction), else in a transaction of its
        own on a pooled connection, written again after a deadlock on the unique index."""
        return await self._retried(
            conn,
            spec,
            keyed=any(row.key is not None for row in rows),
            texts=(
                "publish_many" if conn is None else "tx.publish_many",
                "the batch",
                "a batch with dedup keys",
            ),
            write=lambda on: self._batch_on(on, spec, rows, on_duplicate, chunk, own=conn is None),
        )

    async def _batch_on(
        self,
        conn: Connection,
        spec: TableSpec,
        rows: list[BatchRow],
        on_duplicate: OnDuplicate,
        chunk: int,
        *,
        own: bool,
    ) -> list[Published]:
        """Write the chunks on ``conn``; on a connection of its own, inside a transaction
        unless one statement writes the whole batch (one chunk, no key to match)."""
        limits = await self._limits(conn)
        types = await self._column_types(conn, spec) if self.dialect.batch_types else None
        keyed = any(row.key is not None for row in rows)
        plan = self.dialect.batch_insert(spec, keyed=keyed, types=types)
        chunks = list(chunked(rows, plan, limits, chunk))
        begin = own and (len(chunks) > 1 or keyed)
        if begin:
            await conn.begin(self.dialect.plain_begin().sql)
        try:
            found: list[Published] = []
            for part in chunks:
                found.extend(await write_chunk(conn, self.dialect, spec, plan, part, on_duplicate))
            groups = dict.fromkeys(
                row.group for row, item in zip(rows, found, strict=True) if not item.duplicate
            )
            for group in groups:
                await self._announce(conn, spec, group)
            if begin:
                await conn.commit()
        except BaseException:
            if begin:
                await rollback_quietly(conn)
            raise
        return found

    async def _limits(self, conn: Connection) -> BatchLimits:
        """What bounds a batch's statements on this database, read once."""
        if self._batch_limits is None:
            packet = None
            query = self.dialect.packet_limit_query
            if query is not None:
                found = await conn.fetch(self.dialect.render("limits", query).sql)
                packet = int(cast("int", found[0][0]))
            reader = self.backend.parameter_limit
            parameters = reader() if reader is not None else self.dialect.parameter_limit
            self._batch_limits = BatchLimits(parameters, packet)
        return self._batch_limits

    async def _column_types(self, conn: Connection, spec: TableSpec) -> dict[str, str]:
        """The table's columns' types as the catalog has them (PostgreSQL's arrays), read
        once per table."""
        types = self._batch_types.get(spec.qualified_name)
        if types is None:
            query = self.dialect.columns_query(spec)
            records = await conn.fetch(query.sql, query.bind({}))
            types = {c.name: c.type for c in self.dialect.read_columns(spec, records)}
            self._batch_types[spec.qualified_name] = types
        return types

    @overload
    def insert_many_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        chunk: int = CHUNK,
        paramstyle: PositionalStyle | None = None,
        **columns: object,
    ) -> list[tuple[LiteralString, tuple[object, ...]]]: ...

    @overload
    def insert_many_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        chunk: int = CHUNK,
        paramstyle: NamedStyle,
        **columns: object,
    ) -> list[tuple[LiteralString, dict[str, object]]]: ...

    def insert_many_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        items: Iterable[object],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        chunk: int = CHUNK,
        paramstyle: Paramstyle | None = None,
        **columns: object,
    ) -> (
        list[tuple[LiteralString, tuple[object, ...]]]
        | list[tuple[LiteralString, dict[str, object]]]
    ):
        """``insert_statement`` for a batch: the statements that write one row per item (as
        ``publish_many`` takes them), a multi-row ``INSERT ... VALUES`` per chunk of at most
        ``chunk`` rows and within the parameters a statement may bind (PostgreSQL's 65535,
        the running SQLite library's), to run in order on a connection of your own. Row
        ``n``'s parameters are named after its columns with ``_n`` (from 1) in the named
        styles. With a dedup key in any row of a chunk, its statement skips a held key as
        ``insert_statement(..., unique=)`` does (``ON CONFLICT ... DO NOTHING RETURNING id``,
        ``ON DUPLICATE KEY UPDATE id = id``). MySQL's ``max_allowed_packet`` is the server's
        to know: keep ``chunk`` within it. An empty batch: no statement."""
        spec = spec_of(row_type)
        where = "insert_many_statement"
        style = None if paramstyle is None else check_paramstyle(paramstyle)
        most = check_chunk(chunk, where)
        messages = merged(
            spec, items, delay=delay, headers=headers, columns=dict(columns), where=where
        )
        rows = batch_rows(self.dialect, spec, messages, self.clock(), self.codec, {}, where)
        if not rows:
            return []
        plan = self.dialect.batch_insert(spec, keyed=False)
        reader = self.backend.parameter_limit
        limits = BatchLimits(reader() if reader is not None else self.dialect.parameter_limit)
        statements: list[Any] = []
        for part in chunked(rows, plan, limits, most):
            keyed = any(row.key is not None for row in part)
            sql = self.dialect.insert_many_sql(spec, len(part), keyed=keyed)
            values = {
                f"{slot}_{n}": value
                for n, row in enumerate(part, start=1)
                for slot, value in row.values.items()
            }
            if style is None:
                statement = self.dialect.render("insert_many", sql)
                statements.append((_literal(statement.sql), statement.bind(values)))
            else:
                text, params = render_for_driver(sql, values, style)
                statements.append((_literal(text), params))
        return statements

    async def wait(self, row_type: type[T], row_id: object) -> Settled[T]:
        """Wait until the row ``row_id`` of ``row_type`` has settled, and say how: a
        ``Settled`` with ``outcome`` ``"ack"`` (``result``: the handler's result, decoded by
        the broker's codec into the Result field's type), ``"drop"`` or ``"dead_letter"``, and
        the row as it settled. Read from the row itself once a poll interval (the broker's
        clock), so it works from any process and behind any pooler, and at once when a
        delivery of this process settles a row of the table or, with ``listen_notify``, one
        of another process announces it did (``trinbox_settled``); the table needs a Result
        field (and so a ProcessedAt field). Refused in a handler of the row's own queue
        (``DeclarationError``): a saturated queue would wait on itself.

        Cancellation: bound it with ``trio.fail_after(seconds)`` (``trio.TooSlowError`` when
        the row has not settled by then) or ``move_on_after``; a cancel between reads leaves
        nothing behind."""
        return await wait_settled(
            self.dialect,
            lambda: self.pool,
            self.codec,
            self.poll_interval.total_seconds(),
            row_type,
            row_id,
            self.settled_rows,
        )

    async def cancel(self, row_type: type[Inbox[Any, Any]], row_id: object) -> CancelResult:
        """Cancel the row ``row_id`` of ``row_type``, and say what it was:
        ``CancelResult.QUEUED`` when it was unfinished and not in work (settled now as a
        drop settles it, deleted or stamped processed with a NULL Result, in one statement or
        transaction that never waits on a lock: it is never claimed again),
        ``CancelResult.RUNNING`` when a handler holds it: a handler of this process is
        cancelled (it sees ``trio.Cancelled``; its delivery settles as cancelled, as a drop
        settles it, never retried, its ``keys.Tx`` rolled back), one of another process is
        not reached yet. ``CancelResult.FINISHED`` when it had finished (acked, dropped,
        dead-lettered into a group: it stays as it settled), ``CancelResult.NOT_FOUND`` when
        no row has the id (on a table whose settlement deletes, a finished row, or one moved
        into a dead letter table). A cancel racing a claim or a settlement leaves the row as
        the first of them made it: a claimed row is in work, a finished row stays finished.

        Refused (``CancelRefused``, nothing changed): a row of a batch delivery in work here
        (``.batch(n)``: its one handler call holds every row of the batch); on SQLite, a row
        of an advisory table while another process serves the file's keys."""
        spec = spec_of(row_type)
        # A handler of this process first: its row is in work, and asking the database would
        # wait on a SQLite write lock its transaction may hold.
        here = self.running.cancel(spec.qualified_name, row_id)
        if here == "batch":
            msg = (
                f"a cancel ends one handler call, found row {row_id!r} of {spec.label} in a "
                f"batch delivery (one handler call holds every row of its batch); cancel "
                f"rows of a .batch(n) queue while they are queued, or let the batch finish"
            )
            raise CancelRefused(msg)
        if here == "cancelled":
            return CancelResult.RUNNING
        found = await cancel_queued(
            cancel_plan(self.dialect, spec),
            self.pool,
            self.dialect.driver_value(row_id),
            self.clock(),
            label=spec.label,
        )
        if found == "queued":
            self.settled_rows.settled(spec.qualified_name)
            if self.listen_notify and spec.result is not None:
                await self._announce_cancelled(spec.qualified_name)
        elif found == "running" and self.cancel_requests is not None:
            await self._request_cancel(spec.qualified_name, row_id)
        return CancelResult(found)

    def use_cancel_requests(self, requests: CancelRequests) -> None:
        """Reach handlers of other processes: a cancel that finds its row in work, and no
        handler of this process holding it, writes a request into ``requests``' table
        (``create_tables(requests)`` or ``trinbox schema`` make it); the subscriptions of
        every process that uses it read their table's requests once a poll interval while
        they have deliveries in work, on the broker's clock and behind any pooler, cancel the
        handler of each row they hold, and delete the request. A request lapses after
        ``requests.expire_after``, which must be longer than the poll interval: one whose row
        finished or was given back before a holder read it cancels no later delivery past
        that. Call it in every process, the cancelling one included, before the app serves."""
        if not isinstance(requests, CancelRequests):
            msg = (
                f"use_cancel_requests takes a CancelRequests, found {requests!r}; pass "
                f"CancelRequests('trinbox_cancels')"
            )
            raise DeclarationError(msg)
        where = f"use_cancel_requests({requests!r})"
        if requests.expire_after <= self.poll_interval:
            msg = (
                f"{where}: a cancel request must outlive the poll interval of the watches that "
                f"read it, found expire_after={requests.expire_after} and a poll interval of "
                f"{self.poll_interval}; pass a longer expire_after, like "
                f"expire_after=timedelta(seconds={(self.poll_interval * 10).total_seconds():g})"
            )
            raise DeclarationError(msg)
        self.cancel_requests = request_plan(self.dialect, requests.table, requests.schema, where)
        self.cancel_expiry = requests.expire_after

    def use_limit_records(
        self, records: LimitRecords, *, on_mismatch: Literal["warn", "refuse"] = "warn"
    ) -> None:
        """Tell a process that declares other limits for a queue than another process
        serving it: each subscription to a limited queue reads, as it starts, the records of
        its (table, group) that other processes wrote within the last 10 poll intervals;
        one whose limits differ from this process's is logged (``trinbox.app``, a warning) or,
        with ``on_mismatch="refuse"``, stops the startup (``StartupError``); then it writes
        its own record, and writes it again every 3 poll intervals while it serves, so a
        process that starts later sees it however long it has served. ``create_tables(records)``
        or ``trinbox schema`` make the table. Call it before the app serves."""
        if not isinstance(records, LimitRecords):
            msg = (
                f"use_limit_records takes a LimitRecords, found {records!r}; pass "
                f"LimitRecords('trinbox_limits')"
            )
            raise DeclarationError(msg)
        where = f"use_limit_records({records!r})"
        mismatch: object = on_mismatch  # whatever a caller passed
        if mismatch not in ("warn", "refuse"):
            msg = (
                f"{where}: on_mismatch is 'warn' or 'refuse', found {mismatch!r}; pass "
                f"on_mismatch='refuse' to stop a process whose limits differ"
            )
            raise DeclarationError(msg)
        self.limit_records = record_plan(self.dialect, records.table, records.schema, where)
        self.limit_mismatch = on_mismatch

    async def _announce_cancelled(self, table: str) -> None:
        """Wake the waits of other processes on ``table`` (``SETTLED_CHANNEL``): a cancel
        settled a queued row, which no delivery's announcer reports. A failed NOTIFY loses
        only the wake-up (the waits poll)."""
        notify = self.dialect.notify_statement()
        assert notify is not None, "listen_notify is refused where there is no NOTIFY"
        announce = {"channel": SETTLED_CHANNEL, "group": table}
        conn = await self.pool.acquire("cancel announce")
        try:
            await conn.execute(notify.sql, notify.bind(announce))
        except DatabaseError:
            publish_log.warning("NOTIFY of a cancelled row failed", exc_info=True)
        finally:
            await give_back(self.pool, conn)

    async def _request_cancel(self, table: str, row_id: object) -> None:
        assert self.cancel_requests is not None
        plan = self.cancel_requests
        now = self.clock()
        values: dict[str, object] = {
            "table": table,
            "row_id": str(row_id),
            "now": now,
            "retry_at": now + self.cancel_expiry,
            "delay": self.cancel_expiry // timedelta(microseconds=1),
        }
        notify = self.dialect.notify_statement() if self.listen_notify else None
        conn = await self.pool.acquire("cancel request")
        try:
            # Lapsed requests first: one of this row would keep the new one from being written.
            await conn.execute(plan.lapsed.sql, plan.lapsed.bind(values))
            await conn.execute(plan.request.sql, plan.request.bind(values))
            if notify is not None:
                announce = {"channel": plan.channel, "group": table}
                try:
                    await conn.execute(notify.sql, notify.bind(announce))
                except DatabaseError:
                    # The request is written: the watches see it at their next poll.
                    publish_log.warning("NOTIFY of a cancel request failed", exc_info=True)
        finally:
            await give_back(self.pool, conn)

    def transaction(self) -> AbstractAsyncContextManager[Tx[D]]:
        """A transaction on a pooled connection, committed when the block ends (rolled back on
        an exception). ``tx.publish(..)`` writes queue rows in it; they wake their
        subscriptions once it commits. The ``Tx`` ends with the block: one kept past it
        raises ``TransactionHeld``."""
        return self._transaction(self.dialect.plain_begin().sql, "broker.transaction")

    def read_write_transaction(self) -> AbstractAsyncContextManager[Tx[D]]:
        """``transaction()`` for a block that reads, then writes what it read (a custom
        relay's fetch): SQLite takes its write lock at the BEGIN, where a deferred
        transaction's upgrade fails at once beside another writer."""
        return self._transaction(self.dialect.redrive_begin().sql, "read_write_transaction")

    @asynccontextmanager
    async def _transaction(self, begin: str, holder: str) -> AsyncGenerator[Tx[D], None]:
        conn = await self.pool.acquire(holder)
        tx = self.tx_on(conn, ended=TX_BLOCK)
        try:
            await conn.begin(begin)
            try:
                yield tx
            finally:
                # Before the commit: its connection goes back to the pool, where a statement
                # of a kept Tx would run in autocommit or in another task's transaction.
                tx.end()
            await conn.commit()
        except BaseException:
            await rollback_quietly(conn)
            raise
        finally:
            await give_back(self.pool, conn)
        for table, group in dict.fromkeys(tx.published):
            self.wakes.wake(table, group)

    @overload
    def insert_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        paramstyle: PositionalStyle | None = None,
        **columns: object,
    ) -> tuple[LiteralString, tuple[object, ...]]: ...

    @overload
    def insert_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        paramstyle: NamedStyle,
        **columns: object,
    ) -> tuple[LiteralString, dict[str, object]]: ...

    def insert_statement(
        self: SqlBroker[Serves[tuple[F, Any]]],
        row_type: type[RowOf[F, Any]],
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        paramstyle: Paramstyle | None = None,
        **columns: object,
    ) -> tuple[LiteralString, tuple[object, ...]] | tuple[LiteralString, dict[str, object]]:
        """The SQL text and parameters that write this row, to run on a connection of your
        own (inside your own transaction, beside the business write it belongs to).

        ``paramstyle`` names your driver's DB-API placeholder style; the parameters are a
        tuple for the positional styles and a dict for the named ones:

        - ``"format"`` (``%s``, tuple) or ``"pyformat"`` (``%(name)s``, dict): psycopg 3,
          psycopg2, PyMySQL, mysqlclient; each ``%`` of the text is written ``%%``.
        - ``"qmark"`` (``?``, tuple) or ``"named"`` (``:name``, dict): sqlite3.
        - ``"sqlalchemy"`` (``:name``, dict, each ``:`` of the text written ``\\:``):
          ``conn.execute(sqlalchemy.text(sql), params)`` on any SQLAlchemy engine.
        - ``None`` (the default): the broker's own driver, asyncpg's ``$1`` on PostgreSQL,
          aiomysql's ``%s`` on MySQL, sqlite3's ``?`` on SQLite (a tuple).

        Named parameters are the columns' names where those are plain identifiers (else
        ``p1``, ``p2``... by position). Values are what the database's drivers bind as
        trinbox writes them: aware UTC datetimes on PostgreSQL, naive UTC on MySQL, UTC text
        (``2026-11-29 20:37:00.000000``) on SQLite, the payload as the codec's bytes, the
        headers as JSON text (an object, its names sorted). On the database clock a
        RetryAfter field left out is the server's now plus the delay, bound in microseconds
        under ``delay_us`` (the text reads the server's clock). Rows
        written this way wake no subscription: they are seen at the next poll (or, on
        PostgreSQL, announce them with ``SELECT pg_notify('<table>', '<group>')``).

        With ``unique`` (the dedup key of a table with a ``Unique`` field) the insert writes
        nothing when an unfinished row holds the key: ``ON CONFLICT ... DO NOTHING RETURNING
        id`` on PostgreSQL and SQLite (a row back with the new id, none for a duplicate),
        ``ON DUPLICATE KEY UPDATE id = id`` on MySQL (0 rows affected for a duplicate, 1 for
        a new row, where the driver counts changed rows, as PyMySQL and mysqlclient do).
        """
        spec = spec_of(row_type)
        style = None if paramstyle is None else check_paramstyle(paramstyle)
        values = self._values(spec, message, columns, delay, headers, unique)
        sql = (
            self.dialect.insert_sql(spec)
            if unique is None
            else self.dialect.unique_insert_sql(spec)
        )
        # The text is made of the declaration's names and the dialect's own text, never of a
        # value (those are the parameters): a LiteralString, as psycopg's typing asks of SQL.
        if style is None:
            statement = self.dialect.render("insert", sql)
            return _literal(statement.sql), statement.bind(values)
        text, params = render_for_driver(sql, values, style)
        return _literal(text), params  # type: ignore[return-value]

    def tx_on(self, conn: Connection, *, ended: str = TX_DELIVERY) -> Tx[D]:
        """The ``Tx`` of a transaction open on ``conn`` (a delivery's, unless ``ended`` says
        otherwise): its publishes write through this broker, on ``conn``."""
        return Tx(
            conn,
            self._write_in,
            self.dialect.style,
            ended=ended,
            write_named=self._write_named_in,
            write_many=self._write_many_in,
        )

    async def _write_in(
        self,
        conn: Connection,
        row_type: type[Inbox[Any, Any]],
        message: object = None,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: object = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Written:
        """A ``Tx``'s publish: the row written in its transaction, where it went, and what
        the publish returns."""
        spec = spec_of(row_type)
        found = await self._write(
            spec, message, delay, columns, headers, conn, unique, on_duplicate
        )
        return spec.qualified_name, group_of(spec, columns), found

    async def _write_named_in(
        self,
        conn: Connection,
        to: str | Route[Any],
        message: object,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: object = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Written:
        """A ``Tx``'s publish by name: the row written in its transaction, where it went, and
        what the publish returns."""
        spec, fields = self._routed(to, columns, where="tx.publish_named")
        found = await self._write(spec, message, delay, fields, headers, conn, unique, on_duplicate)
        return spec.qualified_name, group_of(spec, fields), found

    # -- writing a published row -----------------------------------------------------------------

    def _values(
        self,
        spec: TableSpec,
        message: object,
        columns: dict[str, object],
        delay: timedelta | None,
        headers: object,
        unique: object = None,
    ) -> dict[str, object]:
        return row_values(
            self.dialect, spec, message, columns, delay, self.clock(), self.codec, headers, unique
        )

    async def _write(
        self,
        spec: TableSpec,
        message: object,
        delay: timedelta | None,
        columns: dict[str, object],
        headers: object,
        conn: Connection | None = None,
        unique: object = None,
        on_duplicate: OnDuplicate = "return",
    ) -> Published:
        """Write the row on ``conn`` (inside a transaction), else on a pooled connection given
        back after; with hooks, reported to them with its time and error. With a dedup key,
        the row that holds it (``Duplicate`` for a held one with ``on_duplicate="raise"``)."""
        row = _Row(spec, message, delay, columns, headers, unique, on_duplicate)
        events = self.events
        if events is None:
            return await self._write_on(conn, row)
        start, t0 = now_ns(), time.perf_counter()
        error: BaseException | None = None
        try:
            if spec.headers is not None:
                added = events.publishing(
                    PublishStart(
                        spec.qualified_name,
                        group_of(spec, columns),
                        self.backend.system,
                        conn is not None,
                        start,
                        own_headers(headers),
                    )
                )
                row.headers = with_added(added, headers)
            return await self._write_on(conn, row)
        except BaseException as exc:
            error = exc
            raise
        finally:
            events.published(
                PublishEvent(
                    spec.qualified_name,
                    group_of(spec, columns),
                    self.backend.system,
                    conn is not None,
                    start,
                    time.perf_counter() - t0,
                    error,
                )
            )

    async def _write_on(self, conn: Connection | None, row: _Row) -> Published:
        return await self._retried(
            conn,
            row.spec,
            keyed=row.unique is not None,
            texts=("publish", "the publish", "a publish with a dedup key"),
            write=lambda on: self._insert(on, row),
        )

    async def _retried(
        self,
        conn: Connection | None,
        spec: TableSpec,
        *,
        keyed: bool,
        texts: tuple[str, str, str],
        write: Callable[[Connection], Awaitable[T]],
    ) -> T:
        """``write`` on ``conn`` (inside the caller's transaction), else on a pooled
        connection given back after; with dedup keys, written again after a deadlock on the
        unique index (MySQL), which a caller's transaction cannot be. ``texts``: the call,
        what it writes, and what retries, as the messages name them."""
        where, what, retries = texts
        if conn is not None:
            try:
                return await write(conn)
            except LockNotAvailable as exc:
                if not keyed or exc.code not in self.dialect.unique_deadlocks:
                    raise
                msg = (
                    f"{where} into {spec.label}: a deadlock on the unique index of the "
                    f"Unique field {_field(spec)} ({exc}) ended the caller's transaction "
                    f"(the database rolled it back whole), so {what} cannot be retried "
                    f"inside it; retry the whole transaction"
                )
                raise LockNotAvailable(msg, statement=exc.statement, code=exc.code) from exc
        for tries in range(1, UNIQUE_TRIES + 1):
            own = await self.pool.acquire(where)
            try:
                return await write(own)
            except LockNotAvailable as exc:
                # A deadlock on the unique index rolled the one statement back: write again.
                if not keyed or exc.code not in self.dialect.unique_deadlocks:
                    raise
                if tries == UNIQUE_TRIES:
                    msg = (
                        f"{where} into {spec.label}: {retries} retries a deadlock on the "
                        f"unique index of the Unique field {_field(spec)} {UNIQUE_TRIES} "
                        f"times, found one at each try ({exc}); publish again, or publish "
                        f"the key from fewer writers at once"
                    )
                    raise LockNotAvailable(msg, statement=exc.statement, code=exc.code) from exc
                publish_log.info(
                    "%s into %s: a deadlock on the unique index, writing again (try %d)",
                    where,
                    spec.label,
                    tries + 1,
                )
            finally:
                await give_back(self.pool, own)
        raise AssertionError("unreachable: the last try returns or raises")

    async def _insert(self, conn: Connection, row: _Row) -> Published:
        """Insert the row on ``conn``; with ``listen_notify``, announce it to other processes
        (a duplicate wrote nothing, and announces nothing)."""
        spec = row.spec
        values = self._values(spec, row.message, row.columns, row.delay, row.headers, row.unique)
        found = NOT_READ
        if row.unique is None:
            statement = self.dialect.insert(spec)
            await conn.execute(statement.sql, statement.bind(values))
        else:
            found = await self._insert_unique(conn, row, values)
            if found.duplicate:
                if row.on_duplicate == "raise":
                    msg = (
                        f"publish into {spec.label}: a dedup key is held by one unfinished "
                        f"row at a time, found {found.key!r} held by the row {found.id!r} "
                        f"and nothing written; leave the message to that row, or publish "
                        f'with on_duplicate="return" to get it back'
                    )
                    key = str(found.key)
                    raise Duplicate(msg, id=found.id, key=key, table=spec.qualified_name)
                return found
        await self._announce(conn, spec, group_of(spec, row.columns))
        return found

    async def _announce(self, conn: Connection, spec: TableSpec, group: str | None) -> None:
        """With ``listen_notify``, tell other processes that ``group`` of the table has a new
        row (inside a transaction, PostgreSQL delivers it at the commit)."""
        notify = self.dialect.notify_statement()
        if not self.listen_notify or notify is None:
            return
        # Read before the NOTIFY: a failed statement may end what it ran in.
        in_transaction = conn.in_transaction
        try:
            await conn.execute(
                notify.sql, notify.bind({"channel": spec.qualified_name, "group": group or ""})
            )
        except DatabaseError as exc:
            if in_transaction:
                raise aborted_by_notify(spec, exc) from exc
            # In autocommit the insert committed on its own: only the wake-up is lost.
            publish_log.warning(
                "NOTIFY for %s failed; the row is written, and other processes see it at "
                "their next poll",
                spec.label,
                exc_info=True,
            )

    async def _insert_unique(
        self, conn: Connection, row: _Row, values: dict[str, object]
    ) -> Published:
        """Write the row unless an unfinished row holds its key, else read that row's id. The
        holder may finish in between (the key is free again): then write again, at most
        ``UNIQUE_TRIES`` times."""
        spec = row.spec
        plan = self.dialect.unique_insert(spec)
        key_column = spec.unique
        assert key_column is not None
        key = str(values[self.dialect.slot_of(key_column)])
        given_id = None if spec.id.generated else row.columns.get(spec.id.field)
        refused: IntegrityError | None = None
        for _ in range(UNIQUE_TRIES):
            insert = plan.insert
            if plan.returns_id:
                rows = await conn.fetch(insert.sql, insert.bind(values))
                if rows:
                    return Published(rows[0][0], False, key)
            else:
                # A held key fails the insert with a duplicate key error, and so does another
                # unique constraint's: the read of the key's holder tells them apart.
                try:
                    if plan.last_id is None or not spec.id.generated:
                        await conn.execute(insert.sql, insert.bind(values))
                        return Published(given_id, False, key)
                    results = await conn.script(
                        [
                            Op("execute", insert.sql, insert.bind(values)),
                            Op("fetch", plan.last_id.sql, ()),
                        ]
                    )
                    last = results[1]
                    assert isinstance(last, list)
                    return Published(last[0][0], False, key)
                except IntegrityError as exc:
                    refused = exc
            held = await conn.fetch(plan.holder.sql, plan.holder.bind(values))
            if held:
                return Published(held[0][0], True, key)
        if refused is not None:
            raise refused
        msg = (
            f"publish into {spec.label}: a publish with a dedup key writes its row or reads "
            f"the row holding the key, found {key!r} held at each of {UNIQUE_TRIES} writes "
            f"and free at each read (its holders finished in between); publish again"
        )
        raise DatabaseError(msg, statement=plan.insert.sql)


def _pauses(pauses: object) -> Pauses | None:
    if pauses is None or isinstance(pauses, Pauses):
        return pauses
    msg = (
        f"a broker's pause table is a trinbox.Pauses, found pauses={pauses!r}; pass "
        f"pauses=Pauses('app_pauses')"
    )
    raise DeclarationError(msg)


def _pause_group(where: str, spec: TableSpec, group: object) -> str:
    """The pause table's ``grp`` of a pause of ``group``: ``WHOLE`` for the whole table, the
    group's name for a table with a ``Group`` field; else ``DeclarationError``."""
    if group is None:
        return WHOLE
    if spec.group is None:
        msg = (
            f"{where}: group= pauses one group of a table with a Group field, found "
            f"{spec.label} without one; leave group= out to pause the table"
        )
        raise DeclarationError(msg)
    if not isinstance(group, str) or not group:
        msg = (
            f"{where}: a group is named by a non-empty str, found group={group!r}; name the "
            f"group, as InboxQueue(Row, 'name') does, or leave group= out to pause the table"
        )
        raise DeclarationError(msg)
    check_group_name(where, group)
    return group


class _Row:
    """A publish's row, as the write passes it down (the headers with what hooks added)."""

    __slots__ = ("columns", "delay", "headers", "message", "on_duplicate", "spec", "unique")

    def __init__(
        self,
        spec: TableSpec,
        message: object,
        delay: timedelta | None,
        columns: dict[str, object],
        headers: object,
        unique: object,
        on_duplicate: OnDuplicate,
    ) -> None:
        self.spec = spec
        self.message = message
        self.delay = delay
        self.columns = columns
        self.headers = headers
        self.unique = unique
        self.on_duplicate = on_duplicate


def _field(spec: TableSpec) -> str:
    return "" if spec.unique is None else spec.unique.field


def _literal(sql: str) -> LiteralString:
    """Text trinbox rendered from a declaration's names and its own SQL, never from a value:
    a LiteralString for the type checkers that tell the two apart."""
    return sql  # pyright: ignore[reportReturnType]
