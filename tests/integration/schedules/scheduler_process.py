"""A scheduler process for the schedule tests: ``python -m
tests.integration.schedules.scheduler_process STAND URL MODE [pgbouncer]``. It serves one
schedule, ``every-second`` (``Every(timedelta(seconds=1))``, ``Missed.all(within=1 min)``,
publishing ``kit.Report``), on the broker's default clock (the database's on PostgreSQL and
MariaDB, the host's on SQLite).

MODE ``serve``: print ``ready``, wait for the test's line on stdin (so every process starts at
once), serve until the tick table holds ``TICKS_WANTED`` ticks, then print this process's
statistics as a JSON line. MODE ``victim``: serve with a codec that, in its first tick's
transaction (its mark written, its row not yet), prints ``in-tick TICK`` and blocks; the test kills
the process with SIGKILL there."""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from typing import Any

import trio

from trinbox import App, AppInfo, JsonCodec, SqlBroker
from trinbox.schedules import Every, Missed

from .kit import REPORT, TICKS

TICKS_WANTED = 6
SCHEDULE = "every-second"


class StuckCodec(JsonCodec):
    """Encodes the first tick's message never: the process stops inside its transaction."""

    def encode(self, message: object) -> bytes:
        print(f"in-tick {getattr(message, 'tick', '')}", flush=True)
        time.sleep(3600)  # the test's SIGKILL ends it
        return super().encode(message)


def make_broker(stand: str, url: str, *, pgbouncer: bool, victim: bool) -> SqlBroker[Any]:
    options: dict[str, Any] = {"codec": StuckCodec()} if victim else {}
    if stand == "sqlite":
        return SqlBroker.sqlite(url, **options)
    if stand == "postgres":
        if pgbouncer:
            options["pgbouncer"] = "transaction"
        return SqlBroker.postgres(url, **options)
    return SqlBroker.mysql(url, **options)


async def main(stand: str, url: str, mode: str, pgbouncer: bool) -> None:
    broker = make_broker(stand, url, pgbouncer=pgbouncer, victim=mode == "victim")
    app = App(AppInfo("scheduler"), grace=1.0)
    schedule = app.schedule(
        broker,
        SCHEDULE,
        Every(timedelta(seconds=1)),
        REPORT,
        ticks=TICKS,
        missed=Missed.all(within=timedelta(minutes=1)),
    )
    if mode == "victim":
        await app.serve()
        return
    print("ready", flush=True)
    await trio.to_thread.run_sync(sys.stdin.readline)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            count = f"SELECT count(*) FROM {TICKS.table}"
            # A poll, not an event: other processes' ticks wake nothing here.
            while await broker.database.fetchval(count) < TICKS_WANTED:  # type: ignore[operator]  # noqa: ASYNC110
                await trio.sleep(0.2)
            app.shutdown()
    stats = schedule.statistics()
    print(
        json.dumps(
            {
                "published": stats.published,
                "taken": stats.taken,
                "missed": stats.missed,
                "failed": stats.failed,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    stand, url, mode = sys.argv[1:4]
    trio.run(main, stand, url, mode, sys.argv[4:5] == ["pgbouncer"])
