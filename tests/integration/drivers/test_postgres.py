"""What only the PostgreSQL driver does: command tags, timestamptz parameters, COMMIT of an
aborted transaction, serialization failures, LISTEN/NOTIFY, and keeping a cut connection."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
import trio

from trinbox._drivers.postgres import PgConnection, PgPool, _rowcount, open_pool
from trinbox.errors import DatabaseError, LockNotAvailable

from .harness import Backend


@pytest.mark.parametrize(
    ("status", "count"),
    [
        ("UPDATE 3", 3),
        ("DELETE 1", 1),
        ("INSERT 0 1", 1),
        ("INSERT 0 12", 12),
        ("SELECT 7", 7),
        ("MERGE 2", 2),
        ("COPY 5", 5),
        ("BEGIN", 0),
        ("CREATE TABLE", 0),
        ("", 0),
    ],
)
def test_rowcount_reads_the_command_tag(status: str, count: int) -> None:
    assert _rowcount(status) == count


@pytest.fixture
async def pg_pool(pg_backend: Backend) -> AsyncIterator[PgPool]:
    pool = await open_pool(pg_backend.url, max_size=2)
    try:
        yield pool
    finally:
        await pool.aclose()


async def test_naive_datetimes_are_utc(pg_pool: PgPool) -> None:
    conn = await pg_pool.acquire()
    try:
        await conn.execute("CREATE TABLE times (id int PRIMARY KEY, at timestamptz NOT NULL)")
        naive = datetime(2026, 1, 2, 3, 4, 5, 678901)
        aware = datetime(2026, 1, 2, 5, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
        insert = "INSERT INTO times (id, at) VALUES ($1, $2)"
        assert await conn.execute(insert, [1, naive]) == 1
        assert await conn.execute(insert, [2, aware]) == 1
        rows = await conn.fetch("SELECT at FROM times ORDER BY id")
        assert rows == [(naive.replace(tzinfo=UTC),), (naive.replace(tzinfo=UTC),)]
        at = rows[0][0]
        assert isinstance(at, datetime) and at.tzinfo is not None
    finally:
        await pg_pool.give_back(conn)


async def test_begin_runs_the_given_text(pg_pool: PgPool) -> None:
    conn = await pg_pool.acquire()
    try:
        await conn.begin("BEGIN ISOLATION LEVEL SERIALIZABLE")
        assert conn.in_transaction
        assert await conn.fetch("SHOW transaction_isolation") == [("serializable",)]
        await conn.rollback()
        assert not conn.in_transaction
    finally:
        await pg_pool.give_back(conn)


async def test_commit_of_an_aborted_transaction_raises(pg_pool: PgPool) -> None:
    conn = await pg_pool.acquire()
    try:
        await conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        await conn.begin("BEGIN")
        await conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(DatabaseError):
            await conn.execute("SELECT 1 / 0")
        assert conn.in_transaction  # aborted, still open
        with pytest.raises(DatabaseError) as aborted:
            await conn.execute("SELECT 1")
        assert aborted.value.code == "25P02"
        with pytest.raises(DatabaseError) as caught:
            await conn.commit()
        assert caught.value.code == "25P02"
        assert "rolled back" in str(caught.value)
        assert not conn.in_transaction
        assert await conn.fetch("SELECT count(*) FROM t") == [(0,)]
    finally:
        await pg_pool.give_back(conn)


async def test_serialization_failure_is_lock_not_available(pg_pool: PgPool) -> None:
    a = await pg_pool.acquire()
    b = await pg_pool.acquire()
    try:
        await a.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        await a.execute("INSERT INTO t VALUES (1, 0)")
        await a.begin("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert await a.fetch("SELECT v FROM t WHERE id = 1") == [(0,)]  # the snapshot
        assert await b.execute("UPDATE t SET v = 1 WHERE id = 1") == 1  # autocommit
        with pytest.raises(LockNotAvailable) as caught:
            await a.execute("UPDATE t SET v = 2 WHERE id = 1")
        assert caught.value.code == "40001"
    finally:
        await pg_pool.give_back(a)
        await pg_pool.give_back(b)


async def test_wrong_parameter_type_is_a_database_error(pg_pool: PgPool) -> None:
    conn = await pg_pool.acquire()
    try:
        with pytest.raises(DatabaseError) as caught:
            await conn.fetch("SELECT $1::int", ["not a number"])
        assert type(caught.value.__cause__).__module__.startswith("asyncpg")
        assert await conn.fetch("SELECT $1::int", [5]) == [(5,)]
    finally:
        await pg_pool.give_back(conn)


async def test_listen_delivers_notifications_on_the_trio_side(pg_pool: PgPool) -> None:
    listener = await pg_pool.acquire()
    sender = await pg_pool.acquire()
    send, receive = trio.open_memory_channel[tuple[str, str]](math.inf)
    try:
        await listener.listen("jobs", lambda channel, payload: send.send_nowait((channel, payload)))
        await listener.listen(
            "other", lambda channel, payload: send.send_nowait((channel, payload))
        )
        await sender.execute("SELECT pg_notify('jobs', 'first')")
        with trio.fail_after(5):
            assert await receive.receive() == ("jobs", "first")
        await listener.unlisten("jobs")
        await sender.execute("SELECT pg_notify('jobs', 'unheard')")
        await sender.execute("SELECT pg_notify('other', 'second')")
        with trio.fail_after(5):
            # notifications of one sender arrive in order: 'unheard' would come first
            assert await receive.receive() == ("other", "second")
        assert await listener.fetch("SELECT pg_listening_channels()") == [("other",)]
    finally:
        await pg_pool.give_back(listener)
        await pg_pool.give_back(sender)
    # a released connection listens no more
    again = await pg_pool.acquire()
    try:
        assert again is listener or again is sender
        assert await again.fetch("SELECT pg_listening_channels()") == []
        assert isinstance(again, PgConnection)
    finally:
        await pg_pool.give_back(again)


async def test_a_cut_connection_is_rolled_back_and_kept(pg_backend: Backend) -> None:
    # asyncpg cancels the statement on the server: the connection itself survives.
    pool = await open_pool(pg_backend.url, max_size=1)
    try:
        conn = await pool.acquire()
        pid = conn.server_pid
        try:
            await conn.begin("BEGIN")
            with trio.move_on_after(0.2) as scope:
                await conn.execute("SELECT pg_sleep(5)")
            assert scope.cancelled_caught
        finally:
            await pool.give_back(conn)
        again = await pool.acquire()
        try:
            assert again is conn and again.server_pid == pid
            assert not again.in_transaction
            assert await again.fetch("SELECT 1") == [(1,)]
        finally:
            await pool.give_back(again)
    finally:
        await pool.aclose()
