"""PostgreSQL through asyncpg, inside Trio by way of trio-asyncio.

Each method is one hop into asyncio (:func:`~._asyncio.aio`). Transactions are plain
statements (``BEGIN …`` / ``COMMIT`` / ``ROLLBACK``), never asyncpg's ``transaction()``
context manager, whose rollback a Trio cancel would cut short
(docs/drivers.md#g1-transaction-cancel).

A Trio cancel of a running statement makes asyncpg send the server a cancel request; the
connection stays usable, and its next statement waits for the server to acknowledge the
cancel. The cut connection is marked, and the pool rolls it back (shielded) before anyone
uses it again, so no lock outlives a cancelled transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ParamSpec, TypeVar
from urllib.parse import unquote, urlsplit

import asyncpg
import trio

from .._bounds import CONNECT
from ..errors import (
    ConnectError,
    ConnectionLost,
    DatabaseError,
    IntegrityError,
    LockNotAvailable,
)
from ._asyncio import (
    CLEANUP_TIMEOUT,
    AsyncioPool,
    Loop,
    aio_on,
    cleanup,
    input_waiting,
    open_on,
    require_loop,
)
from ._base import Op, Record, Result, failing, script_failed, stops
from ._urls import port_of, redacted

__all__ = ["PgConnection", "PgPool", "open_pool"]

logger = logging.getLogger("trinbox.drivers.postgres")

P = ParamSpec("P")
T = TypeVar("T")

if TYPE_CHECKING:
    RawConnection = asyncpg.Connection[asyncpg.Record]

#: Called on the Trio thread with (channel, payload) for each NOTIFY; must not block.
NotifyCallback = Callable[[str, str], None]

#: Statements each connection keeps prepared, asyncpg's default (0 with ``statement_cache=False``).
STATEMENT_CACHE_SIZE = 100

# -- errors -----------------------------------------------------------------------------------

_BY_SQLSTATE: dict[str, type[DatabaseError]] = {
    "23000": IntegrityError,  # integrity_constraint_violation
    "23001": IntegrityError,  # restrict_violation
    "23502": IntegrityError,  # not_null_violation
    "23503": IntegrityError,  # foreign_key_violation
    "23505": IntegrityError,  # unique_violation
    "23514": IntegrityError,  # check_violation
    "23P01": IntegrityError,  # exclusion_violation
    "40001": LockNotAvailable,  # serialization_failure
    "40P01": LockNotAvailable,  # deadlock_detected
    "55P03": LockNotAvailable,  # lock_not_available (NOWAIT, lock_timeout)
    "57P01": ConnectionLost,  # admin_shutdown (pg_terminate_backend)
    "57P02": ConnectionLost,  # crash_shutdown
    "57P03": ConnectionLost,  # cannot_connect_now
    "08000": ConnectionLost,  # connection_exception
    "08003": ConnectionLost,  # connection_does_not_exist
    "08006": ConnectionLost,  # connection_failure
}
# By SQLSTATE class, for the codes above that are not listed one by one.
_BY_CLASS: dict[str, type[DatabaseError]] = {"23": IntegrityError, "08": ConnectionLost}

# What asyncpg raises; none of it reaches trinbox's callers.
_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
)


# A named statement of asyncpg's statement cache missing on the server session, or its name
# taken: the session is not the one it was prepared on (PgBouncer's transaction pooling).
_STATEMENT_NAME_ERRORS = (
    asyncpg.InvalidSQLStatementNameError,  # 26000
    asyncpg.DuplicatePreparedStatementError,  # 42P05
)
_PGBOUNCER_HINT = (
    "the server session is not the one this connection prepared its statements on; when the "
    "URL goes through PgBouncer in transaction pooling, give the broker "
    "SqlBroker.postgres(..., pgbouncer='transaction'), which keeps no prepared statement"
)


def _busy(exc: Exception) -> bool:
    """asyncpg's "another operation is in progress" (InterfaceError before a statement is
    sent, InternalClientError while its protocol changes state): trinbox runs one statement
    at a time on a connection, so the protocol is stuck in an operation the server ended, as
    after pg_terminate_backend. The connection never serves again."""
    return (
        isinstance(exc, asyncpg.InterfaceError | asyncpg.InternalClientError)
        and "another operation" in str(exc)
        and "in progress" in str(exc)
    )


def _translate(exc: Exception, sql: str, *, closed: bool) -> DatabaseError:
    code: str | None = None
    kind: type[DatabaseError] = DatabaseError
    if isinstance(exc, asyncpg.PostgresError):
        code = exc.sqlstate
        kind = _BY_SQLSTATE.get(code) or _BY_CLASS.get(code[:2], DatabaseError)
    elif isinstance(exc, OSError) or _busy(exc):
        kind = ConnectionLost
    if closed:
        kind = ConnectionLost
    message: object = exc
    detail = ""
    if isinstance(exc, asyncpg.PostgresError):
        # str() of a server error appends "\nDETAIL:  .." (and "\nHINT:  .."): keep the
        # message on one line, with the detail once, in parentheses.
        message = exc.args[0] if exc.args else exc
        detail = f" ({exc.detail})" if exc.detail else ""
        if isinstance(exc, _STATEMENT_NAME_ERRORS):
            # asyncpg's hint for these (a page on pgbouncer and statement_cache_size, which
            # trinbox's callers do not set themselves) gives way to the broker's setting.
            detail += f" (hint: {_PGBOUNCER_HINT})"
        elif exc.hint:
            detail += f" (hint: {exc.hint})"
    text = f"{type(exc).__name__}: {message}{detail} (while running: {sql})"
    return kind(text, statement=sql, code=code)


# -- parameters and results -------------------------------------------------------------------


def _param(value: object) -> object:
    # timestamptz takes aware datetimes; a naive one is read as UTC.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _params(params: Sequence[object]) -> tuple[object, ...]:
    if not params:
        return ()
    return tuple(_param(p) for p in params)


def _rowcount(status: str) -> int:
    """The count of a command tag: "UPDATE 3", "INSERT 0 1", "SELECT 2"; 0 for "BEGIN"."""
    last = status.rpartition(" ")[2]
    return int(last) if last.isdigit() else 0


# -- asyncio islands (each is one hop) --------------------------------------------------------


async def _execute(raw: RawConnection, sql: str, args: tuple[object, ...]) -> int:
    return _rowcount(await raw.execute(sql, *args))


async def _fetch(raw: RawConnection, sql: str, args: tuple[object, ...]) -> list[Record]:
    return [tuple(row) for row in await raw.fetch(sql, *args)]


async def _script(
    raw: RawConnection,
    ops: Sequence[Op],
    until_empty: bool,
    progress: list[str],
    results: list[Result],
) -> list[Result]:
    for op in ops:
        progress.append(op.sql or op.kind.upper())
        result: Result
        if op.kind == "fetch":
            result = await _fetch(raw, op.sql, _params(op.params))
        elif op.kind == "commit":
            await _commit(raw)
            result = None
        else:
            result = await _execute(raw, op.sql, _params(op.params))
        results.append(result)
        if until_empty and stops(result):
            break
    return results


async def _prepare(raw: RawConnection, sql: str) -> None:
    await raw.prepare(sql)


async def _commit(raw: RawConnection) -> None:
    # COMMIT of a transaction an earlier error aborted rolls back and says so; make it loud.
    if await raw.execute("COMMIT") == "ROLLBACK":
        msg = (
            "COMMIT rolled back: an earlier statement of the transaction failed, so nothing "
            "of it was kept; roll back and retry the whole transaction"
        )
        raise DatabaseError(msg, statement="COMMIT", code="25P02")


async def _add_listener(raw: RawConnection, channel: str, listener: _Listener) -> None:
    await raw.add_listener(channel, listener)


async def _remove_listeners(raw: RawConnection, listeners: Sequence[tuple[str, _Listener]]) -> None:
    for channel, listener in listeners:
        await raw.remove_listener(channel, listener)


async def _reset(
    raw: RawConnection, rollback: bool, listeners: Sequence[tuple[str, _Listener]]
) -> bool:
    await _remove_listeners(raw, listeners)
    if rollback:
        # Waits first for the server to acknowledge a cancel still in flight.
        await raw.execute("ROLLBACK")
    return not raw.is_in_transaction()


async def _open(url: str, limit: float, cache_size: int) -> RawConnection:
    """Connect within ``limit`` seconds, every step together (asyncpg's own timeout is
    counted per address it tries)."""
    return await asyncio.wait_for(
        asyncpg.connect(url, timeout=limit, statement_cache_size=cache_size), limit
    )


def _terminate(raw: RawConnection) -> None:
    raw.terminate()


async def _close(raw: RawConnection) -> None:
    try:
        await raw.close(timeout=CLEANUP_TIMEOUT)
    except Exception:  # asyncpg has already aborted the connection
        logger.debug("closing a connection failed; it was terminated", exc_info=True)


# -- the connection ---------------------------------------------------------------------------


class _Listener:
    """An asyncpg notification listener that hands (channel, payload) to a Trio-side
    callback. asyncpg calls it from the trio-asyncio loop, which runs on the Trio thread."""

    __slots__ = ("callback",)

    def __init__(self, callback: NotifyCallback) -> None:
        self.callback = callback

    def __call__(self, con_ref: object, pid: int, channel: str, payload: object, /) -> None:
        try:
            self.callback(channel, str(payload))
        except Exception:
            logger.exception("a NOTIFY callback for channel %r failed", channel)


class PgConnection:
    """One asyncpg connection driven from Trio."""

    def __init__(self, raw: RawConnection, loop: Loop) -> None:
        self._raw = raw
        self._loop = loop
        # A statement was cut (Trio cancel) or failed oddly: roll back before reuse.
        self._interrupted = False
        self._lost = False
        self._listeners: list[tuple[str, _Listener]] = []

    @property
    def in_transaction(self) -> bool:
        return self._raw.is_in_transaction()

    @property
    def server_pid(self) -> int:
        """The backend's process id (``pg_backend_pid()``)."""
        return self._raw.get_server_pid()

    @property
    def alive(self) -> bool:
        return not self._lost and not self._raw.is_closed()

    @property
    def ended(self) -> bool:
        """Whether the server ended this idle session (its socket has input waiting: the
        FATAL of pg_terminate_backend or a shutdown, then the end of the stream)."""
        # asyncpg's stubs leave the connection's private transport out.
        return input_waiting(getattr(self._raw, "_transport", None))

    async def _run(
        self,
        sql: str | list[str],
        fn: Callable[P, Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """One hop running ``fn``; ``sql`` names the statement in errors (for a script, the
        list its steps append to as they start: the last is the one that failed)."""
        try:
            return await aio_on(self._loop, fn, *args, **kwargs)
        except _DRIVER_ERRORS as exc:
            error = _translate(exc, failing(sql), closed=self._raw.is_closed())
            if isinstance(error, ConnectionLost):
                self._lost = True
            raise error from exc
        except DatabaseError:
            raise  # raised by the island itself: the connection is in a known state
        except BaseException:
            self._interrupted = True
            raise

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return await self._run(sql, _execute, self._raw, sql, _params(params))

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        return await self._run(sql, _fetch, self._raw, sql, _params(params))

    async def begin(self, sql: str) -> None:
        await self._run(sql, _execute, self._raw, sql, ())

    async def commit(self) -> None:
        await self._run("COMMIT", _commit, self._raw)

    async def script(self, ops: Sequence[Op], *, until_empty: bool = False) -> list[Result]:
        progress: list[str] = []
        results: list[Result] = []
        try:
            return await self._run(
                progress, _script, self._raw, ops, until_empty, progress, results
            )
        except DatabaseError as exc:
            script_failed(exc, progress, results)
            raise

    async def rollback(self) -> None:
        await self._run("ROLLBACK", _execute, self._raw, "ROLLBACK", ())

    async def prepare(self, sql: str) -> None:
        await self._run(sql, _prepare, self._raw, sql)

    async def listen(self, channel: str, callback: NotifyCallback) -> None:
        """Call ``callback(channel, payload)`` on the Trio thread for each NOTIFY on
        ``channel`` while this connection listens. The callback must not block (feed a
        memory channel with ``send_nowait``). Releasing the connection stops listening."""
        listener = _Listener(callback)
        self._listeners.append((channel, listener))
        await self._run(f"LISTEN {channel}", _add_listener, self._raw, channel, listener)

    async def wait_lost(self) -> None:
        """Return once the connection is lost: the server ended the session, or the socket
        broke (the LISTEN connection waits on this)."""
        lost = trio.Event()
        self._raw.add_termination_listener(lambda _conn: lost.set())
        if self.alive:
            await lost.wait()
        self._lost = True

    async def unlisten(self, channel: str) -> None:
        """Stop every callback listening on ``channel``."""
        mine = [(c, cb) for c, cb in self._listeners if c == channel]
        self._listeners = [(c, cb) for c, cb in self._listeners if c != channel]
        await self._run(f"UNLISTEN {channel}", _remove_listeners, self._raw, mine)

    @property
    def clean(self) -> bool:
        """Nothing to undo before the next user: no transaction, listener or cut statement."""
        return not (self._interrupted or self._listeners or self._raw.is_in_transaction())

    async def _reset(self) -> bool:
        listeners, self._listeners = self._listeners, []
        rollback = self._interrupted or self._raw.is_in_transaction()
        if not rollback and not listeners:
            return True  # the common case costs no round trip
        try:
            ok = await aio_on(self._loop, _reset, self._raw, rollback, listeners)
        except Exception:  # the pool terminates the connection
            logger.warning("rolling back a connection failed; terminating it", exc_info=True)
            return False
        self._interrupted = False
        return ok

    async def close(self) -> None:
        """Close gracefully, shielded; terminate if that takes over CLEANUP_TIMEOUT."""
        if not self._raw.is_closed() and not await cleanup(
            "closing", aio_on, self._loop, _close, self._raw
        ):
            self.terminate()

    def terminate(self) -> None:
        self._raw.terminate()


# -- the pool ---------------------------------------------------------------------------------


def _identity(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = port_of(url, server="PostgreSQL", default=5432)
    database = unquote(parts.path.lstrip("/")) or unquote(parts.username or "") or "postgres"
    return f"postgres:{host}:{port}/{database}"


class PgPool(AsyncioPool[PgConnection]):
    """Up to ``max_size`` asyncpg connections to one database.

    ``statement_cache=False`` turns asyncpg's statement cache off (``statement_cache_size=0``),
    for PgBouncer in transaction pooling: each statement is then parsed, bound and run as one
    unnamed statement in a single message batch, so no named statement is left on a server
    connection that PgBouncer hands to another client next (where the cached name would be
    missing, or already taken). ``prepare`` (the startup checks) prepares unnamed statements
    too.
    """

    def __init__(
        self,
        url: str,
        *,
        max_size: int,
        connect_timeout: float = CONNECT,
        statement_cache: bool = True,
    ) -> None:
        super().__init__(max_size=max_size, identity=_identity(url), conn_type=PgConnection)
        self._url = url
        self._connect_timeout = connect_timeout
        self._statement_cache_size = STATEMENT_CACHE_SIZE if statement_cache else 0

    async def _connect(self) -> PgConnection:
        timeout = self._connect_timeout
        try:
            raw = await open_on(
                self._loop, _terminate, _open, self._url, timeout, self._statement_cache_size
            )
        except Exception as exc:
            code = exc.sqlstate if isinstance(exc, asyncpg.PostgresError) else None
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):  # asyncio's carries no message
                parts = urlsplit(self._url)
                where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
                reason = (
                    f"timed out after {timeout:g} s connecting to {where} (a connection "
                    f"opens within {timeout:g} s, the server's greeting and authentication "
                    "included); check that a PostgreSQL server listens there and answers"
                )
            msg = f"could not connect to PostgreSQL at {redacted(self._url)}: {reason}"
            raise ConnectError(msg, statement="connect", code=code) from exc
        return PgConnection(raw, self._loop)

    def _alive(self, conn: PgConnection) -> bool:
        return conn.alive

    def _ended(self, conn: PgConnection) -> bool:
        return conn.ended

    def _clean(self, conn: PgConnection) -> bool:
        return conn.clean

    async def _reset(self, conn: PgConnection) -> bool:
        return await conn._reset()

    async def _close(self, conn: PgConnection) -> None:
        await conn.close()

    def _terminate(self, conn: PgConnection) -> None:
        conn.terminate()


async def open_pool(
    url: str, *, max_size: int, connect_timeout: float = CONNECT, statement_cache: bool = True
) -> PgPool:
    """A pool over ``url`` (``postgresql://user:password@host:port/database``), with one
    connection opened now so that a wrong URL fails at startup (ConnectError). Each connect
    takes at most ``connect_timeout`` seconds. Runs inside a trio-asyncio loop, and the pool
    must be closed inside it. ``statement_cache=False``: see :class:`PgPool`."""
    require_loop("PostgreSQL")
    pool = PgPool(
        url, max_size=max_size, connect_timeout=connect_timeout, statement_cache=statement_cache
    )
    conn = await pool.acquire()
    await pool.give_back(conn)
    return pool
