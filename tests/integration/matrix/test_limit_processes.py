"""A limit held by four OS processes (``InboxQueue.limit``, lease form): with
``.limit(key="tenant", concurrency=3)`` and four workers in each process, never more than three
rows of one tenant are in work at once across all of them, while the other tenants' rows run
beside them; every row is handled once.

Each process is ``python -m tests.integration.matrix.limit_process`` (limit_process.py); the
handlers' intervals are read on ``time.monotonic()``, one clock for every process of the host,
and each lies within its row's lease (claimed before, settled after), so their overlaps bound
the leases' from below.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict

import trio

from .conftest import Case
from .kit import cells, insert_rows
from .test_processes import ROOT, Handled, Worker, plain_rows

PROCESSES = 4


async def run_processes(case: Case, count: int) -> list[Handled]:
    command = [
        sys.executable,
        "-m",
        "tests.integration.matrix.limit_process",
        case.name,
        case.form,
        case.stand.url,
        str(count),
    ]
    workers: list[Worker] = []
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for _ in range(PROCESSES):
                process = await trio.lowlevel.open_process(
                    command,
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                worker = Worker(process)
                workers.append(worker)
                nursery.start_soon(worker.read)
                nursery.start_soon(worker.drain)
            for worker in workers:
                await worker.ready.wait()
            for worker in workers:
                assert worker.process.stdin is not None
                await worker.process.stdin.send_all(b"go\n")
            for worker in workers:
                await worker.process.wait()
    return [worker.result() for worker in workers]


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (one that ends as another starts: not both)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    found = at = 0
    for _, step in edges:
        at += step
        found = max(found, at)
    return found


@cells(forms=["lease"])
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
