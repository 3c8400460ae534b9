"""What the asyncio drivers (asyncpg, aiomysql) share: the typed hop into the trio-asyncio loop,
shielded and bounded cleanup, and the pool of connections.

Every database call crosses from Trio into asyncio once (about 66 µs per crossing,
docs/drivers.md#one-hop-per-unit-of-work): a driver method is one asyncio coroutine called
through :func:`aio`.
A Trio cancel of a crossing cancels the asyncio task and waits for it to finish, so the
driver knows the statement was cut and can undo it before the connection serves again.

A connect is the one crossing a Trio cancel does not cut (:func:`open_on`): it runs on as an
asyncio task of its own, and what it opens is closed before the cancel goes on.

Cleanup that awaits I/O runs shielded, bounded by :data:`CLEANUP_TIMEOUT`, and the pool does
it itself: a caller's cancel scope can never leak a connection (G2) or hand one back inside
an open or aborted transaction (G1).
"""

from __future__ import annotations

import asyncio
import logging
import select
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar

import trio
import trio_asyncio
from trio_asyncio import aio_as_trio

from .._bounds import CLEANUP, cleanup_scope
from ..errors import Closed
from ._activity import database_call
from ._base import Connection
from ._holders import Holders

__all__ = ["CLEANUP_TIMEOUT", "AsyncioPool", "aio", "cleanup", "open_on", "require_loop"]

logger = logging.getLogger("trinbox.drivers")

P = ParamSpec("P")
T = TypeVar("T")
Loop = trio_asyncio.BaseTrioEventLoop
C = TypeVar("C")

#: Seconds a rollback, close or kill may take outside any bound of the runtime (inside one,
#: its deadline holds: see trinbox._bounds).
CLEANUP_TIMEOUT = CLEANUP


async def aio(fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Call the asyncio coroutine function ``fn`` from Trio (one hop), keeping its types."""
    result: T = await aio_as_trio(fn)(*args, **kwargs)
    return result


async def aio_on(
    loop: Loop, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """:func:`aio` on a given loop: a connection runs on the loop it was opened in, whichever
    Trio task calls it (a publish from outside ``App.serve`` too)."""
    with database_call():
        result: T = await aio_as_trio(fn, loop=loop)(*args, **kwargs)
    return result


async def open_on(
    loop: Loop,
    close: Callable[[T], None],
    fn: Callable[P, Coroutine[Any, Any, T]],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Open a connection on ``loop`` with the asyncio coroutine function ``fn``; ``close``
    closes what it returns, at once (no I/O wait).

    A Trio cancel does not cut the connect: it runs on as an asyncio task of its own, the
    caller waits for it within the clean-up deadline (trinbox._bounds) and closes what it
    opened, and only then does the cancel go on. A connect cut in the middle leaves asyncio
    work behind that nobody awaits: asyncpg's TLS probe, cut between the TCP connect and its
    first read, leaves a future whose error no one retrieves ("Future exception was never
    retrieved"). Past the deadline the connect is cut after all, and closes what it still
    opens as it ends, so nothing it opened outlives the loop.
    """
    with database_call():
        task = asyncio.ensure_future(_called(fn, *args, **kwargs), loop=loop)
        try:
            return await loop.run_aio_future(asyncio.shield(task))
        except BaseException:
            if not task.done():
                await _finish_connect(loop, task, close)
            else:  # done as the cancel came: what it opened is closed here, or its error read
                _close_opened(task, close)
            raise


async def _called(fn: Callable[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
    return await fn(*args, **kwargs)  # called on the loop: fn starts in asyncio's context


async def _finish_connect(loop: Loop, task: asyncio.Future[T], close: Callable[[T], None]) -> None:
    """The caller was cancelled while ``task`` connects: let it finish within the clean-up
    deadline and close what it opened; past the deadline, cut it."""
    with cleanup_scope():
        try:
            opened = await loop.run_aio_future(asyncio.shield(task))
        except Exception:  # the connect failed: nothing is open; the caller's cancel goes on
            logger.debug("a connect whose caller was cancelled failed", exc_info=True)
        else:
            close(opened)
    if not task.done():
        task.add_done_callback(lambda done: _close_opened(done, close))
        task.cancel()


def _close_opened(task: asyncio.Future[T], close: Callable[[T], None]) -> None:
    if task.cancelled() or task.exception() is not None:
        return  # the error is read: nobody else waits for it
    close(task.result())


def current_loop() -> Loop:
    """The trio-asyncio loop of this task, or a clear error."""
    loop = trio_asyncio.current_loop.get()
    if loop is None:
        msg = (
            "the asyncio drivers need a trio-asyncio loop, and none is open here; "
            "open the pool inside App.serve"
        )
        raise RuntimeError(msg)
    return loop


def require_loop(driver: str) -> None:
    """Fail clearly when no trio-asyncio loop is open in this task."""
    if trio_asyncio.current_loop.get() is None:
        msg = (
            f"the {driver} driver runs on asyncio, but no trio-asyncio loop is open here; "
            "open the pool inside App.serve, or inside "
            "`async with trinbox._drivers.aio.asyncio_loop(True):`"
        )
        raise RuntimeError(msg)


async def cleanup(
    what: str, fn: Callable[P, Awaitable[object]], /, *args: P.args, **kwargs: P.kwargs
) -> bool:
    """Run ``fn`` shielded from the caller's cancellation, within the deadline of the
    runtime's bound around it (or :data:`CLEANUP_TIMEOUT`); whether it finished without
    error. Never raises an ``Exception``: a failed cleanup is logged, and the caller falls
    back to something harsher (terminate, kill)."""
    with cleanup_scope() as scope:
        try:
            await fn(*args, **kwargs)
        except Exception:  # reported; the caller falls back
            logger.warning("%s failed", what, exc_info=True)
            return False
    if scope.cancelled_caught:
        logger.warning("%s ran out of time; giving up on it", what)
        return False
    return True


def input_waiting(transport: object) -> bool:
    """Whether an idle connection's socket has input waiting (or its transport is already
    closing): one non-blocking ``poll`` of the socket, no round trip.

    An idle session in the pool has asked nothing, so the server has nothing to say to it
    but its last words: an error packet (KILL, wait_timeout: MySQL/MariaDB; FATAL 57P01 from
    pg_terminate_backend or a shutdown: PostgreSQL) and the end of the stream. The asyncio
    transport reads them only when the loop next runs; the pool asks the kernel directly, so
    a connection whose session ended while the loop was busy (or blocked) is not handed out.
    A false alarm (a notice sent to an idle session) costs a reconnect, never an error.
    """
    if not isinstance(transport, asyncio.Transport) or transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    if sock is None:
        return True
    fd = sock.fileno()
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


class AsyncioPool(ABC, Generic[C]):
    """Up to ``max_size`` connections; the driver supplies connect, reset and close.

    Each checked-out connection holds one slot of a semaphore. ``give_back`` and ``close``
    give the slot back whatever happens (they are shielded, bounded and never leak it), and
    are idempotent: a connection already given back is not given back twice.
    """

    def __init__(self, *, max_size: int, identity: str, conn_type: type[C]) -> None:
        if max_size < 1:
            msg = f"a pool holds at least one connection, found max_size={max_size}"
            raise ValueError(msg)
        self._max_size = max_size
        self._identity = identity
        self._conn_type = conn_type
        self._slots = trio.Semaphore(max_size, max_value=max_size)
        self._idle: list[C] = []
        self._out: set[C] = set()
        self._holders = Holders(identity, max_size)
        self._closed = False
        self._loop = current_loop()  # every connection of the pool runs on it

    # -- what a driver supplies -------------------------------------------------------------

    @abstractmethod
    async def _connect(self) -> C:
        """Open a new connection (raises ConnectError)."""

    @abstractmethod
    def _alive(self, conn: C) -> bool:
        """Whether ``conn`` may still serve (open, never cut or lost). No I/O."""

    @abstractmethod
    def _ended(self, conn: C) -> bool:
        """Whether the server has ended ``conn``'s session while it sat idle in the pool
        (:func:`input_waiting`), checked before it is handed out. No I/O wait."""

    @abstractmethod
    def _clean(self, conn: C) -> bool:
        """Whether ``conn`` has nothing to undo before its next user (no transaction, no
        listener, no cut statement), so it returns to the pool without I/O. No I/O."""

    @abstractmethod
    async def _reset(self, conn: C) -> bool:
        """Ready ``conn`` for its next user (roll back, stop listening); whether it may
        serve again. Called shielded and bounded; must not raise."""

    @abstractmethod
    async def _close(self, conn: C) -> None:
        """Close ``conn`` for good, gracefully if it can be done in time. Called shielded;
        bounded by the driver; must not raise."""

    @abstractmethod
    def _terminate(self, conn: C) -> None:
        """Close ``conn``'s socket at once, without a word to the server. No I/O wait."""

    # -- the Pool protocol ------------------------------------------------------------------

    @property
    def max_size(self) -> int:
        return self._max_size

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size(self) -> int:
        """Open connections: idle ones and those in use."""
        return len(self._idle) + len(self._out)

    @property
    def in_use(self) -> int:
        return len(self._out)

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def spare(self) -> int:
        """Connections a caller could take now without waiting: idle ones and room to grow."""
        return self._slots.value

    async def acquire(self, holder: str = "caller") -> C:
        self._check_open()
        await self._holders.wait(self._slots, holder, self._out)
        return await self._take(holder)

    async def try_acquire(self, holder: str = "caller") -> C | None:
        self._check_open()
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            return None
        return await self._take(holder)

    async def _take(self, holder: str) -> C:
        # Holds a slot on entry; gives it back unless a connection leaves with the caller.
        try:
            self._check_open()
            while self._idle:
                conn = self._idle.pop()
                if self._alive(conn) and not self._ended(conn):
                    self._out.add(conn)
                    self._holders.took(conn, holder)
                    return conn
                # Lost, or ended by the server while idle (restart, wait_timeout, KILL):
                # never handed out, so no caller sees its ConnectionLost.
                self._terminate(conn)
            conn = await self._connect()
        except BaseException:
            self._slots.release()
            raise
        # No checkpoint between the connect and here: a cancel cannot lose the connection.
        self._out.add(conn)
        self._holders.took(conn, holder)
        return conn

    async def give_back(self, conn: Connection) -> None:
        own = self._own(conn)
        if own not in self._out:
            return
        self._out.remove(own)
        if not self._closed and self._alive(own) and self._clean(own):
            # The common case: back to the pool at once, no cleanup to shield or bound.
            self._idle.append(own)
            self._slots.release()
            return
        try:
            reusable = False
            if self._alive(own) and not self._closed:
                with cleanup_scope() as scope:
                    try:
                        reusable = await self._reset(own)
                    except Exception:
                        logger.exception("resetting a %s connection failed", self._identity)
                if scope.cancelled_caught:
                    logger.warning(
                        "resetting a %s connection ran out of time; terminating it",
                        self._identity,
                    )
                    reusable = False
                if not reusable:
                    # A connection whose rollback failed is never handed out again.
                    self._terminate(own)
            if reusable and not self._closed:
                self._idle.append(own)
            else:
                with cleanup_scope():
                    await self._close(own)
        finally:
            self._slots.release()

    async def close(self, conn: Connection) -> None:
        own = self._own(conn)
        held = own in self._out
        self._out.discard(own)
        if own in self._idle:
            self._idle.remove(own)
        try:
            with cleanup_scope():
                await self._close(own)
        finally:
            if held:
                self._slots.release()

    def abandon(self, conn: Connection) -> None:
        own = self._own(conn)
        held = own in self._out
        self._out.discard(own)
        if own in self._idle:
            self._idle.remove(own)
        self._terminate(own)
        if held:
            self._slots.release()

    async def aclose(self) -> None:
        """Close idle connections; terminate those still in use (their next statement
        fails with ConnectionLost, and giving them back only closes them)."""
        self._closed = True
        idle, self._idle = self._idle, []
        if self._out:
            logger.warning(
                "closing the %s pool with %d connection(s) still in use; terminating them",
                self._identity,
                len(self._out),
            )
            for conn in self._out:
                self._terminate(conn)
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                for conn in idle:
                    nursery.start_soon(self._close, conn)

    # -- helpers ----------------------------------------------------------------------------

    def _own(self, conn: Connection) -> C:
        if not isinstance(conn, self._conn_type):
            msg = f"{self._identity} pool got a {type(conn).__name__}, not one of its own"
            raise TypeError(msg)
        return conn

    def _check_open(self) -> None:
        if self._closed:
            msg = f"the {self._identity} pool is closed; acquire before the broker shuts down"
            raise Closed(msg)
