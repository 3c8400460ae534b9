"""SQLite's one writer per file: the pool's writers queue in Trio instead of sleeping in the
busy handler, and a transaction's own commit never waits behind a writer that waits for it."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from trinbox._drivers.sqlite import SqlitePool


async def test_writers_of_one_pool_queue_instead_of_being_turned_away(tmp_path: Path) -> None:
    # No busy wait at all: a writer SQLite turned away would fail at once ("database is
    # locked"), so every insert succeeding shows that no two writers met inside SQLite.
    pool = SqlitePool(str(tmp_path / "q.db"), max_size=8, busy_timeout=0)
    setup = await pool.acquire()
    await setup.executescript("PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER)")
    await pool.give_back(setup)

    async def writer(n: int) -> None:
        conn = await pool.acquire()
        try:
            for k in range(20):
                await conn.execute("INSERT INTO t (n) VALUES (?)", (n * 100 + k,))
        finally:
            await pool.give_back(conn)

    async with trio.open_nursery() as nursery:
        for n in range(8):
            nursery.start_soon(writer, n)
    check = await pool.acquire()
    assert await check.fetch("SELECT count(*) FROM t") == [(160,)]
    await pool.give_back(check)
    await pool.aclose()


async def test_a_commit_does_not_wait_behind_a_writer_that_waits_for_it(tmp_path: Path) -> None:
    pool = SqlitePool(str(tmp_path / "q.db"), max_size=4, busy_timeout=10)
    holder = await pool.acquire()
    await holder.executescript("PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER)")
    # The holder takes SQLite's write lock in a transaction and keeps it.
    await holder.begin("BEGIN IMMEDIATE")
    await holder.execute("INSERT INTO t (n) VALUES (1)")
    waiting = trio.Event()
    inserted: list[int] = []

    async def other_writer() -> None:
        conn = await pool.acquire()
        try:
            waiting.set()
            # Queued first in Trio, then in SQLite's busy handler behind the holder.
            inserted.append(await conn.execute("INSERT INTO t (n) VALUES (2)"))
        finally:
            await pool.give_back(conn)

    with trio.fail_after(5):  # well inside the busy timeout: no wait on the writer
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_writer)
            await waiting.wait()
            # Every task blocked: the other writer is in its worker thread, in SQLite's busy
            # handler behind the holder.
            await trio.testing.wait_all_tasks_blocked()
            await holder.commit()
    assert inserted == [1]
    assert await holder.fetch("SELECT n FROM t ORDER BY n") == [(1,), (2,)]
    await pool.give_back(holder)
    await pool.aclose()
