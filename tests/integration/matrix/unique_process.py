"""One publisher process of the race of test_unique_processes.py.

    python -m tests.integration.matrix.unique_process <stand> <url> <keys> <tasks>

publishes, from ``tasks`` tasks at once, every one of the dedup keys ``race-0`` ...
``race-<keys - 1>`` into unique_plain (the lease form's row class of test_unique.py), and
prints one JSON line: ``[key, id, duplicate]`` per publish. It prints ``ready`` once its
broker is open and starts when it reads a line on its standard input, so that the test can
start both publishers together.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from trinbox import App, AppInfo, SqlBroker

from .test_unique import PlainLease, Sync

POOL = 8


def make_broker(stand: str, url: str) -> SqlBroker[Any]:
    if stand == "sqlite":
        return SqlBroker.sqlite(url, pool_size=POOL)
    if stand == "postgres":
        return SqlBroker.postgres(url, pool_size=POOL)
    if stand == "pgbouncer":
        return SqlBroker.postgres(url, pool_size=POOL, pgbouncer="transaction")
    return SqlBroker.mysql(url, pool_size=POOL)


async def race(stand: str, url: str, keys: int, tasks: int) -> list[list[object]]:
    broker = make_broker(stand, url)
    app = App(AppInfo(f"publisher-{stand}"))
    app.add_broker(broker)
    found: list[list[object]] = []

    async def publish_every_key(task: int) -> None:
        # Each task takes the keys in its own order, so the tasks collide on every key.
        order = range(keys) if task % 2 == 0 else range(keys - 1, -1, -1)
        for n in order:
            key = f"race-{n}"
            row = await broker.publish(PlainLease, Sync(str(task)), unique=key)
            found.append([key, row.id, row.duplicate])

    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        async with trio.open_nursery() as publishers:
            for task in range(tasks):
                publishers.start_soon(publish_every_key, task)
        app.shutdown()
    return found


if __name__ == "__main__":
    stand, url, keys, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(trio.run(race, stand, url, keys, tasks)), flush=True)
