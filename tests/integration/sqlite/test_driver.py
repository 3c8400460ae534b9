"""The SQLite driver's one-call scripts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from trinbox._drivers._base import Op
from trinbox._drivers.sqlite import TIME_FORMAT, SqlitePool, _param
from trinbox.errors import IntegrityError


async def test_a_failed_script_names_its_step_and_keeps_the_results_before_it(
    tmp_path: Path,
) -> None:
    pool = SqlitePool(str(tmp_path / "q.db"))
    conn = await pool.acquire()
    await conn.executescript(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
        "INSERT INTO t (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')"
    )
    ops = [
        Op("execute", "UPDATE t SET v = ? WHERE id = ?", ["x", 1]),
        Op("fetch", "SELECT id FROM t ORDER BY id"),
        Op("execute", "INSERT INTO t (id, v) VALUES (?, ?)", [1, "taken"]),
        Op("fetch", "SELECT 1"),
    ]
    with pytest.raises(IntegrityError) as caught:
        await conn.script(ops)
    assert caught.value.step == 2
    assert caught.value.results == [1, [(1,), (2,), (3,)]]
    await pool.give_back(conn)
    await pool.aclose()


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 29, 20, 37, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone(timedelta(hours=2))),
        datetime(2000, 1, 1),
        datetime(2030, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_a_time_is_stored_as_utc_text_that_sorts_as_time(value: datetime) -> None:
    utc = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    assert _param(value) == utc.strftime(TIME_FORMAT)


async def test_a_connection_runs_its_calls_on_its_own_thread_which_ends_with_it(
    tmp_path: Path,
) -> None:
    """Each connection has one long-lived thread (not one of Trio's per call); closing the
    connection, or abandoning it, ends that thread."""
    pool = SqlitePool(str(tmp_path / "q.db"))
    conn = await pool.acquire()
    other = await pool.acquire()
    names = [await conn.fetch("SELECT 1") for _ in range(3)]
    assert names == [[(1,)]] * 3
    await other.execute("SELECT 1")
    thread = conn._thread
    assert thread is not None and other._thread is not None
    assert thread is not other._thread
    worker = thread._thread
    assert worker.is_alive() and worker.name == "trinbox-sqlite"
    other_worker = other._thread._thread
    await pool.give_back(conn)
    await pool.give_back(other)
    assert conn._thread is thread  # an idle connection keeps its thread
    pool.abandon(other)
    await pool.aclose()
    worker.join(5)
    other_worker.join(5)
    assert not worker.is_alive()
    assert not other_worker.is_alive()


async def test_a_connection_dropped_without_a_close_ends_its_thread(tmp_path: Path) -> None:
    import gc

    pool = SqlitePool(str(tmp_path / "q.db"))
    conn = await pool.acquire()
    await conn.execute("SELECT 1")
    assert conn._thread is not None
    worker = conn._thread._thread
    pool._out.discard(conn)  # the pool forgets it: nothing holds the connection now
    del conn
    gc.collect()
    worker.join(5)
    assert not worker.is_alive()
    await pool.aclose()
