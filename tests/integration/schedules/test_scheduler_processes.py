"""Schedules across real OS processes (``python -m
tests.integration.schedules.scheduler_process``), on every stand and through PgBouncer in
transaction pooling, on the brokers' default clocks:

- ten schedulers serving one schedule publish one row per tick, and every tick between the
  first and the last has its row;
- a scheduler killed with SIGKILL inside a tick's transaction (its mark written, its row not)
  loses that tick to no one and duplicates nothing: its transaction dies with it, and the next
  scheduler fires the tick.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

from ..postgres.test_pgbouncer import PGBOUNCER_DSN
from ..readme import child_env
from ..stands import STANDS, Stand, fresh_stand
from ..worker_kit import Worker
from .kit import create, mark, marks, published, utc
from .scheduler_process import SCHEDULE

ROOT = Path(__file__).resolve().parents[3]
PROCESSES = 10


@dataclass
class Target:
    """A fresh database: ``stand`` reads it directly, ``url`` is the schedulers' way to it."""

    stand: Stand
    url: str
    pgbouncer: bool = False


@pytest.fixture(params=[*STANDS, "pgbouncer"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    name = request.param
    with fresh_stand("postgres" if name == "pgbouncer" else name, tmp_path) as stand:
        create(stand)
        if name != "pgbouncer":
            yield Target(stand, stand.url)
            return
        database = urlsplit(stand.url).path
        yield Target(stand, urlunsplit(urlsplit(PGBOUNCER_DSN)._replace(path=database)), True)


async def start(nursery: trio.Nursery, target: Target, mode: str) -> Worker:
    command = [
        sys.executable,
        "-m",
        "tests.integration.schedules.scheduler_process",
        target.stand.name,
        target.url,
        mode,
        *(["pgbouncer"] if target.pgbouncer else []),
    ]
    process = await trio.lowlevel.open_process(
        command,
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    worker = Worker(process)
    nursery.start_soon(worker.read)
    nursery.start_soon(worker.drain)
    return worker


def one_row_per_tick(stand: Stand, *, rowless: datetime | None = None) -> list[datetime]:
    """The ticks marked, after checking that each has exactly one row (``rowless``: the mark
    the test wrote, which has none) and that none is missing between the first and last."""
    ticks = [tick for tick, outcome in marks(stand, SCHEDULE) if outcome == "published"]
    rows = Counter(utc(t) for t in published(stand))
    assert {t: n for t, n in rows.items() if n != 1} == {}, "a tick published twice"
    assert sorted(rows) == [t for t in ticks if t != rowless]
    gaps = [b for a, b in itertools.pairwise(ticks) if b - a != timedelta(seconds=1)]
    assert gaps == [], f"ticks missing before {gaps}"
    return ticks


async def test_ten_schedulers_publish_one_row_per_tick(target: Target) -> None:
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            workers = [await start(nursery, target, "serve") for _ in range(PROCESSES)]
            for worker in workers:
                await worker.ready.wait()
            for worker in workers:
                assert worker.process.stdin is not None
                await worker.process.stdin.send_all(b"go\n")
            for worker in workers:
                await worker.process.wait()
    stats = []
    for worker in workers:
        assert worker.process.returncode == 0, worker.err.decode()
        lines = worker.out.decode().splitlines()
        assert lines[0] == "ready", worker.out.decode()
        stats.append(json.loads(lines[-1]))
    ticks = one_row_per_tick(target.stand)
    assert len(ticks) >= 6
    # Every process fired or found fired what it reached; what they published is what is there.
    assert sum(s["published"] for s in stats) == len(ticks)
    assert all(s["failed"] == 0 for s in stats), stats


async def test_a_scheduler_killed_mid_tick_loses_and_duplicates_nothing(target: Target) -> None:
    # The schedule fired ten seconds ago: each scheduler fires every tick since (Missed.all).
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=10)
    mark(target.stand, SCHEDULE, before)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            victim = await start(nursery, target, "victim")
            await victim.ready.wait()
            said = victim.out.decode().splitlines()[0].split(" ")
            assert said[0] == "in-tick", victim.err.decode()
            # Inside its tick's transaction: the mark written, uncommitted; no row.
            assert published(target.stand) == []
            os.kill(victim.process.pid, signal.SIGKILL)
            assert await victim.process.wait() == -signal.SIGKILL
            survivor = await start(nursery, target, "serve")
            await survivor.ready.wait()
            assert survivor.process.stdin is not None
            await survivor.process.stdin.send_all(b"go\n")
            await survivor.process.wait()
    assert survivor.process.returncode == 0, survivor.err.decode()
    died_in = utc(said[1])
    assert died_in == before + timedelta(seconds=1)
    ticks = one_row_per_tick(target.stand, rowless=before)
    # The victim's tick, and every one since, fired once by the survivor.
    assert ticks[0] == before
    assert ticks[1] == died_in
    stats = json.loads(survivor.out.decode().splitlines()[-1])
    assert stats["published"] == len(ticks) - 1
