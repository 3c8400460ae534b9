"""The raw limit of each claim form: a minimal hand-written loop issuing the same SQL statements
trinbox issues (rendered by trinbox's dialect objects, so the text is exactly the same), straight
through asyncpg / aiomysql inside trio-asyncio, or sqlite3 on worker threads. No trinbox runtime
code runs: no pool, no forms, no subscription.

Four workers, each with its own connection. A unit of work (claim up to ``limit`` rows, settle
each with the form's ack, end the transaction or unlock) is ONE asyncio coroutine called from
Trio with one ``aio_as_trio`` hop, or one ``trio.to_thread.run_sync`` call for SQLite.

    python -m bench.raw DB URL FORM N [--batch K] [--no-fill]

Prints one JSON line: jobs/s and seconds, timed from the first claim until N rows are settled.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import trio

from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import Dialect
from trinbox._dialects._statement import Statement
from trinbox._dialects.plans import Plan, build_plan

from .common import GROUP, ROWS, WORKERS, emit, fill, lease_token, remaining, sqlite_file

LEASE = timedelta(seconds=30)
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"


def dialect_of(db: str) -> Dialect:
    if db == "postgres":
        from trinbox._dialects.postgres import PostgresDialect

        return PostgresDialect()
    if db == "mysql":
        from trinbox._dialects.mysql import MySqlDialect

        return MySqlDialect()
    from trinbox._dialects.sqlite import SqliteDialect

    return SqliteDialect()


def plan_for(db: str, form: str) -> Plan:
    """Every statement trinbox runs for the bench table's form on ``db``: its plan."""
    return build_plan(dialect_of(db), spec_of(ROWS[form]))


def args(statement: Statement, **values: object) -> tuple[object, ...]:
    return tuple(values[name] for name in statement.params)


# -- PostgreSQL: asyncpg, one asyncio coroutine per unit of work ------------------------------


async def pg_lease(conn: Any, st: Plan, limit: int) -> int:
    now = datetime.now(UTC)
    token = lease_token(now, LEASE)
    claim = st.claim[0]
    rows = await conn.fetch(claim.sql, *args(claim, group=GROUP, now=now, limit=limit, lease=token))
    many = st.batch_statement("ack")
    if limit > 1 and many is not None and rows:
        # A batch's rows settled alike: one statement for all of them, as trinbox does.
        ids = [row[0] for row in rows]
        await conn.fetch(many.sql, *args(many, ids=ids, token=token, now=now))
        return len(rows)
    for row in rows:
        await conn.execute(st.ack.sql, *args(st.ack, id=row[0], token=token, now=now))
    return len(rows)


async def pg_rowlock(conn: Any, st: Plan, limit: int) -> int:
    assert st.begin is not None
    claim = st.claim[0]
    await conn.execute(st.begin.sql)
    try:
        now = datetime.now(UTC)
        rows = await conn.fetch(claim.sql, *args(claim, group=GROUP, now=now, limit=limit))
        for row in rows:
            await conn.execute(st.ack.sql, *args(st.ack, id=row[0], now=now))
        await conn.execute("COMMIT")
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    return len(rows)


async def pg_advisory(conn: Any, st: Plan, limit: int) -> int:
    assert st.lock is not None and st.unlock is not None
    now = datetime.now(UTC)
    candidates = st.claim[0]
    take = st.take[0]
    rows = await conn.fetch(candidates.sql, *args(candidates, group=GROUP, now=now, limit=limit))
    taken: list[tuple[object, str]] = []
    seen: set[str] = set()
    for row_id, key in rows:
        if key in seen:
            continue
        seen.add(key)
        if not (await conn.fetch(st.lock.sql, key))[0][0]:
            continue
        if not await conn.fetch(take.sql, *args(take, id=row_id, group=GROUP, now=now)):
            await conn.fetch(st.unlock.sql, key)  # settled by another holder meanwhile
            continue
        taken.append((row_id, key))
    for row_id, key in taken:
        await conn.execute(st.ack.sql, *args(st.ack, id=row_id, now=now))
        await conn.fetch(st.unlock.sql, key)
    return len(taken)


# -- MariaDB: aiomysql, one asyncio coroutine per unit of work --------------------------------


async def my_execute(conn: Any, sql: str, params: tuple[object, ...] = ()) -> int:
    async with conn.cursor() as cur:
        return int(await cur.execute(sql, params))


async def my_fetch(conn: Any, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        return list(await cur.fetchall())


def naive_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


async def my_begin(conn: Any, statement: Statement) -> None:
    # SET TRANSACTION sets the level of the next transaction: open it (as trinbox's driver).
    await my_execute(conn, statement.sql)
    await my_execute(conn, "START TRANSACTION")


async def my_lease(
    conn: Any, st: Plan, limit: int, begin: Statement, plain_begin: Statement
) -> int:
    now = naive_now()
    token = lease_token(now, LEASE)
    select, stamp = st.claim
    await my_begin(conn, begin)
    try:
        rows = await my_fetch(
            conn, select.sql, args(select, group=GROUP, now=now, limit=limit, lease=token)
        )
        kept = []
        for row in rows:
            if await my_execute(conn, stamp.sql, args(stamp, id=row[0], now=now, lease=token)):
                kept.append(row)
        await conn.commit()
    except BaseException:
        await conn.rollback()
        raise
    # A batch's acks share one transaction, as trinbox settles a batch; one delivery's ack
    # commits on its own.
    if limit > 1 and kept:
        await my_begin(conn, plain_begin)
    for row in kept:
        await my_execute(conn, st.ack.sql, args(st.ack, id=row[0], token=token, now=now))
    if limit > 1 and kept:
        await conn.commit()
    return len(kept)


async def my_rowlock(conn: Any, st: Plan, limit: int) -> int:
    assert st.begin is not None
    claim = st.claim[0]
    await my_begin(conn, st.begin)
    try:
        now = naive_now()
        rows = await my_fetch(conn, claim.sql, args(claim, group=GROUP, now=now, limit=limit))
        for row in rows:
            await my_execute(conn, st.ack.sql, args(st.ack, id=row[0], now=now))
        await conn.commit()
    except BaseException:
        await conn.rollback()
        raise
    return len(rows)


async def my_advisory(conn: Any, st: Plan, limit: int) -> int:
    assert st.lock is not None and st.unlock is not None
    now = naive_now()
    candidates = st.claim[0]
    rows = await my_fetch(conn, candidates.sql, args(candidates, group=GROUP, now=now, limit=limit))
    taken: list[tuple[object, str]] = []
    seen: set[str] = set()
    for row_id, key in rows:
        if key in seen:
            continue
        seen.add(key)
        if not (await my_fetch(conn, st.lock.sql, (key,)))[0][0]:
            continue
        values = {"id": row_id, "group": GROUP, "now": now}
        update, select = st.take
        if not await my_execute(conn, update.sql, args(update, **values)):
            await my_fetch(conn, st.unlock.sql, (key,))
            continue
        await my_fetch(conn, select.sql, args(select, **values))
        taken.append((row_id, key))
    for row_id, key in taken:
        await my_execute(conn, st.ack.sql, args(st.ack, id=row_id, now=now))
        await my_fetch(conn, st.unlock.sql, (key,))
    return len(taken)


async def my_connect(url: str) -> Any:
    import aiomysql
    from pymysql.constants import CLIENT

    parts = urlsplit(url)
    return await aiomysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        db=unquote(parts.path.lstrip("/")),
        autocommit=True,
        charset="utf8mb4",
        client_flag=CLIENT.FOUND_ROWS,
        init_command="SET time_zone = '+00:00'",
    )


# -- SQLite: sqlite3, one worker-thread call per unit of work ---------------------------------


def lite_time(value: datetime) -> str:
    return value.astimezone(UTC).replace(tzinfo=None).strftime(SQLITE_TIME)


def lite_connect(path: str) -> sqlite3.Connection:
    raw = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA busy_timeout=5000")
    raw.execute("PRAGMA foreign_keys=ON")
    return raw


def lite_lease(conn: sqlite3.Connection, st: Plan, limit: int) -> int:
    now = datetime.now(UTC)
    token = lite_time(lease_token(now, LEASE))
    claim = st.claim[0]
    rows = conn.execute(
        claim.sql, args(claim, group=GROUP, now=lite_time(now), limit=limit, lease=token)
    ).fetchall()
    many = st.batch_statement("ack")
    if limit > 1 and many is not None and rows:
        # A batch's rows settled alike: one statement, the ids as a JSON array, as trinbox.
        ids = json.dumps([row[0] for row in rows])
        conn.execute(many.sql, args(many, ids=ids, token=token)).fetchall()
        return len(rows)
    for row in rows:
        conn.execute(st.ack.sql, args(st.ack, id=row[0], token=token))
    return len(rows)


WRITES = threading.Lock()  # the SQLite advisory loop's writers, one at a time


class Registry:
    """The keys in work (SQLite's stand-in for session locks, as trinbox keeps them)."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.lock = threading.Lock()

    def take(self, key: str) -> bool:
        with self.lock:
            if key in self.keys:
                return False
            self.keys.add(key)
            return True

    def give(self, key: str) -> None:
        with self.lock:
            self.keys.discard(key)

    def held(self) -> str:
        """The keys in work as the JSON array trinbox's candidate select passes over."""
        with self.lock:
            return json.dumps(sorted(self.keys))


def lite_advisory(conn: sqlite3.Connection, st: Plan, limit: int, keys: Registry) -> int:
    """Claim, take and ack in one transaction (one commit per unit of work, as trinbox's
    settlement with its worker's next claim is one); the keys go once it committed. Writers
    queue on one lock, as trinbox's do, instead of sleeping in SQLite's busy handler."""
    now = lite_time(datetime.now(UTC))
    taken: list[tuple[object, str]] = []
    with WRITES:
        _lite_advisory_unit(conn, st, limit, keys, now, taken)
    return len(taken)


def _lite_advisory_unit(
    conn: sqlite3.Connection,
    st: Plan,
    limit: int,
    keys: Registry,
    now: str,
    taken: list[tuple[object, str]],
) -> None:
    candidates = st.claim[0]
    take = st.take[0]
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute(
            candidates.sql, args(candidates, group=GROUP, now=now, limit=limit, held=keys.held())
        ).fetchall()
        for row_id, key in rows:
            if not keys.take(key):
                continue
            if not conn.execute(take.sql, args(take, id=row_id, group=GROUP, now=now)).fetchall():
                keys.give(key)
                continue
            taken.append((row_id, key))
        for row_id, _ in taken:
            conn.execute(st.ack.sql, args(st.ack, id=row_id, now=now))
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise
    finally:
        for _, key in taken:
            keys.give(key)


# -- the loop -------------------------------------------------------------------------------


async def workers(
    n: int, units: list[Callable[[], Awaitable[int]]], max_seconds: float
) -> tuple[float, int]:
    """Run one worker per unit function until ``n`` rows are settled (or ``max_seconds`` have
    passed: no new unit starts then); the seconds it took and the rows settled."""
    done = 0
    started = time.perf_counter()
    deadline = started + max_seconds

    async def worker(unit: Callable[[], Awaitable[int]]) -> None:
        nonlocal done
        while done < n and time.perf_counter() < deadline:
            got = await unit()
            done += got
            if not got:
                await trio.sleep(0.0005)  # the rest is held by other workers

    async with trio.open_nursery() as nursery:
        for unit in units:
            nursery.start_soon(worker, unit)
    return time.perf_counter() - started, done


async def run_raw(
    db: str,
    url: str,
    form: str,
    n: int,
    batch: int | None,
    max_seconds: float,
) -> dict[str, Any]:
    st = plan_for(db, form)
    limit = batch or 1
    form = form.removesuffix("-prio")  # a priority table's loop is its form's, on its SQL
    if db == "sqlite":
        path = sqlite_file(url)
        lite_conns = [lite_connect(path) for _ in range(WORKERS)]
        keys = Registry()

        def lite_unit(conn: sqlite3.Connection) -> Callable[[], Awaitable[int]]:
            if form == "lease":
                return lambda: trio.to_thread.run_sync(lite_lease, conn, st, limit)
            return lambda: trio.to_thread.run_sync(lite_advisory, conn, st, limit, keys)

        seconds, done = await workers(n, [lite_unit(c) for c in lite_conns], max_seconds)
        for lite in lite_conns:
            lite.close()
        return {"jobs_per_s": done / seconds, "seconds": seconds, "finished": done}

    import trio_asyncio
    from trio_asyncio import aio_as_trio

    async with trio_asyncio.open_loop():
        if db == "postgres":
            import asyncpg

            async def pg_connect() -> Any:
                return await asyncpg.connect(url)

            conns: list[Any] = [await aio_as_trio(pg_connect)() for _ in range(WORKERS)]
            pg_unit = {"lease": pg_lease, "rowlock": pg_rowlock}.get(form, pg_advisory)

            def unit(conn: Any) -> Callable[[], Awaitable[int]]:
                hop = aio_as_trio(pg_unit)
                return lambda: hop(conn, st, limit)

        else:
            conns = [await aio_as_trio(my_connect)(url) for _ in range(WORKERS)]
            begin = st.claim_begin
            plain = st.plain_begin

            def unit(conn: Any) -> Callable[[], Awaitable[int]]:
                if form == "lease":
                    lease_hop = aio_as_trio(my_lease)
                    return lambda: lease_hop(conn, st, limit, begin, plain)
                hop = aio_as_trio(my_rowlock if form == "rowlock" else my_advisory)
                return lambda: hop(conn, st, limit)

        try:
            seconds, done = await workers(n, [unit(c) for c in conns], max_seconds)
        finally:
            for c in conns:
                if db == "postgres":
                    await aio_as_trio(c.close)()
                else:
                    c.close()
    return {"jobs_per_s": done / seconds, "seconds": seconds, "finished": done}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("form", choices=sorted(ROWS))
    parser.add_argument("n", type=int)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--no-fill", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop undrained then")
    a = parser.parse_args()
    if not a.no_fill:
        fill(a.db, a.url, a.n, form=a.form)
    result = trio.run(run_raw, a.db, a.url, a.form, a.n, a.batch, a.max_seconds)
    left = remaining(a.db, a.url)
    result["left"] = left
    result["drained"] = result["finished"] >= a.n
    result["ok"] = left == a.n - result["finished"]
    emit(result)


if __name__ == "__main__":
    main()
