"""SQLite through the standard ``sqlite3`` module on worker threads.

Each connection runs one call at a time (a Trio lock) on a worker thread of its own
(trinbox._drivers._sqlite_thread), started by its first call and ended when it closes. A
cancelled call that had begun interrupts its statement, waits for the thread to let go
(shielded, within the clean-up deadline of trinbox._bounds), and rolls back what it left
open; past the deadline the connection is abandoned. One cancelled before it began never
touches the connection (docs/drivers.md#sqlite-on-threads).

SQLite's interrupt does not reach its busy handler (a writer waiting for another's write
lock sleeps the whole busy timeout), so trinbox runs the busy wait itself: SQLite waits in
slices of :data:`BUSY_SLICE`, and a statement turned away is run again until the pool's busy
timeout, unless its call was cut (:class:`_Session`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import outcome
import trio

from .._bounds import cleanup_scope
from ..errors import ConnectError, ConnectionLost, DatabaseError, IntegrityError, LockNotAvailable
from ._activity import database_call
from ._base import Connection, Op, Record, Result, ThreadSession, failing, script_failed, stops
from ._holders import Holders
from ._sqlite_thread import ConnectionThread, run_on

__all__ = ["SqliteConnection", "SqlitePool", "sqlite_path"]

T = TypeVar("T")

logger = logging.getLogger("trinbox.drivers")

#: Seconds SQLite's own busy handler waits before a statement is run again: how long a
#: cancelled call may sleep in a busy wait before it sees the cut.
BUSY_SLICE = 0.1

# A writer turned away by another's lock (SQLite's busy handler applies); not BUSY_SNAPSHOT, a
# stale read transaction that waiting cannot mend.
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY_RECOVERY})

# Times are stored as UTC text that sorts as time: "2026-11-29 20:37:00.000000".
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def sqlite_path(url: str) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a bare path; an in-memory or
    temporary database is refused (:func:`_refuse_private`)."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
    elif url.startswith("sqlite://"):
        msg = f"a SQLite URL reads sqlite:///path, found {url!r}; use three slashes"
        raise ValueError(msg)
    else:
        path = url
    _refuse_private(path, url)
    return path


def _refuse_private(path: str, url: str) -> None:
    """The pool opens several connections to one database (a claim, a settlement and a
    handler's statements each run on their own), and ``:memory:`` or an empty path gives
    each connection a database of its own: a row published on one would never be claimed on
    another, and the tables made on one are missing on the others. So a queue needs a file.

    One shared connection would not do: a transactional delivery holds its connection in a
    transaction while the handler's ``keys.Pool`` statements run beside it, and a shared-cache
    ``file::memory:`` database locks whole tables without waiting on the busy timeout."""
    if path not in (":memory:", ""):
        return
    kind = "in-memory" if path else "temporary"
    msg = (
        f"a SQLite queue is a database file every connection of the pool opens, found "
        f"{url!r}, which gives each connection its own empty {kind} database (rows published "
        f"on one are never claimed on another); use a file path (sqlite:///queue.db), or a "
        f"file in a temporary directory for tests"
    )
    raise ConnectError(msg, statement="connect")


def variable_limit() -> int:
    """The parameters a statement may bind in the running SQLite library
    (``SQLITE_LIMIT_VARIABLE_NUMBER``: 999 before 3.32, 32766 after, more where a
    distribution builds it so); trinbox's connections keep it."""
    raw = sqlite3.connect(":memory:")
    try:
        return raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    finally:
        raw.close()


def _param(value: object) -> object:
    if isinstance(value, list):
        return json.dumps(value)  # read back with json_each (a batch's ids)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            if value.utcoffset():
                value = value.astimezone(UTC)
            value = value.replace(tzinfo=None)
        # TIME_FORMAT, written the fast way (a batch binds a token per row).
        return value.isoformat(" ", "microseconds")
    return value


def _params(params: Sequence[object]) -> tuple[object, ...]:
    return tuple(_param(p) for p in params)


def _translate(exc: sqlite3.Error, sql: str) -> DatabaseError:
    code = getattr(exc, "sqlite_errorname", None)
    text = f"{exc} (while running: {sql})"
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(text, statement=sql, code=code)
    if code in ("SQLITE_BUSY", "SQLITE_LOCKED") or "database is locked" in str(exc):
        return LockNotAvailable(text, statement=sql, code=code)
    return DatabaseError(text, statement=sql, code=code)


_QUOTES = {"'": "'", '"': '"', "`": "`", "[": "]"}


def _placeholders(sql: str) -> int:
    """The ``?`` placeholders of ``sql``: those outside quoted names, literals and comments
    (a declared name may hold a ``?``)."""
    count = 0
    i = 0
    while i < len(sql):
        char = sql[i]
        if char in _QUOTES:
            end = sql.find(_QUOTES[char], i + 1)
            # A doubled quote inside a quoted part is one quote: the scan carries on past it.
            i = len(sql) if end < 0 else end + 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 2
            continue
        if char == "?":
            count += 1
        i += 1
    return count


def _reads(sql: str) -> bool:
    return sql.lstrip()[:6].upper() in ("SELECT", "EXPLAI")


_execute = sqlite3.Connection.execute
_commit = sqlite3.Connection.commit


class _Session(sqlite3.Connection):
    """A ``sqlite3`` connection whose busy wait trinbox runs: SQLite waits at most
    :data:`BUSY_SLICE` for another connection's lock, and a statement (or commit) turned away
    runs again until ``busy_timeout`` seconds have passed, unless ``cut`` is set meanwhile (a
    cancel of the call: SQLite's interrupt does not stop its busy handler's sleeps, this
    does). A failed statement had no effect, so running it again is what SQLite's handler
    does too. A script is not run again (its first statements may have run): it waits in
    SQLite's own handler, the whole busy timeout."""

    busy_timeout = 5.0
    busy_slice = BUSY_SLICE  # at most busy_timeout
    cut = False  # set by the call's cancel, from the Trio thread; cleared as each call begins

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return _execute(self, sql, parameters)  # not super(): this runs for every statement
        except sqlite3.OperationalError as exc:
            deadline = self._wait_again(exc, None)
        while True:
            try:
                return _execute(self, sql, parameters)
            except sqlite3.OperationalError as exc:
                deadline = self._wait_again(exc, deadline)

    def commit(self) -> None:
        deadline: float | None = None
        while True:
            try:
                return _commit(self)
            except sqlite3.OperationalError as exc:
                deadline = self._wait_again(exc, deadline)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        super().execute(f"PRAGMA busy_timeout={_ms(self.busy_timeout)}")
        try:
            return super().executescript(script)
        finally:
            with contextlib.suppress(sqlite3.Error):
                super().execute(f"PRAGMA busy_timeout={_ms(self.busy_slice)}")

    def _wait_again(self, exc: sqlite3.OperationalError, deadline: float | None) -> float:
        """The deadline of the statement's busy wait, if ``exc`` turned it away and it may
        run again; else raise ``exc``."""
        if exc.sqlite_errorcode not in _BUSY_CODES or self.cut:
            raise exc
        now = time.monotonic()
        if deadline is None:
            deadline = now + self.busy_timeout - self.busy_slice  # SQLite waited one slice
        if now >= deadline:
            raise exc
        return deadline


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _roll_back_open(raw: sqlite3.Connection) -> None:
    if raw.in_transaction:
        raw.rollback()


def _close_quietly(raw: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        raw.close()


class _ThreadSession:
    """The blocking session a function run on a connection's thread sees (``ThreadSession``):
    each statement bound as the async calls bind it, each error translated, naming the
    statement it came from. A call cut by its cancel stops at its next statement: SQLite's
    interrupt reaches only a statement that is running."""

    __slots__ = ("_raw", "progress")

    def __init__(self, raw: _Session, call: str) -> None:
        self._raw = raw
        self.progress = [call]  # the call's name, then the statements begun: the last fails

    @property
    def in_transaction(self) -> bool:
        return self._raw.in_transaction

    def _cursor(self, sql: str, params: Sequence[object]) -> sqlite3.Cursor:
        self.progress.append(sql)
        if self._raw.cut:
            msg = f"interrupted: the call was cut before this statement ran (while running: {sql})"
            raise DatabaseError(msg, statement=sql, code="SQLITE_INTERRUPT")
        try:
            return self._raw.execute(sql, _params(params))
        except sqlite3.Error as exc:
            raise _translate(exc, sql) from exc

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return self._cursor(sql, params).rowcount

    def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        cursor = self._cursor(sql, params)
        try:
            return cursor.fetchall()  # tuples: the connection has no row factory
        except sqlite3.Error as exc:
            raise _translate(exc, sql) from exc

    def commit(self) -> None:
        self._end("COMMIT", self._raw.commit)

    def rollback(self) -> None:
        self._end("ROLLBACK", self._raw.rollback)

    def _end(self, sql: str, end: Callable[[], None]) -> None:
        self.progress.append(sql)
        try:
            end()
        except sqlite3.Error as exc:
            raise _translate(exc, sql) from exc


class SqliteConnection:
    """One ``sqlite3`` connection driven from Trio.

    A call that may write waits for ``writes``, the lock its pool's connections share, unless
    the connection is inside a transaction (it may hold SQLite's write lock already, and its
    commit must never wait behind a writer that waits for it). SQLite has one writer per file;
    a writer it turns away sleeps in the busy handler, so writers queue on the lock instead.
    They queue on their worker threads: the next writer starts the moment the one before lets
    go, without a trip through Trio in between; a call cancelled while it queues never touches
    the connection."""

    def __init__(self, raw: _Session, writes: threading.Lock | None = None) -> None:
        self._raw = raw
        self._lock = trio.Lock()  # one call at a time on this connection
        self._writes = writes
        self._abandoned = False
        self._thread: ConnectionThread | None = None  # started by the first call
        self._thread_stopped = False  # never started again once the connection closes

    @property
    def in_transaction(self) -> bool:
        return self._raw.in_transaction

    @property
    def abandoned(self) -> bool:
        """Never serves again (closed, or closing once a cut call lets go)."""
        return self._abandoned

    async def _run(self, fn: Callable[[], T], sql: str | list[str], *, reads: bool = False) -> T:
        # A free lock is taken without a trip through Trio's scheduler (a cancel still
        # raises here); the call below yields to it while its thread runs.
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            if self._abandoned:
                # A call cut past its deadline may still run on the connection's thread.
                msg = (
                    "this SQLite connection was abandoned (a clean-up ran out of time) and "
                    "closes once its last call lets go; return it to the pool and take another"
                )
                raise ConnectionLost(msg, statement=failing(sql))
            return await self._run_locked(fn, sql, reads=reads)
        finally:
            self._lock.release()

    def abandon(self) -> None:
        """Never serve again: closing rolls back what is open and frees SQLite's write lock, at
        once when no call runs, else on the connection's thread as soon as the call (cut)
        lets go."""
        if self._abandoned:
            return
        self._abandoned = True
        thread = self._thread
        if thread is not None and self._lock.locked():
            self._raw.cut = True
            self._raw.interrupt()
            thread.submit(lambda: _close_quietly(self._raw))  # after the call: jobs run in order
            self._stop_thread()
        else:
            self._stop_thread()
            self._raw.close()

    def _stop_thread(self) -> None:
        """The connection's thread ends after what is queued on it (a call abandoned by a
        cancel runs out first)."""
        self._thread_stopped = True
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    async def _run_locked(
        self, fn: Callable[[], T], sql: str | list[str], *, reads: bool = False
    ) -> T:
        if reads or self._writes is None or self._raw.in_transaction:
            return await self._call(fn, sql, None)
        return await self._call(fn, sql, self._writes)

    async def _call(
        self, fn: Callable[[], T], sql: str | list[str], writes: threading.Lock | None
    ) -> T:
        # ``gate`` orders the thread's start against a cancel: whichever takes it first
        # decides. ``finished`` is held until ``fn`` ended, for a call on a thread of Trio's.
        finished = threading.Lock()
        finished.acquire()
        gate = threading.Lock()
        state = [False, False]  # abandoned (by a cancel), running (``fn`` began)
        raw = self._raw

        def call() -> T | None:
            if writes is not None:
                writes.acquire()  # the pool's writers, one at a time, queued on their threads
            try:
                with gate:
                    if state[0]:
                        return None  # cancelled before it began: leave the connection alone
                    state[1] = True
                    raw.cut = False
                try:
                    return fn()
                finally:
                    finished.release()
            finally:
                if writes is not None:
                    writes.release()

        thread = self._thread
        if thread is None and not self._thread_stopped:
            thread = self._thread = ConnectionThread()
            # A connection dropped without a close still ends its thread.
            weakref.finalize(self, thread.stop)
        try:
            with database_call():
                if thread is not None:
                    got = await run_on(thread, call)
                else:  # closed: a call that still comes fails on a thread of Trio's
                    got = await trio.to_thread.run_sync(
                        outcome.capture, call, abandon_on_cancel=True
                    )
        except BaseException:
            # Cancelled, or interrupted (KeyboardInterrupt), while the call was out: the
            # guard holds either way.
            with gate:
                state[0] = True
                running = state[1]
            if running:
                await self._cut(thread, finished)
            raise
        try:
            result = got.unwrap()
        except sqlite3.Error as exc:
            raise _translate(exc, failing(sql)) from exc
        return result  # type: ignore[return-value]  # None only when cancelled before it began

    async def _cut(self, thread: ConnectionThread | None, finished: threading.Lock) -> None:
        """A call that began was cut: stop it (its statement, and its busy wait), wait for it
        to let go before anyone reuses the connection, then undo what it left open, all
        within the clean-up deadline (trinbox._bounds). Past it the connection is abandoned,
        and closes on its thread once the call lets go."""
        raw = self._raw
        raw.cut = True
        raw.interrupt()
        with cleanup_scope() as scope, database_call():
            try:
                if thread is not None:
                    # Runs after the cut call, on its thread: ends when it has let go.
                    (await run_on(thread, lambda: _roll_back_open(raw))).unwrap()
                else:
                    await trio.to_thread.run_sync(finished.acquire, abandon_on_cancel=True)
            except sqlite3.Error:
                logger.warning("rolling back a cut SQLite call failed; abandoning", exc_info=True)
                self.abandon()
        if scope.cancelled_caught:
            logger.warning("a cut SQLite call did not let go in time; abandoning its connection")
            self.abandon()

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        bound = _params(params)
        return await self._run(
            lambda: self._raw.execute(sql, bound).rowcount, sql, reads=_reads(sql)
        )

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        bound = _params(params)
        return await self._run(
            lambda: [tuple(r) for r in self._raw.execute(sql, bound)], sql, reads=_reads(sql)
        )

    async def script(self, ops: Sequence[Op], *, until_empty: bool = False) -> list[Result]:
        raw = self._raw
        steps = [(op.kind, op.sql, _params(op.params)) for op in ops]
        progress: list[str] = []
        results: list[Result] = []

        def run() -> list[Result]:
            for kind, sql, params in steps:
                progress.append(sql or kind.upper())
                result: Result
                if kind == "fetch":
                    result = [tuple(r) for r in raw.execute(sql, params)]
                elif kind == "commit":
                    raw.commit()
                    result = None
                else:
                    result = raw.execute(sql, params).rowcount
                results.append(result)
                if until_empty and stops(result):
                    break
            return results

        reads = all(op.kind == "fetch" and _reads(op.sql) for op in ops)
        try:
            return await self._run(run, progress, reads=reads)
        except DatabaseError as exc:
            script_failed(exc, progress, results)
            raise

    async def run_on_thread(self, fn: Callable[[ThreadSession], T], statement: str) -> T:
        """Run ``fn`` on this connection's thread as one call: one round trip, one turn of
        the pool's writers (unless a transaction is open), cut as any call is cut."""
        session = _ThreadSession(self._raw, statement)
        return await self._run(lambda: fn(session), session.progress)

    async def executescript(self, script: str) -> None:
        """Run several statements (schema set-up in examples and tests)."""
        await self._run(lambda: self._raw.executescript(script), script)

    async def begin(self, sql: str) -> None:
        await self.execute(sql)

    async def commit(self) -> None:
        await self._run(self._raw.commit, "COMMIT")

    async def rollback(self) -> None:
        await self._run(self._raw.rollback, "ROLLBACK")

    async def prepare(self, sql: str) -> None:
        # EXPLAIN compiles the statement against the schema without running it.
        count = _placeholders(sql)
        await self._run(
            lambda: self._raw.execute("EXPLAIN " + sql, (None,) * count), sql, reads=True
        )

    async def close(self) -> None:
        """Close, shielded and bounded (trinbox._bounds); past the bound, abandon."""
        with cleanup_scope():
            async with self._lock:
                if self._abandoned:
                    return
                self._stop_thread()
                with database_call():
                    await trio.to_thread.run_sync(self._raw.close)
                return
        self.abandon()


def _connect(path: str, busy_timeout: float) -> _Session:
    busy_slice = min(BUSY_SLICE, busy_timeout)
    raw = sqlite3.connect(
        path,
        check_same_thread=False,
        isolation_level=None,
        timeout=busy_slice,  # SQLite's own wait, one slice: _Session waits the rest
        factory=_Session,
    )
    raw.busy_timeout = busy_timeout
    raw.busy_slice = busy_slice
    _use_wal(raw, busy_timeout)
    raw.execute("PRAGMA foreign_keys=ON")
    return raw


def _use_wal(raw: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL (a no-op once it is). Connections of two processes that switch a
    file at once can deadlock on the upgrade to its exclusive lock; SQLite then answers
    "database is locked" at once, without waiting for the busy timeout, so the switch is
    tried again until then. Runs on a worker thread."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            raw.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


class SqlitePool:
    """Up to ``max_size`` connections to one database file."""

    def __init__(self, path: str, *, max_size: int = 8, busy_timeout: float = 5.0) -> None:
        _refuse_private(path, path)
        self._path = path
        self._busy_timeout = busy_timeout
        self._max_size = max_size
        self._slots = trio.Semaphore(max_size)
        self._idle: list[SqliteConnection] = []
        self._out: set[SqliteConnection] = set()
        self._holders = Holders(self.identity, max_size)
        self._closed = False
        self._writes = threading.Lock()  # shared by this pool's connections (SqliteConnection)

    @property
    def max_size(self) -> int:
        return self._max_size

    @property
    def identity(self) -> str:
        return "sqlite:" + os.path.realpath(self._path)

    @property
    def path(self) -> str:
        return self._path

    @property
    def spare(self) -> int:
        """Connections a caller could take now without waiting: idle ones and room to grow."""
        return self._slots.value

    async def open(self) -> None:
        """Open one connection now, so a bad path fails at startup."""
        conn = await self.acquire()
        await self.give_back(conn)

    async def acquire(self, holder: str = "caller") -> SqliteConnection:
        # A free slot is taken without a trip through Trio's scheduler (a cancel still
        # raises here, and no slot is taken).
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._holders.wait(self._slots, holder, self._out)
        try:
            return await self._take(holder)
        except BaseException:
            self._slots.release()
            raise

    async def try_acquire(self, holder: str = "caller") -> SqliteConnection | None:
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            return None
        try:
            return await self._take(holder)
        except BaseException:
            self._slots.release()
            raise

    async def _take(self, holder: str) -> SqliteConnection:
        if self._idle:
            conn = self._idle.pop()
        else:
            try:
                with database_call():
                    raw = await trio.to_thread.run_sync(_connect, self._path, self._busy_timeout)
            except sqlite3.Error as exc:
                msg = f"could not open the SQLite database {self._path!r}: {exc}"
                raise ConnectError(msg, statement="connect") from exc
            conn = SqliteConnection(raw, self._writes)
        self._out.add(conn)
        self._holders.took(conn, holder)
        return conn

    def _give_slot(self, conn: SqliteConnection) -> bool:
        """Whether ``conn`` was out: each checkout gives its slot back once, however often
        it is released or discarded."""
        if conn not in self._out:
            return False
        self._out.remove(conn)
        self._slots.release()
        return True

    async def give_back(self, conn: Connection) -> None:
        assert isinstance(conn, SqliteConnection)
        if not self._give_slot(conn):
            return
        if conn.abandoned:
            return  # a call cut past its deadline: it closes on its own thread
        try:
            if conn.in_transaction:
                with cleanup_scope():
                    await conn.rollback()
                if conn.in_transaction:  # the rollback ran out of time
                    conn.abandon()
                    return
        except DatabaseError:
            await conn.close()
            return
        if self._closed:
            await conn.close()
        else:
            self._idle.append(conn)

    async def close(self, conn: Connection) -> None:
        assert isinstance(conn, SqliteConnection)
        self._give_slot(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        await conn.close()

    def abandon(self, conn: Connection) -> None:
        assert isinstance(conn, SqliteConnection)
        self._give_slot(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        conn.abandon()

    async def aclose(self) -> None:
        """Close idle connections; abandon those still in use (a caller cut off while it
        held one): nothing of the pool stays open, no transaction holds the write lock."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
        if self._out:
            import logging

            logging.getLogger("trinbox.drivers").warning(
                "closing the SQLite pool of %s with %d connection(s) still in use; abandoning them",
                self._path,
                len(self._out),
            )
            for conn in list(self._out):
                self.abandon(conn)
