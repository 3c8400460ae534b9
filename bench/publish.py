"""Publish throughput through trinbox: N messages written by ``broker.publish``, from
``--tasks`` publishing tasks at once (4 by default), into the empty bench table, by a process
that only publishes (``app.add_broker``). Timed from the first publish to the last; the table
is recreated first (not timed). ``--headers`` (lease and row lock): each publish gives
``common.HEADERS``, written into the table's Headers field, so a pair of runs with and without
it is the publish cost of headers (``python -m bench.ratios headers``). ``--unique`` (lease):
the table has a Unique field and its index, and each publish gives a key of its own
(``unique=f"k{i}"``: every one writes, through ``ON CONFLICT ... RETURNING`` or MySQL's insert
and ``LAST_INSERT_ID()``); ``--unique-table``: the same table, each publish without a key (the
plain insert). Against none they are the publish cost of a key and of the index
(``python -m bench.ratios unique``).

``--way`` (lease): how the rows are written. ``one`` (the default) publishes them one by one
from the tasks; ``tx`` publishes them one by one from one task, ``--batch`` to a transaction
(``tx.publish``); ``many`` writes ``--batch`` at a time with ``publish_many`` (one statement
per batch, ids read back); ``raw`` writes ``--batch`` at a time with a multi-row insert by hand
on a connection of the broker's pool (the same driver, no trinbox code: no codec, no checks,
no ids read back), the bound of the other three (``python -m bench.ratios many``).

    python -m bench.publish DB URL FORM N [--tasks K] [--max-seconds S] [--headers]
                            [--unique | --unique-table] [--way one|tx|many|raw] [--batch B]

Prints one JSON line: publishes/s (``jobs_per_s``), seconds, and whether every row was
written with the headers asked for (``ok``).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

import trio

from trinbox import App, AppInfo, SqlBroker

from .common import (
    GROUP,
    HEADERS,
    ROWS,
    TABLE,
    WITH_HEADERS,
    WITH_UNIQUE,
    Job,
    connect,
    emit,
    fill,
    run_sql,
)
from .drain import make_broker

TASKS = 4


async def publish(
    db: str,
    url: str,
    form: str,
    n: int,
    tasks: int,
    max_seconds: float,
    headers: bool,
    unique: str | None = None,
    way: str = "one",
    batch: int = 1000,
) -> dict[str, Any]:
    row = WITH_HEADERS[form] if headers else WITH_UNIQUE[form] if unique else ROWS[form]
    given = HEADERS if headers else None
    broker = make_broker(db, url, pool_size=tasks + 2)
    app = App(AppInfo("bench-publish"))
    app.add_broker(broker)
    sent = 0

    async def publisher(first: int) -> None:
        nonlocal sent
        for i in range(first, n, tasks):
            key = f"k{i}" if unique == "key" else None
            await broker.publish(
                row, Job(i), name=GROUP, tenant=f"t{i % 10}", headers=given, unique=key
            )
            sent += 1

    async def batches() -> None:
        nonlocal sent
        for first in range(0, n, batch):
            jobs = [Job(i) for i in range(first, min(n, first + batch))]
            if way == "many":
                await broker.publish_many(row, jobs, name=GROUP, tenant="t0")
            elif way == "tx":
                async with broker.transaction() as tx:
                    for job in jobs:
                        await tx.publish(row, job, name=GROUP, tenant="t0")
            else:
                await raw_insert(broker, db, len(jobs), first)
            sent += len(jobs)

    with trio.fail_after(max_seconds + 30):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            started = time.perf_counter()
            with trio.move_on_after(max_seconds):
                async with trio.open_nursery() as publishers:
                    if way == "one":
                        for first in range(tasks):
                            publishers.start_soon(publisher, first)
                    else:
                        publishers.start_soon(batches)
            seconds = time.perf_counter() - started
            app.shutdown()
    return {"jobs_per_s": sent / seconds, "seconds": seconds, "sent": sent}


_MARKS = {"postgres": "${}", "mysql": "%s", "sqlite": "?"}


async def raw_insert(broker: SqlBroker[Any], db: str, count: int, first: int) -> None:
    """``count`` rows in one multi-row insert written by hand, on a pooled connection in
    autocommit: what ``publish_many`` writes, without trinbox between."""
    mark = _MARKS[db]
    params: list[object] = []
    rows: list[str] = []
    now = datetime.now(UTC)
    for i in range(first, first + count):
        slots = []
        for value in (GROUP, "t0", now, 1, None, b'{"n":%d}' % i):
            params.append(value)
            slots.append(mark.format(len(params)) if db == "postgres" else mark)
        rows.append("(" + ", ".join(slots) + ")")
    sql = (
        f"INSERT INTO {TABLE} (name, tenant, retry_after, attempt, locked_until, payload) "
        f"VALUES {', '.join(rows)}"
    )
    conn = await broker.pool.acquire("bench")
    try:
        await conn.execute(sql, params)
    finally:
        await broker.pool.give_back(conn)


def written(db: str, url: str, headers: bool) -> tuple[int, int]:
    """The rows in the bench table, and how many of them carry ``HEADERS``."""
    with connect(db, url) as conn:
        rows = run_sql(db, conn, f"SELECT headers FROM {TABLE}")
    carried = 0
    for (raw,) in rows:
        value = raw if raw is None or isinstance(raw, dict) else json.loads(raw)
        carried += value == HEADERS
    return len(rows), carried


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("form", choices=sorted(WITH_HEADERS))
    parser.add_argument("n", type=int)
    parser.add_argument("--tasks", type=int, default=TASKS, help="publishing tasks at once")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop then")
    parser.add_argument("--headers", action="store_true", help="each publish gives headers")
    parser.add_argument("--way", choices=["one", "tx", "many", "raw"], default="one")
    parser.add_argument("--batch", type=int, default=1000, help="rows a batch or tx writes")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--unique", action="store_true", help="a Unique field, a key each")
    keys.add_argument("--unique-table", action="store_true", help="a Unique field, no key")
    args = parser.parse_args()
    unique = "key" if args.unique else "table" if args.unique_table else None
    fill(args.db, args.url, 0, form=args.form, unique=unique is not None)
    result = trio.run(
        publish,
        args.db,
        args.url,
        args.form,
        args.n,
        args.tasks,
        args.max_seconds,
        args.headers,
        unique,
        args.way,
        args.batch,
    )
    rows, carried = written(args.db, args.url, args.headers)
    result["ok"] = rows == result["sent"] and carried == (rows if args.headers else 0)
    emit(result)


if __name__ == "__main__":
    main()
