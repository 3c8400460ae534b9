"""A limit held by four OS processes (``InboxQueue.limit``; lease, row lock and advisory
forms, each row its own key in the advisory form): with
``.limit(key="tenant", concurrency=3)`` and four workers in each process, never more than three
rows of one tenant are in work at once across all of them, while the other tenants' rows run
beside them; every row is handled once.

Each process is ``python -m tests.integration.matrix.limit_process`` (limit_process.py); the
handlers' intervals are read on ``time.monotonic()``, one clock for every process of the host,
and each lies within its row's lease (claimed before, settled after), so their overlaps bound
the leases' from below. A holder killed with SIGKILL while it holds the limit's three slots
leaves nothing behind: its slots end with its leases, and its rows are handled after them. In
the row lock form its slots are locks of its claims' transactions, which the server ends with
its sessions: while it holds them no other process takes a fourth row of the tenant, and at its
death they are free at once; so are the advisory form's, session locks beside each row's key.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import InboxQueue, subscriber
from trinbox.testing import idle

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells, insert_rows
from .schema import LIMITED_PLAIN, LeasedPlain
from .test_processes import ROOT, Handled, plain_rows, run_workers

PROCESSES = 4


@dataclass
class Job:
    n: int
    tenant: str


async def run_processes(case: Case, count: int) -> list[Handled]:
    return await run_workers(
        case,
        count,
        "tests.integration.matrix.limit_process",
        processes=PROCESSES,
        deadline=120,
    )


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (one that ends as another starts: not both)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    found = at = 0
    for _, step in edges:
        at += step
        found = max(found, at)
    return found


# SQLite's advisory keys are served by one process per file (a second is refused at startup).
@cells(forms=["lease", "row_lock", "advisory"], leave_out=[("sqlite", "advisory")])
async def test_a_limit_of_three_held_by_four_processes_is_never_four(case: Case) -> None:
    # One hot tenant with most rows, in claim order first, and a few others behind it.
    tenants = ["hot"] * 48 + [f"t{i % 4}" for i in range(16)]
    insert_rows(case.stand, "plain_jobs", plain_rows(tenants))
    results = await run_processes(case, len(tenants))
    by_key: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
    for result in results:
        for tenant, start, end in result.intervals:
            by_key[tenant].append((start, end))
    assert Counter({k: len(v) for k, v in by_key.items()}) == Counter(tenants)
    for key, spans in by_key.items():
        assert most_at_once(spans) <= 3, f"more than 3 rows of {key} in work at once"
    # Three at once, so the limit, not chance, kept it there; and the other tenants' rows ran
    # beside the hot one's: more than three rows in work at some instant.
    assert most_at_once(by_key["hot"]) == 3
    assert most_at_once([s for spans in by_key.values() for s in spans]) > 3
    handled = sorted(n for result in results for n in result.ids)
    assert handled == list(range(len(tenants)))
    assert sum(1 for result in results if result.ids) > 1, "one process handled every row"
    assert case.stand.rows("SELECT * FROM plain_jobs") == []


async def read_lines(stream: trio.abc.ReceiveStream, count: int) -> list[str]:
    """The first ``count`` lines a process writes (fewer: it ended first)."""
    found = b""
    async for chunk in stream:
        found += chunk
        if found.count(b"\n") >= count:
            break
    return found.decode().splitlines()[:count]


@asynccontextmanager
async def holder(module: str, *args: str, count: int = 3) -> AsyncIterator[Callable[[], Any]]:
    """Run ``python -m module args...`` until it printed ``count`` lines ``holding <n>``;
    yield ``kill``, which kills it with SIGKILL (and waits for its end), as leaving does."""
    command = [sys.executable, "-m", module, *args]
    process = await trio.lowlevel.open_process(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    async def kill() -> None:
        if process.returncode is None:
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
        assert process.returncode == -signal.SIGKILL

    try:
        assert process.stdout is not None
        with trio.fail_after(60):
            holding = await read_lines(process.stdout, count)
        assert len(holding) == count, holding
        assert all(h.startswith("holding ") for h in holding), holding
        yield kill
    finally:
        with trio.CancelScope(shield=True):
            await kill()


async def kill_once_holding(module: str, *args: str, count: int = 3) -> None:
    """Run ``python -m module args...`` until it printed ``count`` lines ``holding <n>``, then
    kill it with SIGKILL."""
    async with holder(module, *args, count=count) as kill:
        await kill()


@cells(forms=["lease"])
async def test_a_killed_holder_s_slots_end_with_its_leases_and_nothing_leaks(
    case: Case,
) -> None:
    rows = 6
    insert_rows(case.stand, "plain_jobs", plain_rows(["hot"] * rows))
    await kill_once_holding(
        "tests.integration.matrix.limit_holder_process", case.name, case.stand.url
    )
    # Four workers, three slots: the holder took three rows of the tenant, no fourth, and its
    # leases still hold them after its death.
    held = case.stand.rows("SELECT id FROM plain_jobs WHERE locked_until IS NOT NULL")
    assert len(held) == 3

    intervals: list[tuple[float, float]] = []
    handled: list[int] = []
    done = trio.Event()

    @subscriber(
        InboxQueue(LeasedPlain, "plain")
        .workers(4)
        .limit(key="tenant", concurrency=3)
        .poll_interval(0.05)
    )
    async def handle(job: Job) -> None:
        start = time.monotonic()
        await trio.sleep(0.05)
        handled.append(job.n)
        intervals.append((start, time.monotonic()))
        if len(handled) == rows:
            done.set()

    broker = case.stand.broker(poll_interval=0.05, lease=2)
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        # The killed process's leases end within their two seconds; then its rows come back
        # and every row is handled, three at once at most.
        with trio.fail_after(30):
            await done.wait()
    assert sorted(handled) == list(range(rows))
    assert most_at_once(intervals) <= 3
    assert case.stand.rows("SELECT * FROM plain_jobs") == []


@cells(forms=["row_lock"], stands=["postgres", "mariadb"])
async def test_a_killed_row_lock_holder_s_slots_end_with_its_sessions(case: Case) -> None:
    await killed_holder_frees_its_slots(case)


@cells(forms=["advisory"], stands=["postgres", "mariadb"])
async def test_a_killed_advisory_holder_s_slots_end_with_its_sessions(case: Case) -> None:
    await killed_holder_frees_its_slots(case)


async def killed_holder_frees_its_slots(case: Case) -> None:
    """A holder of the tenant's three slots (session or transaction locks) is killed: no
    other process takes a fourth row while it lives, and its slots are free at its death."""
    rows = 6
    insert_rows(case.stand, "plain_jobs", plain_rows(["hot"] * rows))
    intervals: list[tuple[float, float]] = []
    handled: list[int] = []
    changed = trio.Event()

    @subscriber(
        InboxQueue(LIMITED_PLAIN[case.form], "plain")
        .workers(4)
        .limit(key="tenant", concurrency=3)
        .poll_interval(0.05)
    )
    async def handle(job: Job) -> None:
        nonlocal changed
        start = time.monotonic()
        await trio.sleep(0.05)
        handled.append(job.n)
        intervals.append((start, time.monotonic()))
        changed.set()
        changed = trio.Event()

    async def until(count: int) -> None:
        while len(handled) < count:
            await changed.wait()

    module = "tests.integration.matrix.limit_holder_process"
    async with holder(module, case.name, case.stand.url, case.form) as kill:
        broker = case.stand.broker(poll_interval=0.05)
        app = make_app()
        app.include(broker, handle)
        with trio.fail_after(60):
            async with serving(app):
                # The holder holds the tenant's three slots: this process's first claim,
                # with four free workers and three rows free of row locks, takes none.
                await idle(app, handle)
                assert handled == []
                await kill()
                # Its sessions end with it, and their locks (slots, row locks, keys): the
                # three rows it held come back at once, with the three behind them.
                await until(rows)
    assert sorted(handled) == list(range(rows))
    assert most_at_once(intervals) <= 3
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
