"""MySQL 8.0.1+ and MariaDB 10.6+ through aiomysql, inside Trio by way of trio-asyncio.

Each method is one hop into asyncio (:func:`~._asyncio.aio`). Connections run in autocommit
mode; a transaction is opened by the dialect's text (``SET TRANSACTION …``, followed here by
``START TRANSACTION``). Row counts are rows *matched* (``CLIENT.FOUND_ROWS``), as on
PostgreSQL and SQLite: an UPDATE that writes a value a row already has still counts it.

Cancellation (docs/drivers.md#g4-mariadb-cancel): when Trio cancels a running statement,
aiomysql closes its socket but the server goes on running the statement, with its locks. The
cut connection is never used again: ``KILL CONNECTION`` is sent from a fresh connection
(shielded, bounded by CLEANUP_TIMEOUT), and the kill waits until the server has let go of the
session, so the cancel only reaches the caller once the session's locks are free.

Times: DATETIME(6) columns hold naive UTC. Aware datetimes are sent as naive UTC; the
session runs at ``time_zone = '+00:00'``; results come back naive.

SQL mode: every session runs at :data:`SQL_MODE`, whatever the server's global ``sql_mode``
(see there why).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar, cast
from urllib.parse import unquote, urlsplit

import aiomysql
import pymysql
from pymysql.constants import CLIENT, ER, SERVER_STATUS

from .._bounds import CONNECT
from ..errors import (
    ConnectError,
    ConnectionLost,
    DatabaseError,
    IntegrityError,
    LockNotAvailable,
)
from ._asyncio import AsyncioPool, Loop, aio_on, cleanup, input_waiting, open_on, require_loop
from ._base import Op, Record, Result, failing, script_failed, stops
from ._urls import port_of, redacted

__all__ = ["MySqlConnection", "MySqlPool", "open_pool"]

logger = logging.getLogger("trinbox.drivers.mysql")

P = ParamSpec("P")
T = TypeVar("T")

# Each session's sql_mode, set at connect: the server's global mode is the DBA's to choose,
# and some of its settings would break trinbox's SQL or data.
# - No NO_BACKSLASH_ESCAPES: arguments are escaped on the client, and aiomysql escapes bytes
#   with backslashes always (escape_bytes_prefixed; only str looks at the server's
#   NO_BACKSLASH_ESCAPES status flag). With it on, a quote in a payload ends the literal and
#   the rest of the payload runs as SQL (the connection allows several statements).
# - No ANSI_QUOTES, PIPES_AS_CONCAT, ...: SQL means what the dialect wrote.
# - STRICT_TRANS_TABLES: a value too long for its column is an error (1406), not a truncation
#   with a warning (a truncated group would leave a row that no claim selects).
# It is MySQL 8.0's default less ONLY_FULL_GROUP_BY (which MariaDB's default lacks, and which
# only refuses queries); each name exists on MySQL 8.0.1+ and MariaDB 10.6+ (no
# NO_AUTO_CREATE_USER: MySQL 8.0 removed it).
SQL_MODE = (
    "STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
    "NO_ENGINE_SUBSTITUTION"
)
# aiomysql runs the init command on every connection it opens, after authentication and
# before the connection is handed out (trinbox never reconnects a connection: a lost one is
# dropped and the pool opens a new one). One statement, one round trip; aiomysql's own
# sql_mode= argument would cost another, and it pastes the value in unquoted.
_SESSION_SETUP = f"SET SESSION sql_mode = '{SQL_MODE}', time_zone = '+00:00'"

# -- errors -----------------------------------------------------------------------------------

_BY_ERRNO: dict[int, type[DatabaseError]] = {
    1062: IntegrityError,  # ER_DUP_ENTRY
    1586: IntegrityError,  # ER_DUP_ENTRY_WITH_KEY_NAME
    1169: IntegrityError,  # ER_DUP_UNIQUE
    1216: IntegrityError,  # ER_NO_REFERENCED_ROW
    1217: IntegrityError,  # ER_ROW_IS_REFERENCED
    1451: IntegrityError,  # ER_ROW_IS_REFERENCED_2
    1452: IntegrityError,  # ER_NO_REFERENCED_ROW_2
    1048: IntegrityError,  # ER_BAD_NULL_ERROR
    1364: IntegrityError,  # ER_NO_DEFAULT_FOR_FIELD (a NOT NULL column left out)
    3819: IntegrityError,  # ER_CHECK_CONSTRAINT_VIOLATED (MySQL 8)
    4025: IntegrityError,  # ER_CONSTRAINT_FAILED (MariaDB CHECK)
    1205: LockNotAvailable,  # ER_LOCK_WAIT_TIMEOUT (also MariaDB's NOWAIT)
    1213: LockNotAvailable,  # ER_LOCK_DEADLOCK
    3572: LockNotAvailable,  # ER_LOCK_NOWAIT (MySQL 8)
    1053: ConnectionLost,  # ER_SERVER_SHUTDOWN
    1927: ConnectionLost,  # ER_CONNECTION_KILLED (MariaDB)
    4031: ConnectionLost,  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
    2006: ConnectionLost,  # CR_SERVER_GONE_ERROR
    2013: ConnectionLost,  # CR_SERVER_LOST
    2055: ConnectionLost,  # CR_SERVER_LOST_EXTENDED
}

# What aiomysql raises; none of it reaches trinbox's callers.
_DRIVER_ERRORS = (pymysql.err.MySQLError, OSError)


def _errno(exc: BaseException) -> int | None:
    errno = exc.args[0] if exc.args else None
    return errno if isinstance(errno, int) else None


def _translate(exc: Exception, sql: str, *, closed: bool) -> DatabaseError:
    errno = _errno(exc)
    kind = _BY_ERRNO.get(errno, DatabaseError) if errno is not None else DatabaseError
    if kind is DatabaseError and isinstance(exc, pymysql.err.IntegrityError):
        kind = IntegrityError
    if closed or isinstance(exc, OSError | pymysql.err.InterfaceError):
        kind = ConnectionLost
    message = exc.args[1] if errno is not None and len(exc.args) > 1 else exc
    text = f"{type(exc).__name__}: {message} (while running: {sql})"
    return kind(text, statement=sql, code=None if errno is None else str(errno))


# -- parameters -------------------------------------------------------------------------------


def _param(value: object) -> object:
    # DATETIME(6) holds naive UTC.
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _params(params: Sequence[object]) -> tuple[object, ...]:
    # Always a tuple, an empty one too: PyMySQL then reads "%%" as "%" (dialects/mysql.py).
    if not params:
        return ()
    return tuple(_param(p) for p in params)


_EXPLAINABLE = frozenset({"SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "WITH"})
_NOT_EXPLAINED = re.compile(r"\b(GET_LOCK|RELEASE_LOCK|RELEASE_ALL_LOCKS)\s*\(", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"%[%s]")
_COUNT_BEFORE = re.compile(r"\b(LIMIT|OFFSET)\s*$|\bLIMIT\s+%s\s*,\s*$", re.IGNORECASE)


def _explain_args(sql: str) -> tuple[object, ...] | None:
    """The arguments of ``EXPLAIN <sql>`` (NULL for each placeholder, 1 for a LIMIT or
    OFFSET), or None when the statement is one EXPLAIN cannot take or should not run."""
    words = sql.lstrip(" \t\r\n(").split(None, 1)
    if not words or words[0].upper() not in _EXPLAINABLE or _NOT_EXPLAINED.search(sql):
        return None
    args: list[object] = []
    for match in _PLACEHOLDER.finditer(sql):
        if match.group() == "%s":
            args.append(1 if _COUNT_BEFORE.search(sql, 0, match.start()) else None)
    return tuple(args)


# -- asyncio islands (each is one hop) --------------------------------------------------------


class _QuietCursor(aiomysql.Cursor):
    """aiomysql's cursor without its extra ``SHOW WARNINGS`` round trip after a statement
    that left notes, and the Python warnings it raised from them (EXPLAIN on MySQL 8
    always leaves one)."""

    async def _show_warnings(self, conn: object) -> None:
        return None


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    user: str
    password: str
    database: str


async def _open(target: _Target, limit: float = CONNECT) -> aiomysql.Connection:
    """Connect within ``limit`` seconds, every step together: the TCP open, the server's
    greeting, authentication and the session set-up (aiomysql's ``connect_timeout`` bounds
    only the TCP open, so a server that accepts and never greets would hang for ever). A
    connect cut short closes its socket."""
    raw = aiomysql.Connection(
        host=target.host,
        port=target.port,
        user=target.user,
        password=target.password,
        db=target.database,
        autocommit=True,
        charset="utf8mb4",
        client_flag=CLIENT.FOUND_ROWS,
        cursorclass=_QuietCursor,
        init_command=_SESSION_SETUP,
        connect_timeout=limit,
    )
    try:
        # aiomysql.connect() is this object's _connect(); called here, the object is at hand
        # to close when the connect is cut (by the bound, or by a cancel from Trio), and when
        # wait_for drops a connection that opened just as it was cancelled.
        await asyncio.wait_for(cast("Any", raw)._connect(), limit)
    except BaseException:
        raw.close()
        raise
    return raw


def _terminate(raw: aiomysql.Connection) -> None:
    raw.close()  # aiomysql's close is the socket's, at once


def _backslashes_off(raw: aiomysql.Connection) -> bool:
    """Whether the session's sql_mode has NO_BACKSLASH_ESCAPES (the server reports it in the
    status flags of each reply): set by a statement run on the session since it opened."""
    return bool((raw.server_status or 0) & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)


def _bind(cur: aiomysql.Cursor, sql: str, args: tuple[object, ...]) -> str:
    """The statement with its arguments in (PyMySQL interpolates on the client)."""
    conn = cur.connection
    if args and conn is not None and _backslashes_off(conn):
        msg = (
            "this connection's sql_mode has NO_BACKSLASH_ESCAPES (a statement run on it "
            "changed sql_mode), under which aiomysql's escaping of bytes is wrong: no "
            "arguments are bound on it. Leave sql_mode as trinbox sets it; the connection "
            "is closed when it goes back to the pool"
        )
        raise DatabaseError(msg, statement=sql)
    try:
        return cur.mogrify(sql, args)
    except (TypeError, ValueError) as exc:
        msg = (
            f"could not bind {len(args)} argument(s) to the statement: {exc}; each argument "
            "needs one %s, and a literal % is written %%"
        )
        raise DatabaseError(msg, statement=sql) from exc


async def _execute(raw: aiomysql.Connection, sql: str, args: tuple[object, ...]) -> int:
    async with raw.cursor() as cur:
        return await cur.execute(_bind(cur, sql, args))


async def _fetch(raw: aiomysql.Connection, sql: str, args: tuple[object, ...]) -> list[Record]:
    async with raw.cursor() as cur:
        await cur.execute(_bind(cur, sql, args))
        return list(await cur.fetchall())


async def _begin(raw: aiomysql.Connection, sql: str) -> None:
    async with raw.cursor() as cur:
        await cur.execute(_bind(cur, sql, ()))
        if sql.lstrip()[:15].upper() == "SET TRANSACTION":
            # SET TRANSACTION sets the level of the next transaction only: open it now.
            await cur.execute("START TRANSACTION")


async def _script(
    raw: aiomysql.Connection,
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
        elif op.kind == "begin":
            await _begin(raw, op.sql)
            result = None
        elif op.kind == "commit":
            await raw.commit()
            result = None
        else:
            result = await _execute(raw, op.sql, _params(op.params))
        results.append(result)
        if until_empty and stops(result):
            break
    return results


async def _commit(raw: aiomysql.Connection) -> None:
    await raw.commit()


async def _rollback(raw: aiomysql.Connection) -> None:
    await raw.rollback()


async def _close(raw: aiomysql.Connection) -> None:
    try:
        await raw.ensure_closed()
    finally:
        raw.close()


async def _kill(target: _Target, thread_id: int) -> None:
    """``KILL CONNECTION`` from a fresh connection, then wait until the server has ended the
    session (rolled back its transaction, freed its locks): KILL only flags the session."""
    killer = await _open(target)
    try:
        async with killer.cursor() as cur:
            try:
                await cur.execute("KILL CONNECTION %s", (thread_id,))
            except pymysql.err.MySQLError as exc:
                if _errno(exc) == ER.NO_SUCH_THREAD:
                    return
                raise
            pause = 0.001
            while await cur.execute(
                "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = %s", (thread_id,)
            ):
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.05)
    finally:
        killer.close()


# -- the connection ---------------------------------------------------------------------------


class MySqlConnection:
    """One aiomysql connection driven from Trio."""

    def __init__(self, raw: aiomysql.Connection, target: _Target, loop: Loop) -> None:
        self._raw = raw
        self._loop = loop
        self._target = target
        self._thread_id = raw.thread_id()
        # Cut by a cancel (and killed), or lost: never used again.
        self._cut = False
        self._lost = False

    @property
    def in_transaction(self) -> bool:
        return self._raw.get_transaction_status()

    @property
    def thread_id(self) -> int:
        """The server's id of this session (``CONNECTION_ID()``, the processlist ID)."""
        return self._thread_id

    @property
    def alive(self) -> bool:
        # A session switched to NO_BACKSLASH_ESCAPES binds no arguments (_bind): not reused.
        raw = self._raw
        return not self._cut and not self._lost and not raw.closed and not _backslashes_off(raw)

    @property
    def ended(self) -> bool:
        """Whether the server ended this idle session (its socket has input waiting: the
        error packet of KILL or wait_timeout, then the end of the stream)."""
        writer = self._raw._writer
        return writer is None or input_waiting(writer.transport)

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
        if self._cut:
            msg = (
                f"this connection was cut by a cancel while running a statement and killed "
                f"(thread {self._thread_id}); return it to the pool and take another"
            )
            raise ConnectionLost(msg, statement=failing(sql))
        try:
            return await aio_on(self._loop, fn, *args, **kwargs)
        except _DRIVER_ERRORS as exc:
            error = _translate(exc, failing(sql), closed=self._raw.closed)
            if isinstance(error, ConnectionLost):
                self._lost = True
            raise error from exc
        except DatabaseError:
            raise  # raised by the island itself: the connection is in a known state
        except BaseException:
            # A cancel (or anything unexpected) cut the statement: the server may still be
            # running it, with its locks (G4). End the session before the cancel goes on.
            await self._cut_off()
            raise

    async def _cut_off(self) -> None:
        self._cut = True
        self._raw.close()
        what = f"KILL CONNECTION {self._thread_id} (a cancelled statement)"
        await cleanup(what, aio_on, self._loop, _kill, self._target, self._thread_id)

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return await self._run(sql, _execute, self._raw, sql, _params(params))

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        return await self._run(sql, _fetch, self._raw, sql, _params(params))

    async def begin(self, sql: str) -> None:
        await self._run(sql, _begin, self._raw, sql)

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
        await self._run("ROLLBACK", _rollback, self._raw)

    async def prepare(self, sql: str) -> None:
        """Check that ``sql`` compiles against the schema without running it: ``EXPLAIN``
        with NULL arguments. Statements EXPLAIN cannot take (SET, GET_LOCK, …) pass."""
        args = _explain_args(sql)
        if args is not None:
            await self._run(sql, _fetch, self._raw, "EXPLAIN " + sql, args)

    async def server_version(self) -> str:
        """``SELECT VERSION()``: "8.0.36", "10.11.19-MariaDB-0+deb12u1", …"""
        rows = await self.fetch("SELECT VERSION()")
        return str(rows[0][0])

    async def _reset(self) -> bool:
        if not self._raw.get_transaction_status():
            return True
        try:
            await self.rollback()
        except DatabaseError:
            logger.warning("rolling back a connection failed; closing it", exc_info=True)
            return False
        return not self._raw.get_transaction_status()

    async def close(self) -> None:
        """Say goodbye to the server (shielded, bounded), then close the socket."""
        if not self._raw.closed and not await cleanup(
            "closing", aio_on, self._loop, _close, self._raw
        ):
            self.terminate()

    def terminate(self) -> None:
        self._raw.close()


# -- the pool ---------------------------------------------------------------------------------


def _target(url: str) -> _Target:
    parts = urlsplit(url)
    return _Target(
        host=parts.hostname or "localhost",
        port=port_of(url, server="MySQL", default=3306),
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=unquote(parts.path.lstrip("/")),
    )


class MySqlPool(AsyncioPool[MySqlConnection]):
    """Up to ``max_size`` aiomysql connections to one database."""

    def __init__(self, url: str, *, max_size: int, connect_timeout: float = CONNECT) -> None:
        target = _target(url)
        identity = f"mysql:{target.host}:{target.port}/{target.database}"
        super().__init__(max_size=max_size, identity=identity, conn_type=MySqlConnection)
        self._server = target
        self._label = redacted(url)
        self._connect_timeout = connect_timeout

    async def _connect(self) -> MySqlConnection:
        timeout = self._connect_timeout
        try:
            raw = await open_on(self._loop, _terminate, _open, self._server, timeout)
        except Exception as exc:
            errno = _errno(exc)
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):  # asyncio's carries no message
                where = f"{self._server.host}:{self._server.port}"
                reason = (
                    f"timed out after {timeout:g} s connecting to {where} (a connection "
                    f"opens within {timeout:g} s, the server's greeting, authentication and "
                    "session set-up included); check that a MySQL or MariaDB server listens "
                    "there and answers"
                )
            msg = f"could not connect to MySQL at {self._label}: {reason}"
            code = None if errno is None else str(errno)
            raise ConnectError(msg, statement="connect", code=code) from exc
        return MySqlConnection(raw, self._server, self._loop)

    def _alive(self, conn: MySqlConnection) -> bool:
        return conn.alive

    def _ended(self, conn: MySqlConnection) -> bool:
        return conn.ended

    def _clean(self, conn: MySqlConnection) -> bool:
        return not conn.in_transaction

    async def _reset(self, conn: MySqlConnection) -> bool:
        return await conn._reset()

    async def _close(self, conn: MySqlConnection) -> None:
        await conn.close()

    def _terminate(self, conn: MySqlConnection) -> None:
        conn.terminate()

    async def server_version(self) -> str:
        """``SELECT VERSION()`` on a connection of the pool."""
        conn = await self.acquire()
        try:
            return await conn.server_version()
        finally:
            await self.give_back(conn)


async def open_pool(url: str, *, max_size: int, connect_timeout: float = CONNECT) -> MySqlPool:
    """A pool over ``url`` (``mysql://user:password@host:port/database``), with one
    connection opened now so that a wrong URL fails at startup (ConnectError). Each connect
    takes at most ``connect_timeout`` seconds. Runs inside a trio-asyncio loop, and the pool
    must be closed inside it."""
    require_loop("MySQL")
    pool = MySqlPool(url, max_size=max_size, connect_timeout=connect_timeout)
    conn = await pool.acquire()
    await pool.give_back(conn)
    return pool
