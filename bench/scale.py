"""Claim latency with few and with many rows waiting: the lease form's claim of one row, timed
inside a raw loop (the same SQL trinbox runs, rendered by its dialect; the claim order indexed
on ``(name, retry_after, id)``), with 1,000 and with 1,000,000 rows in the queue.

    python -m bench.scale DB URL [--sizes 1000,1000000] [--claims 300]

Each claim takes the head row and is then acked (not timed), so the next claim finds the head
gone, as in a drain. The first 20 claims of each size warm up and are not counted. Prints one
JSON line: per size the p50 and mean claim time in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import trio

from .common import GROUP, emit, fill, lease_token, sqlite_file
from .raw import (
    LEASE,
    args,
    lite_connect,
    lite_time,
    my_begin,
    my_connect,
    my_execute,
    my_fetch,
    naive_now,
    plan_for,
)

WARMUP = 20


async def pg_claims(url: str, claims: int) -> list[float]:
    import asyncpg
    from trio_asyncio import aio_as_trio, open_loop

    st = plan_for("postgres", "lease")
    claim = st.claim[0]

    async def loop() -> list[float]:
        conn = await asyncpg.connect(url)
        times = []
        try:
            for _ in range(claims):
                now = datetime.now(UTC)
                token = lease_token(now, LEASE)
                started = time.perf_counter()
                rows = await conn.fetch(
                    claim.sql, *args(claim, group=GROUP, now=now, limit=1, lease=token)
                )
                times.append(time.perf_counter() - started)
                await conn.execute(st.ack.sql, *args(st.ack, id=rows[0][0], token=token))
        finally:
            await conn.close()
        return times

    async with open_loop():
        result: list[float] = await aio_as_trio(loop)()
    return result


async def my_claims(url: str, claims: int) -> list[float]:
    from trio_asyncio import aio_as_trio, open_loop

    from .raw import dialect_of

    st = plan_for("mysql", "lease")
    begin = dialect_of("mysql").lease_claim_begin()
    select, stamp = st.claim

    async def loop() -> list[float]:
        conn = await my_connect(url)
        times = []
        try:
            for _ in range(claims):
                now = naive_now()
                token = lease_token(now, LEASE)
                started = time.perf_counter()
                await my_begin(conn, begin)
                rows = await my_fetch(
                    conn, select.sql, args(select, group=GROUP, now=now, limit=1, lease=token)
                )
                await my_execute(conn, stamp.sql, args(stamp, id=rows[0][0], now=now, lease=token))
                await conn.commit()
                times.append(time.perf_counter() - started)
                await my_execute(conn, st.ack.sql, args(st.ack, id=rows[0][0], token=token))
        finally:
            conn.close()
        return times

    async with open_loop():
        result: list[float] = await aio_as_trio(loop)()
    return result


def lite_claims(url: str, claims: int) -> list[float]:
    st = plan_for("sqlite", "lease")
    claim = st.claim[0]
    conn = lite_connect(sqlite_file(url))
    times = []
    try:
        for _ in range(claims):
            now = datetime.now(UTC)
            token = lite_time(lease_token(now, LEASE))
            started = time.perf_counter()
            rows = conn.execute(
                claim.sql, args(claim, group=GROUP, now=lite_time(now), limit=1, lease=token)
            ).fetchall()
            times.append(time.perf_counter() - started)
            conn.execute(st.ack.sql, args(st.ack, id=rows[0][0], token=token))
    finally:
        conn.close()
    return times


def measure(db: str, url: str, size: int, claims: int) -> dict[str, Any]:
    fill(db, url, size)
    if db == "postgres":
        times = trio.run(pg_claims, url, claims)
    elif db == "mysql":
        times = trio.run(my_claims, url, claims)
    else:
        times = lite_claims(url, claims)
    counted = [t * 1000 for t in times[WARMUP:]]
    return {
        "rows": size,
        "p50_ms": statistics.median(counted),
        "mean_ms": statistics.fmean(counted),
        "p99_ms": statistics.quantiles(counted, n=100, method="inclusive")[98],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("--sizes", default="1000,1000000")
    parser.add_argument("--claims", type=int, default=300)
    a = parser.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    emit({"sizes": [measure(a.db, a.url, size, a.claims) for size in sizes]})


if __name__ == "__main__":
    main()
