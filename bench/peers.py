"""Peers on the same PostgreSQL server and data size: procrastinate and pgqueuer, plain asyncio
(both are asyncio-only), each in a database of its own, created fresh for the run.

    python -m bench.peers ADMIN_URL procrastinate N --param CONCURRENCY
    python -m bench.peers ADMIN_URL pgqueuer N --param BATCH_SIZE

N no-op jobs are enqueued with the library's own batch enqueue (not timed); the worker is
timed from its start until the queue is drained (procrastinate: ``run_worker_async(wait=False)``
returns; pgqueuer: ``QueueManager.run(mode=drain)`` returns), or until ``--max-seconds`` ends
the run undrained (the rate is then the jobs done in that window). Both keep their defaults for
finished jobs: procrastinate keeps them as ``succeeded`` rows, pgqueuer moves them to its log
table. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
import warnings
from datetime import timedelta
from typing import Any

from .common import emit

logging.basicConfig(level=logging.ERROR)
warnings.filterwarnings("ignore")


async def fresh_database(admin_url: str, name: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return admin_url.rsplit("/", 1)[0] + "/" + name


async def run_procrastinate(
    admin_url: str, n: int, concurrency: int, max_seconds: float
) -> dict[str, Any]:
    import procrastinate

    url = await fresh_database(admin_url, "bench_procrastinate")
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    done = 0

    @app.task(name="noop", queue="bench")
    async def noop(n: int) -> None:
        nonlocal done
        done += 1

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, n, 5000):
            jobs: list[dict[str, Any]] = [{"n": i} for i in range(start, min(n, start + 5000))]
            await noop.batch_defer_async(*jobs)
        # Statistics for the planner, as every other table of the bench gets after its fill
        # (without them procrastinate's fetch runs several times slower until autovacuum).
        import asyncpg

        setup = await asyncpg.connect(url)
        await setup.execute("VACUUM ANALYZE procrastinate_jobs")
        await setup.execute("CHECKPOINT")
        await setup.close()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(max_seconds):
                await app.run_worker_async(queues=["bench"], concurrency=concurrency, wait=False)
        except TimeoutError:
            pass  # the window ended first: the rate so far
        seconds = time.perf_counter() - started
    return {
        "jobs_per_s": done / seconds,
        "seconds": seconds,
        "finished": done,
        "drained": done >= n,
    }


async def run_pgqueuer(
    admin_url: str, n: int, batch_size: int, max_seconds: float
) -> dict[str, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.models import Job
    from pgqueuer.types import QueueExecutionMode

    url = await fresh_database(admin_url, "bench_pgqueuer")
    setup = await asyncpg.connect(url)
    queries = Queries(AsyncpgDriver(setup))
    await queries.install()
    await queries.enqueue(["noop"] * n, [b'{"n":0}'] * n, [0] * n)
    await setup.execute("VACUUM ANALYZE pgqueuer")
    await setup.execute("CHECKPOINT")
    await setup.close()

    conn = await asyncpg.connect(url)
    manager = QueueManager(Queries(AsyncpgDriver(conn)))
    done = 0

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        nonlocal done
        done += 1

    started = time.perf_counter()
    try:
        async with asyncio.timeout(max_seconds):
            await manager.run(
                mode=QueueExecutionMode.drain,
                batch_size=batch_size,
                dequeue_timeout=timedelta(seconds=1),
            )
    except TimeoutError:
        pass  # the window ended first: the rate so far
    seconds = time.perf_counter() - started
    await conn.close()
    return {
        "jobs_per_s": done / seconds,
        "seconds": seconds,
        "finished": done,
        "drained": done >= n,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("admin_url")
    parser.add_argument("lib", choices=["procrastinate", "pgqueuer"])
    parser.add_argument("n", type=int)
    parser.add_argument("--param", type=int, required=True)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop undrained then")
    a = parser.parse_args()
    if a.lib == "procrastinate":
        result = asyncio.run(run_procrastinate(a.admin_url, a.n, a.param, a.max_seconds))
    else:
        result = asyncio.run(run_pgqueuer(a.admin_url, a.n, a.param, a.max_seconds))
    emit(result)


if __name__ == "__main__":
    main()
