"""What only the MySQL/MariaDB driver does: binary parameters (the PyMySQL <1.2 pin),
naive-UTC datetimes, ``SET TRANSACTION`` isolation levels, ``EXPLAIN`` as prepare, the server
version, and killing a connection a cancel cut (docs/drivers.md#g4-mariadb-cancel)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import pytest
import trio

from trinbox._drivers.mysql import MySqlPool, _explain_args, open_pool
from trinbox.errors import ConnectionLost, DatabaseError, LockNotAvailable

from .harness import Backend, using


@pytest.fixture
async def my_pool(mysql_backend: Backend) -> AsyncIterator[MySqlPool]:
    pool = await open_pool(mysql_backend.url, max_size=2)
    try:
        yield pool
    finally:
        await pool.aclose()


@pytest.fixture
async def observer(mysql_backend: Backend) -> AsyncIterator[MySqlPool]:
    pool = await open_pool(mysql_backend.url, max_size=1)
    try:
        yield pool
    finally:
        await pool.aclose()


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("SELECT a FROM t WHERE b = %s ORDER BY a LIMIT %s FOR UPDATE SKIP LOCKED", (None, 1)),
        ("SELECT a FROM t LIMIT %s OFFSET %s", (1, 1)),
        ("SELECT a FROM t LIMIT %s, %s", (1, 1)),
        ("  (SELECT a FROM t WHERE a = %s)", (None,)),
        ("UPDATE t SET a = %s WHERE b LIKE 'x%%' AND c = %s", (None, None)),
        ("DELETE FROM t WHERE a = %s RETURNING a", (None,)),
        ("insert into t (a) values (%s)", (None,)),
        ("WITH x AS (SELECT a FROM t) SELECT * FROM x", ()),
        ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", None),
        ("START TRANSACTION", None),
        ("SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)", None),
        ("SELECT RELEASE_LOCK(%s)", None),
        ("", None),
    ],
)
def test_explain_args(sql: str, args: tuple[object, ...] | None) -> None:
    assert _explain_args(sql) == args


async def test_binary_parameters_round_trip(my_pool: MySqlPool) -> None:
    every_byte = bytes(range(256))
    large = os.urandom(1 << 20)
    payloads = [every_byte, every_byte[::-1], b"", b"\x00", b"'\\\"%s%%", large]
    async with using(my_pool) as conn:
        await conn.execute("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)")
        for i, payload in enumerate(payloads):
            assert await conn.execute("INSERT INTO blobs VALUES (%s, %s)", [i, payload]) == 1
        rows = await conn.fetch("SELECT id, b FROM blobs ORDER BY id")
        assert rows == list(enumerate(payloads))
        assert all(type(b) is bytes for _, b in rows)
        assert await conn.fetch("SELECT id FROM blobs WHERE b = %s", [every_byte]) == [(0,)]


async def test_datetimes_are_naive_utc(my_pool: MySqlPool) -> None:
    async with using(my_pool) as conn:
        await conn.execute("CREATE TABLE times (id INT PRIMARY KEY, at DATETIME(6) NOT NULL)")
        naive = datetime(2026, 1, 2, 3, 4, 5, 678901)
        aware = datetime(2026, 1, 2, 5, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
        await conn.execute("INSERT INTO times VALUES (%s, %s), (%s, %s)", [1, naive, 2, aware])
        assert await conn.fetch("SELECT at FROM times ORDER BY id") == [(naive,), (naive,)]
        assert await conn.fetch("SELECT @@session.time_zone, @@autocommit") == [("+00:00", 1)]


async def test_begin_opens_the_set_transaction_level(my_pool: MySqlPool) -> None:
    async with using(my_pool) as conn:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await conn.begin("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        assert conn.in_transaction
        await conn.fetch("SELECT id FROM t")  # InnoDB starts the transaction on first read
        level = (
            "SELECT trx_isolation_level FROM information_schema.INNODB_TRX "
            "WHERE trx_mysql_thread_id = CONNECTION_ID()"
        )
        assert await conn.fetch(level) == [("SERIALIZABLE",)]
        await conn.commit()
        assert not conn.in_transaction
        await conn.begin("START TRANSACTION")
        assert conn.in_transaction
        await conn.rollback()
        assert not conn.in_transaction


async def test_prepare_runs_nothing(my_pool: MySqlPool, observer: MySqlPool) -> None:
    async with using(my_pool) as conn:
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        await conn.execute("INSERT INTO t VALUES (1, 'a%%')")
        await conn.prepare("DELETE FROM t WHERE id = %s")
        await conn.prepare("UPDATE t SET v = 'b%%' WHERE v LIKE 'a%%' AND id = %s")
        await conn.prepare("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        assert not conn.in_transaction
        await conn.prepare("SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)")
        assert await conn.fetch("SELECT id, v FROM t") == [(1, "a%")]
        with pytest.raises(DatabaseError) as caught:
            await conn.prepare("SELECT id FROM t WHERE missing = %s LIMIT %s")
        assert caught.value.code == "1054"
        assert caught.value.statement == "SELECT id FROM t WHERE missing = %s LIMIT %s"


async def test_server_version(my_pool: MySqlPool) -> None:
    version = await my_pool.server_version()
    assert version[0].isdigit()
    async with using(my_pool) as conn:
        assert await conn.server_version() == version


async def test_lock_wait_timeout_is_lock_not_available(my_pool: MySqlPool) -> None:
    async with using(my_pool) as holder, using(my_pool) as waiter:
        await holder.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await holder.execute("INSERT INTO t VALUES (1)")
        await holder.begin("START TRANSACTION")
        await holder.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE")
        await waiter.execute("SET SESSION innodb_lock_wait_timeout = 1")
        await waiter.begin("START TRANSACTION")
        with pytest.raises(LockNotAvailable) as caught:
            await waiter.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE")
        assert caught.value.code == "1205"
        await waiter.rollback()
        await holder.rollback()


async def test_a_cut_connection_is_killed_before_the_cancel_returns(
    my_pool: MySqlPool, observer: MySqlPool
) -> None:
    conn = await my_pool.acquire()
    try:
        thread = conn.thread_id
        await conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        await conn.execute("INSERT INTO t VALUES (1)")
        await conn.begin("START TRANSACTION")
        await conn.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE")
        with trio.move_on_after(0.2) as scope:
            await conn.fetch("SELECT SLEEP(5)")
        assert scope.cancelled_caught
        # Not yet released, and already gone from the server with its locks.
        async with using(observer) as look:
            ids = await look.fetch("SELECT ID FROM information_schema.PROCESSLIST")
            assert (thread,) not in ids
            assert await look.fetch("SELECT id FROM t FOR UPDATE NOWAIT") == [(1,)]
        assert not conn.alive
        with pytest.raises(ConnectionLost, match="cut by a cancel"):
            await conn.fetch("SELECT 1")
    finally:
        await my_pool.give_back(conn)
    assert (my_pool.in_use, my_pool.size) == (0, 0)


async def test_a_lone_percent_is_a_database_error(my_pool: MySqlPool) -> None:
    # PyMySQL interpolates on the client, so "%" is written "%%" (dialects/mysql.py).
    async with using(my_pool) as conn:
        with pytest.raises(DatabaseError, match="literal % is written %%"):
            await conn.fetch("SELECT 'a%'")
        with pytest.raises(DatabaseError, match="2 argument"):
            await conn.fetch("SELECT %s", [1, 2])
        assert await conn.fetch("SELECT 'a%%', %s", ["b%"]) == [("a%", "b%")]
