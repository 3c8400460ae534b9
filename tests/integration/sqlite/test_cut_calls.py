"""A cut SQLite call lets go within the clean-up deadline (issue 17, item 6): its busy wait
ends at the cut (SQLite's interrupt does not reach its busy handler), a call that will not let
go is abandoned at the deadline, and a KeyboardInterrupt holds the same guard as a cancel.
Real time: SQLite's busy waits are real sleeps on the connection's thread."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from trinbox._bounds import within
from trinbox._drivers.sqlite import BUSY_SLICE, SqliteConnection, SqlitePool
from trinbox.errors import ConnectionLost, LockNotAvailable

BUSY_TIMEOUT = 5.0  # the pool's (SQLite's default in trinbox): far longer than any bound here
SLACK = 1.0  # how late past its bound a call may end on a loaded machine


async def _pool(path: Path, busy_timeout: float = BUSY_TIMEOUT) -> SqlitePool:
    pool = SqlitePool(str(path), max_size=2, busy_timeout=busy_timeout)
    conn = await pool.acquire()
    await conn.executescript("CREATE TABLE t (n INTEGER)")
    await pool.give_back(conn)
    return pool


@contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holds the file's write lock for the block (a writer of another
    process, as far as SQLite can tell), then rolls back."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        if holder.in_transaction:
            holder.rollback()
        holder.close()


def rows(path: Path) -> int:
    with sqlite3.connect(path) as reader:
        return int(reader.execute("SELECT count(*) FROM t").fetchone()[0])


def drained(conn: SqliteConnection) -> None:
    """Wait until the jobs already on the connection's thread have run (they run in order)."""
    thread = conn._thread
    assert thread is not None
    done = threading.Event()
    thread.submit(done.set)
    assert done.wait(BUSY_TIMEOUT + SLACK)


async def test_a_call_cancelled_in_a_busy_wait_lets_go_at_once(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    pool = await _pool(path)
    conn = await pool.acquire()
    with write_lock(path):
        started = time.monotonic()
        with trio.move_on_after(0.3) as scope:
            await conn.execute("INSERT INTO t (n) VALUES (1)")  # waits for the holder
        took = time.monotonic() - started
        assert scope.cancelled_caught
        # The cut ends the busy wait within a slice, not the pool's busy timeout.
        assert took < 0.3 + BUSY_SLICE + SLACK, took
        drained(conn)
    assert rows(path) == 0  # the cut insert never ran
    await conn.execute("INSERT INTO t (n) VALUES (2)")  # the connection serves again
    await pool.give_back(conn)
    await pool.aclose()
    assert rows(path) == 1


async def test_a_writer_turned_away_still_waits_the_whole_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    pool = await _pool(path, busy_timeout=1.0)
    conn = await pool.acquire()
    with write_lock(path):
        started = time.monotonic()
        with pytest.raises(LockNotAvailable, match="database is locked"):
            await conn.execute("INSERT INTO t (n) VALUES (1)")
        took = time.monotonic() - started
    assert 1.0 - BUSY_SLICE <= took < 1.0 + SLACK, took

    with write_lock(path) as holder:

        async def let_go_later() -> None:
            await trio.sleep(4 * BUSY_SLICE)  # several slices: the insert is run again
            holder.rollback()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(let_go_later)
            assert await conn.execute("INSERT INTO t (n) VALUES (1)") == 1
    await pool.give_back(conn)
    await pool.aclose()
    assert rows(path) == 1


async def test_a_cut_call_that_does_not_let_go_is_abandoned_at_the_deadline(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    pool = await _pool(path)
    conn = await pool.acquire()
    # A function SQLite calls and cannot interrupt: the call lets go only when it returns.
    released = threading.Event()
    conn._raw.create_function("stall", 0, lambda: released.wait(BUSY_TIMEOUT))
    await conn.fetch("SELECT 1")  # the connection's thread is running
    thread = conn._thread
    assert thread is not None
    started = time.monotonic()
    with within(0.5):  # the bound around the call (a drop's release, a shutdown)
        with trio.move_on_after(0.1):
            await conn.fetch("SELECT stall()")
    took = time.monotonic() - started
    assert 0.5 <= took < 0.5 + SLACK, took  # the wait for the thread ended at the deadline
    with pytest.raises(ConnectionLost, match="abandoned"):
        await conn.fetch("SELECT 1")
    await pool.give_back(conn)  # its caller hands it back: the pool never hands it out again
    other = await pool.acquire()
    assert other is not conn
    assert await other.fetch("SELECT 1") == [(1,)]
    await pool.give_back(other)
    released.set()
    thread._thread.join(SLACK)  # it ends after the cut call and the close behind it
    assert not thread._thread.is_alive()
    with pytest.raises(sqlite3.ProgrammingError):  # closed on its thread once the call let go
        conn._raw.execute("SELECT 1")
    await pool.aclose()


def test_a_keyboard_interrupt_while_a_call_waits_holds_the_guard(tmp_path: Path) -> None:
    """trio delivers a KeyboardInterrupt to its main task where it waits, as a cancel: the
    call is cut and waited for, so it never writes after its caller was interrupted."""
    path = tmp_path / "q.db"
    conns: list[SqliteConnection] = []
    holders: list[sqlite3.Connection] = []

    async def main() -> None:
        pool = await _pool(path)
        conn = await pool.acquire()
        conns.append(conn)
        holder = sqlite3.connect(path, isolation_level=None)
        holders.append(holder)
        holder.execute("BEGIN IMMEDIATE")  # the file's write lock, held past the interrupt

        async def interrupt() -> None:
            await trio.sleep(0.3)  # the insert waits in SQLite's busy handler by now
            signal.raise_signal(signal.SIGINT)

        trio.lowlevel.spawn_system_task(interrupt)
        await conn.execute("INSERT INTO t (n) VALUES (1)")  # the main task waits here

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    (holder,) = holders
    holder.rollback()  # the write lock is free: a call still waiting would insert now
    holder.close()
    (conn,) = conns
    drained(conn)
    assert rows(path) == 0
    assert not conn.in_transaction
    conn._raw.close()
