"""The driver contract (trinbox/_drivers/_base.py), run once per asyncio driver against a real
server: statements and row counts, transactions, prepare, error translation, the pool, and the
cancellation traps of docs/drivers.md#g1-transaction-cancel, docs/drivers.md#g2-pool-acquire-cancel,
docs/drivers.md#g4-mariadb-cancel."""

from __future__ import annotations

import pytest
import trio

from trinbox._drivers import mysql, postgres
from trinbox._drivers._base import Op
from trinbox.errors import (
    Closed,
    ConnectError,
    ConnectionLost,
    DatabaseError,
    IntegrityError,
    LockNotAvailable,
)

from .harness import Backend, TestConnection, TestPool, session_id, using

TABLE = "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(50))"


async def _table(pool: TestPool, backend: Backend, rows: int = 3) -> None:
    async with using(pool) as conn:
        await conn.execute(TABLE)
        for i in range(1, rows + 1):
            await conn.execute(backend.q("INSERT INTO t (id, v) VALUES (?, ?)"), [i, f"v{i}"])


async def _setup(conn: TestConnection, backend: Backend) -> None:
    for sql in backend.setup:
        await conn.execute(sql)


# -- statements -------------------------------------------------------------------------------


async def test_execute_counts_rows_and_fetch_returns_tuples(
    pool: TestPool, backend: Backend
) -> None:
    async with using(pool) as conn:
        assert await conn.execute(TABLE) == 0
        insert = backend.q("INSERT INTO t (id, v) VALUES (?, ?), (?, ?), (?, ?)")
        assert await conn.execute(insert, [1, "a", 2, "b", 3, "c"]) == 3
        assert await conn.execute(backend.q("UPDATE t SET v = ? WHERE id >= ?"), ["x", 2]) == 2
        assert await conn.execute(backend.q("DELETE FROM t WHERE id = ?"), [3]) == 1
        assert await conn.execute("SELECT id FROM t") == 2
        rows = await conn.fetch("SELECT id, v FROM t ORDER BY id")
        assert rows == [(1, "a"), (2, "x")]
        assert all(type(row) is tuple for row in rows)
        assert await conn.fetch(backend.q("SELECT id FROM t WHERE id = ?"), [99]) == []


async def test_row_counts_are_rows_matched(pool: TestPool, backend: Backend) -> None:
    # An UPDATE that writes the value a row already has still counts it, on both drivers.
    await _table(pool, backend)
    async with using(pool) as conn:
        assert await conn.execute(backend.q("UPDATE t SET v = ? WHERE id = ?"), ["v1", 1]) == 1


async def test_rollback_undoes_and_commit_keeps(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend, rows=0)
    insert = backend.q("INSERT INTO t (id, v) VALUES (?, ?)")
    async with using(pool) as conn:
        assert not conn.in_transaction
        await conn.begin("BEGIN")
        assert conn.in_transaction
        await conn.execute(insert, [1, "rolled back"])
        await conn.rollback()
        assert not conn.in_transaction
        await conn.begin("BEGIN")
        await conn.execute(insert, [2, "kept"])
        await conn.commit()
        assert not conn.in_transaction
        assert await conn.fetch("SELECT id, v FROM t") == [(2, "kept")]


async def test_release_rolls_back_an_open_transaction(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend, rows=0)
    conn = await pool.acquire()
    await conn.begin("BEGIN")
    await conn.execute(backend.q("INSERT INTO t (id, v) VALUES (?, ?)"), [1, "left open"])
    await pool.give_back(conn)
    async with using(pool) as again:
        assert not again.in_transaction
        assert await again.fetch("SELECT id FROM t") == []


async def test_prepare_checks_tables_and_columns(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend)
    async with using(pool) as conn:
        await conn.prepare(backend.q("SELECT id, v FROM t WHERE id = ? ORDER BY id LIMIT ?"))
        await conn.prepare(backend.q("UPDATE t SET v = ? WHERE id = ?"))
        await conn.prepare(backend.q("DELETE FROM t WHERE id = ?"))
        await conn.prepare(backend.q("INSERT INTO t (id, v) VALUES (?, ?)"))
        with pytest.raises(DatabaseError) as missing_table:
            await conn.prepare(backend.q("SELECT id FROM nope WHERE id = ?"))
        assert missing_table.value.statement == backend.q("SELECT id FROM nope WHERE id = ?")
        assert missing_table.value.code in ("42P01", "1146")
        with pytest.raises(DatabaseError) as missing_column:
            await conn.prepare(backend.q("UPDATE t SET nope = ? WHERE id = ?"))
        assert missing_column.value.code in ("42703", "1054")
        # prepare ran nothing
        assert await conn.fetch("SELECT count(*) FROM t") == [(3,)]


# -- errors -----------------------------------------------------------------------------------


async def test_unique_violation_is_an_integrity_error(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend)
    sql = backend.q("INSERT INTO t (id, v) VALUES (?, ?)")
    async with using(pool) as conn:
        with pytest.raises(IntegrityError) as caught:
            await conn.execute(sql, [1, "again"])
    assert caught.value.statement == sql
    assert caught.value.code in ("23505", "1062")
    # the driver's exception is chained, never raised
    assert caught.value.__cause__ is not None
    assert type(caught.value.__cause__).__module__.split(".")[0] in ("asyncpg", "pymysql")


async def test_syntax_error_is_a_database_error(pool: TestPool) -> None:
    async with using(pool) as conn:
        with pytest.raises(DatabaseError) as caught:
            await conn.execute("SELEC 1")
        assert type(caught.value) is DatabaseError
        assert caught.value.code in ("42601", "1064")
        # the connection still serves
        assert await conn.fetch("SELECT 1") == [(1,)]


async def test_nowait_on_a_locked_row_is_lock_not_available(
    pool: TestPool, backend: Backend
) -> None:
    await _table(pool, backend)
    lock = "SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT"
    async with using(pool) as holder, using(pool) as other:
        await holder.begin("BEGIN")
        assert await holder.fetch(lock) == [(1,)]
        await other.begin("BEGIN")
        with pytest.raises(LockNotAvailable) as caught:
            await other.fetch(lock)
        assert caught.value.code in ("55P03", "1205", "3572")
        await other.rollback()
        await holder.rollback()


async def test_deadlock_is_lock_not_available(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend)
    lock = backend.q("SELECT id FROM t WHERE id = ? FOR UPDATE")
    failures: list[LockNotAvailable] = []

    async def cross(conn: TestConnection, other_row: int) -> None:
        try:
            await conn.fetch(lock, [other_row])
        except LockNotAvailable as exc:
            failures.append(exc)
        # the loser's rollback lets the winner through
        await conn.rollback()

    async with using(pool) as a, using(pool) as b:
        for conn, row in ((a, 1), (b, 2)):
            await _setup(conn, backend)
            await conn.begin("BEGIN")
            await conn.fetch(lock, [row])
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cross, a, 2)
                nursery.start_soon(cross, b, 1)
    assert len(failures) == 1
    assert failures[0].code in ("40P01", "1213")


async def test_session_killed_by_the_server_is_connection_lost(
    pool: TestPool, observer: TestPool, backend: Backend
) -> None:
    conn = await pool.acquire()
    try:
        async with using(observer) as killer:
            await killer.execute(backend.kill, [session_id(conn)])
        with pytest.raises(ConnectionLost):
            await conn.fetch("SELECT 1")
    finally:
        await pool.give_back(conn)
    # the lost connection was dropped, not handed out again
    assert pool.in_use == 0
    async with using(pool) as fresh:
        assert session_id(fresh) != session_id(conn)
        assert await fresh.fetch("SELECT 1") == [(1,)]


async def test_connect_failure_is_a_connect_error(backend: Backend) -> None:
    wrong = backend.url.rsplit("/", 1)[0] + "/no_such_database_here"
    with pytest.raises(ConnectError) as caught:
        await Backend(backend.kind, wrong).open_pool(1)
    assert caught.value.statement == "connect"
    assert caught.value.__cause__ is not None


# -- the pool ---------------------------------------------------------------------------------


async def test_try_acquire_is_none_when_the_pool_is_full(pool: TestPool) -> None:
    assert pool.max_size == 3
    held = [await pool.acquire() for _ in range(3)]
    assert await pool.try_acquire() is None
    await pool.give_back(held.pop())
    again = await pool.try_acquire()
    assert again is not None
    held.append(again)
    assert await pool.try_acquire() is None
    for conn in held:
        await pool.give_back(conn)
    assert (pool.in_use, pool.idle) == (0, 3)


async def test_try_acquire_opens_a_connection_below_max_size(pool: TestPool) -> None:
    assert pool.size == 1  # open_pool opened one
    first = await pool.acquire()
    second = await pool.try_acquire()
    assert second is not None
    assert pool.size == 2
    await pool.give_back(first)
    await pool.give_back(second)


async def test_acquire_waits_for_a_release(pool: TestPool) -> None:
    held = [await pool.acquire() for _ in range(3)]
    got: list[TestConnection] = []
    waiting = trio.Event()

    async def take() -> None:
        waiting.set()
        got.append(await pool.acquire())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        await waiting.wait()
        assert got == []
        await pool.give_back(held[0])
    assert got == [held[0]]
    for conn in [*got, *held[1:]]:
        await pool.give_back(conn)


async def test_cancelled_acquire_takes_no_slot(pool: TestPool) -> None:
    held = [await pool.acquire() for _ in range(3)]
    with trio.CancelScope() as scope:
        scope.cancel()
        await pool.acquire()
    assert scope.cancelled_caught
    for conn in held:
        await pool.give_back(conn)
    assert pool.in_use == 0
    again = [await pool.acquire() for _ in range(3)]
    for conn in again:
        await pool.give_back(conn)


async def test_release_in_a_cancelled_scope_still_rolls_back(
    pool: TestPool, backend: Backend
) -> None:
    # G2: a cleanup inside a cancelled scope is not cut short.
    await _table(pool, backend, rows=0)
    conn = await pool.acquire()
    await conn.begin("BEGIN")
    await conn.execute(backend.q("INSERT INTO t (id, v) VALUES (?, ?)"), [1, "x"])
    with trio.CancelScope() as scope:
        scope.cancel()
        await pool.give_back(conn)
    assert pool.in_use == 0
    async with using(pool) as again:
        assert not again.in_transaction
        assert await again.fetch("SELECT id FROM t") == []


async def test_release_and_discard_are_idempotent(pool: TestPool) -> None:
    conn = await pool.acquire()
    await pool.give_back(conn)
    await pool.give_back(conn)
    await pool.close(conn)  # closes it; the slot was given back once only
    assert pool.in_use == 0
    held = [await pool.acquire() for _ in range(3)]
    assert conn not in held
    assert await pool.try_acquire() is None
    for each in held:
        await pool.give_back(each)


async def test_discard_closes_for_good(pool: TestPool) -> None:
    conn = await pool.acquire()
    gone = session_id(conn)
    await pool.close(conn)
    assert not conn.alive
    assert (pool.in_use, pool.idle) == (0, 0)
    async with using(pool) as fresh:
        assert session_id(fresh) != gone


async def test_aclose_closes_and_refuses(backend: Backend) -> None:
    pool = await backend.open_pool(2)
    conn = await pool.acquire()
    await pool.give_back(conn)
    await pool.aclose()
    assert pool.size == 0
    with pytest.raises(Closed):
        await pool.acquire()
    with pytest.raises(Closed):
        await pool.try_acquire()


async def test_identity_names_the_database(pool: TestPool, backend: Backend) -> None:
    database = backend.url.rsplit("/", 1)[1]
    assert pool.identity.startswith(f"{backend.kind}:127.0.0.1:")
    assert pool.identity.endswith("/" + database)


async def test_open_pool_needs_a_trio_asyncio_loop() -> None:
    for module, url in ((postgres, "postgresql://x@127.0.0.1:1/x"), (mysql, "mysql://x@h/x")):
        with pytest.raises(RuntimeError, match="trio-asyncio loop"):
            await module.open_pool(url, max_size=1)


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_mid_statement_in_a_transaction_frees_everything(
    pool: TestPool, observer: TestPool, backend: Backend
) -> None:
    """The row lock trap: a cancel while a locking transaction runs a long statement leaves
    no connection leaked, none in a transaction, and the row free at once."""
    await _table(pool, backend)
    started = trio.current_time()
    conn = await pool.acquire()
    cut = session_id(conn)
    try:
        await conn.begin("BEGIN")
        assert await conn.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE") == [(1,)]
        with trio.move_on_after(0.3) as scope:
            await conn.execute(backend.sleep)
        assert scope.cancelled_caught
    finally:
        await pool.give_back(conn)
    # The cancel, the cleanup and the release finished long before the 5 s sleep would.
    assert trio.current_time() - started < 3
    assert pool.in_use == 0
    assert pool.size <= pool.max_size

    async with using(observer) as look:
        # the row lock is free now: NOWAIT would fail if anyone still held it
        await look.begin("BEGIN")
        assert await look.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT") == [(1,)]
        await look.rollback()
        # (outside a transaction: PostgreSQL's activity view is a per-transaction snapshot)
        await backend.settle_transaction_list()
        assert await look.fetch(backend.open_transactions) == [(0,)]
        sessions = {row[0] for row in await look.fetch(backend.sessions)}
    if backend.kind == "mysql":
        assert cut not in sessions  # killed, never reused
    held = [await pool.acquire() for _ in range(pool.max_size)]
    try:
        for each in held:
            assert not each.in_transaction
            assert await each.fetch("SELECT 1") == [(1,)]
    finally:
        for each in held:
            await pool.give_back(each)


async def test_cancel_from_a_sibling_task_mid_statement(
    pool: TestPool, observer: TestPool, backend: Backend
) -> None:
    await _table(pool, backend)
    locked = trio.Event()

    async def worker() -> None:
        async with using(pool) as conn:
            await conn.begin("BEGIN")
            await conn.fetch("SELECT id FROM t WHERE id = 2 FOR UPDATE")
            locked.set()
            await conn.execute(backend.sleep)

    with trio.fail_after(3):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker)
            await locked.wait()
            nursery.cancel_scope.cancel()
    assert pool.in_use == 0
    async with using(observer) as look:
        assert await look.fetch("SELECT id FROM t WHERE id = 2 FOR UPDATE SKIP LOCKED") == [(2,)]


async def test_cancel_mid_statement_outside_a_transaction(pool: TestPool, backend: Backend) -> None:
    conn = await pool.acquire()
    try:
        with trio.move_on_after(0.2) as scope:
            await conn.execute(backend.sleep)
        assert scope.cancelled_caught
    finally:
        await pool.give_back(conn)
    assert pool.in_use == 0
    async with using(pool) as again:
        assert await again.fetch("SELECT 1") == [(1,)]


async def test_cancel_during_commit_leaves_no_open_transaction(
    pool: TestPool, observer: TestPool, backend: Backend
) -> None:
    await _table(pool, backend)
    conn = await pool.acquire()
    try:
        await conn.begin("BEGIN")
        await conn.execute(backend.q("UPDATE t SET v = ? WHERE id = ?"), ["c", 1])
        with trio.CancelScope() as scope:
            scope.cancel()
            await conn.commit()
    finally:
        await pool.give_back(conn)
    async with using(observer) as look:
        await backend.settle_transaction_list()
        assert await look.fetch(backend.open_transactions) == [(0,)]
        assert await look.fetch("SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT") == [(1,)]


async def test_repeated_cancels_never_leak(pool: TestPool, backend: Backend) -> None:
    await _table(pool, backend)
    for i in range(8):
        async with trio.open_nursery() as nursery:
            for _ in range(pool.max_size):

                async def work() -> None:
                    async with using(pool) as conn:
                        await conn.begin("BEGIN")
                        await conn.execute(backend.sleep)

                nursery.start_soon(work)
            # vary where the cut lands (connect, BEGIN, the sleep): here timing is the point
            await trio.sleep(0.002 * i)
            nursery.cancel_scope.cancel()
        assert pool.in_use == 0
    async with using(pool) as conn:
        assert await conn.fetch("SELECT count(*) FROM t") == [(3,)]
    assert pool.size <= pool.max_size


async def test_a_failed_script_names_its_step_and_keeps_the_results_before_it(
    pool: TestPool, backend: Backend
) -> None:
    await _table(pool, backend)
    ops = [
        Op("execute", backend.q("UPDATE t SET v = ? WHERE id = ?"), ["x", 1]),
        Op("fetch", "SELECT id FROM t ORDER BY id"),
        Op("execute", backend.q("INSERT INTO t (id, v) VALUES (?, ?)"), [1, "taken"]),
        Op("fetch", "SELECT 1"),
    ]
    async with using(pool) as conn:
        with pytest.raises(IntegrityError) as caught:
            await conn.script(ops)
        assert caught.value.step == 2
        assert caught.value.results == [1, [(1,), (2,), (3,)]]
