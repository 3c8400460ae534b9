"""The narrow contract between trinbox and a database driver.

Drivers run SQL text with positional parameters and hand back plain tuples; they never see row
classes, and they translate their library's exceptions into trinbox's error tree. Everything
above this layer is pure Trio.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar, runtime_checkable

from ..errors import DatabaseError

__all__ = [
    "Connection",
    "Op",
    "Pool",
    "Record",
    "Result",
    "ThreadSession",
    "ThreadedConnection",
    "ThreadedPool",
    "failing",
    "script_failed",
    "stops",
]

T = TypeVar("T")

Record = tuple[object, ...]
Result = list[Record] | int | None


@dataclass(frozen=True, slots=True)
class Op:
    """One step of a script: ``begin`` (the dialect's begin text), ``fetch`` (rows),
    ``execute`` (rows changed) or ``commit``."""

    kind: Literal["begin", "fetch", "execute", "commit"]
    sql: str = ""
    params: Sequence[object] = ()


def failing(sql: str | list[str]) -> str:
    """The statement an error names: the one given, or the last a script started."""
    if isinstance(sql, str):
        return sql
    return sql[-1] if sql else "(script)"


def script_failed(error: DatabaseError, progress: list[str], results: list[Result]) -> None:
    """Mark the error of a failed script: the step it was running (the last one started) and
    the results of the steps before it."""
    error.step = len(progress) - 1 if progress else None
    error.results = list(results)


def stops(result: Result) -> bool:
    """Whether a script run ``until_empty`` stops after this result: no row, a first value
    that is false (a lock not taken), or no row changed."""
    if isinstance(result, list):
        return not result or not result[0] or not result[0][0]
    return result == 0


class Connection(Protocol):
    """One database session. Used by one task at a time."""

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on this session."""
        ...

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    async def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        """Run a statement that returns rows."""
        ...

    async def begin(self, sql: str) -> None:
        """Open a transaction with the dialect's begin text."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    async def prepare(self, sql: str) -> None:
        """Have the server compile ``sql`` without running it (startup checks)."""
        ...

    async def script(self, ops: Sequence[Op], *, until_empty: bool = False) -> list[Result]:
        """Run ``ops`` in order in one round trip of the driver (one crossing into asyncio,
        one worker-thread call): a claim's begin and select, a settlement and its commit or
        unlock. One result per step run; with ``until_empty`` the script stops after a step
        whose result :func:`stops` it."""
        ...


class Pool(Protocol):
    """A bounded set of connections to one database."""

    @property
    def max_size(self) -> int: ...

    @property
    def spare(self) -> int:
        """Connections a caller could take now without waiting: idle ones and room to grow."""
        ...

    @property
    def identity(self) -> str:
        """Names the database (a file path or host/port/database) for process-wide registries."""
        ...

    async def acquire(self, holder: str = "caller") -> Connection:
        """A connection for ``holder`` (a short label: "claim", "settlement", "publish"...),
        waiting for one to be free; past ``POOL_WAIT`` a ``PoolExhausted`` that names the
        pool's size and the holders of its connections."""
        ...

    async def try_acquire(self, holder: str = "caller") -> Connection | None:
        """An idle connection, or a new one while the pool is below its size; ``None`` when
        every connection is in use (never waits for one to be given back)."""
        ...

    async def give_back(self, conn: Connection) -> None:
        """Return a connection (rolled back first if a transaction is still open). Safe in a
        cancelled scope: the pool shields and bounds its cleanup, and never leaks a slot."""
        ...

    async def close(self, conn: Connection) -> None:
        """Close a connection that must never serve again (its state is unknown)."""
        ...

    def abandon(self, conn: Connection) -> None:
        """Close a connection's socket at once, without a word to the server or any wait (a
        clean-up ran out of time); the server then ends the session and frees its locks."""
        ...

    async def aclose(self) -> None: ...


class ThreadSession(Protocol):
    """A connection as a function run on its own thread sees it (``run_on_thread``): every
    call blocks, and fails with trinbox's errors (``DatabaseError``), naming its statement."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Record]:
        """Run a statement that returns rows."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class ThreadedConnection(Connection, Protocol):
    """A connection whose calls run on a thread of its own (SQLite's)."""

    async def run_on_thread(self, fn: Callable[[ThreadSession], T], statement: str) -> T:
        """Run ``fn`` on the connection's thread as one call (one round trip, one turn of the
        pool's writers), handing it the connection's blocking session; ``statement`` names
        the call where nothing else does (a cancel, an abandoned connection)."""
        ...


@runtime_checkable
class ThreadedPool(Pool, Protocol):
    """A pool of one database file whose connections run functions on their own thread."""

    @property
    def path(self) -> str:
        """The database file, as the pool was given it."""
        ...

    async def acquire(self, holder: str = "caller") -> ThreadedConnection: ...

    async def try_acquire(self, holder: str = "caller") -> ThreadedConnection | None: ...
