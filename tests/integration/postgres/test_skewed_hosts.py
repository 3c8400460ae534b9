"""Two worker processes on one PostgreSQL queue, one of them on a host whose clock runs ten
minutes ahead (libfaketime, Debian's ``faketime``): on the database clock, trinbox's default
there, no row is ever in work twice; on the host clock (``SystemClock()``) the fast host takes
rows the other still holds, since by its clock their leases ended long ago.

Each process is ``python -m tests.integration.postgres.skew_worker`` (skew_worker.py). Each
delivery records its start and end by the server's ``clock_timestamp()``. The first worker
starts alone and the skewed one joins once the first has rows in work, so that there are held
rows to take.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
import trio

import trinbox

from .. import worker_kit
from ..stands import Stand, fresh_stand
from .skew_worker import DDL

ROOT = Path(trinbox.__file__).resolve().parents[1]
ROWS = 60
WORK = 0.25  # each delivery's work: the first worker alone needs several seconds for all
LEASE = 4  # seconds: ten minutes of skew is far past half of it
SKEW = "+10m"


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        message = "libfaketime is missing: apt-get install faketime (scripts/test installs it)"
        if os.environ.get("TRINBOX_REQUIRE_DATABASES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found[0]


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[Stand]:
    with fresh_stand("postgres", tmp_path) as found:
        found.script(DDL)
        payloads = ", ".join(f"('{json.dumps({'n': n})}'::bytea)" for n in range(ROWS))
        found.execute(f"INSERT INTO skew_jobs (payload) VALUES {payloads}")
        yield found


class Worker(worker_kit.Worker):
    """A worker process and what it wrote."""

    def host_now(self) -> datetime:
        """The host's clock as the worker's Python read it (``ready <iso time>``)."""
        first = self.out.decode().splitlines()[0]
        word, at = first.split(" ", 1)
        assert word == "ready", self.out.decode() + self.err.decode()
        return datetime.fromisoformat(at)

    async def go(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(b"go\n")


async def start(nursery: trio.Nursery, stand: Stand, name: str, clock: str, skewed: bool) -> Worker:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if skewed:
        env["LD_PRELOAD"] = libfaketime()
        env["FAKETIME"] = SKEW
        # Trio and asyncio time their waits by the monotonic clock: keep it real.
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "tests.integration.postgres.skew_worker",
            stand.url,
            name,
            clock,
            str(LEASE),
            str(WORK),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    worker = Worker(process)
    nursery.start_soon(worker.read)
    nursery.start_soon(worker.drain)
    await worker.ready.wait()
    return worker


Spans = dict[int, list[tuple[datetime, datetime, str]]]


async def serve_skewed(stand: Stand, clock: str) -> tuple[Spans, datetime, datetime]:
    """Run the on-time worker, then the skewed one beside it, until the queue is empty: every
    delivery's (start, end, worker) by row, and each worker's host clock at its start."""
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            # Both set up first (imports, the app), so that the fast one joins at once.
            steady = await start(nursery, stand, "steady", clock, skewed=False)
            fast = await start(nursery, stand, "fast", clock, skewed=True)
            server = stand.value("SELECT clock_timestamp()")
            await steady.go()
            # Wait until the steady worker holds rows (a poll: its work is in another process).
            while not stand.value("SELECT count(*) FROM skew_handled WHERE ended IS NULL"):  # noqa: ASYNC110
                await trio.sleep(0.01)
            await fast.go()
            for worker in (steady, fast):
                await worker.process.wait()
                assert worker.process.returncode == 0, worker.err.decode()
    spans: Spans = defaultdict(list)
    for n, worker, started, ended in stand.rows(
        "SELECT n, worker, started, ended FROM skew_handled ORDER BY started"
    ):
        assert ended is not None
        spans[n].append((started, ended, worker))
    # The skew is real: the fast worker's Python read a clock ten minutes ahead.
    assert fast.host_now() - server > timedelta(minutes=9), (fast.host_now(), server)
    assert abs(steady.host_now() - server) < timedelta(minutes=1), (steady.host_now(), server)
    return spans, steady.host_now(), fast.host_now()


def overlapping(spans: Spans) -> list[int]:
    """The rows that were in work twice at one time."""
    return [
        n
        for n, runs in spans.items()
        if any(later[0] < earlier[1] for earlier, later in pairwise(sorted(runs)))
    ]


async def test_on_the_database_clock_a_fast_host_never_takes_a_held_row(stand: Stand) -> None:
    spans, _, _ = await serve_skewed(stand, "database")
    assert sorted(spans) == list(range(ROWS))
    assert overlapping(spans) == []
    twice = {n: runs for n, runs in spans.items() if len(runs) != 1}
    assert twice == {}
    workers = {worker for runs in spans.values() for _, _, worker in runs}
    assert workers == {"steady", "fast"}, "both workers handle rows"
    assert stand.rows("SELECT * FROM skew_jobs") == []


async def test_on_the_host_clock_the_fast_host_takes_rows_another_holds(stand: Stand) -> None:
    spans, _, _ = await serve_skewed(stand, "system")
    assert sorted(spans) == list(range(ROWS))
    stolen = overlapping(spans)
    assert stolen, "the fast host took no held row"
    for n in stolen:
        assert {worker for _, _, worker in spans[n]} == {"steady", "fast"}
