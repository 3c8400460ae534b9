"""Two OS processes serving one table (docs/reference.md#scenarios-concurrency, advisory
sessions): every row is delivered exactly once across both, and rows that share an advisory
key are never in work at the same time.

Each process is ``python -m tests.integration.matrix.worker_process`` (worker_process.py).
SQLite serves the advisory form from one process per database file (its keys live in the
process), so that cell is left out; its lease form runs here like the servers' forms.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import trio

from .. import worker_kit
from .conftest import Case
from .kit import cells, insert_rows

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Handled:
    """What one worker handled: payload numbers, and (tenant, start, end) per delivery."""

    ids: list[int]
    intervals: list[tuple[str, float, float]]


class Worker(worker_kit.Worker):
    """A worker process and what it wrote."""

    def result(self) -> Handled:
        lines = self.out.decode().splitlines()
        assert self.process.returncode == 0, self.err.decode()
        assert lines[0] == "ready", self.out.decode()
        found = json.loads(lines[-1])
        return Handled(
            ids=[int(n) for n in found["ids"]],
            intervals=[(str(k), float(a), float(b)) for k, a, b in found["intervals"]],
        )


async def run_workers(
    case: Case,
    count: int,
    module: str = "tests.integration.matrix.worker_process",
    *extra: str,
    processes: int = 2,
    deadline: float = 90,
) -> list[Handled]:
    """Start ``processes`` workers (``python -m module``, with ``extra`` arguments), let
    them serve together, and return what each handled."""
    command = [
        sys.executable,
        "-m",
        module,
        case.name,
        case.form,
        case.stand.url,
        str(count),
        *extra,
    ]
    workers: list[Worker] = []
    with trio.fail_after(deadline):
        async with trio.open_nursery() as nursery:
            for _ in range(processes):
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


def plain_rows(tenants: list[str]) -> list[dict[str, object]]:
    return [
        {"tenant": tenant, "payload": json.dumps({"n": n, "tenant": tenant}).encode()}
        for n, tenant in enumerate(tenants)
    ]


@cells(leave_out=[("sqlite", "advisory")])
async def test_two_processes_deliver_each_row_exactly_once(case: Case) -> None:
    rows = 200
    # One key per row: the advisory form may hand every row to either process.
    insert_rows(case.stand, "plain_jobs", plain_rows([f"t{n}" for n in range(rows)]))
    results = await run_workers(case, rows)
    handled = [n for result in results for n in result.ids]
    counts = Counter(handled)
    assert sorted(counts) == list(range(rows))
    assert set(counts.values()) == {1}, [n for n, c in counts.items() if c > 1]
    assert all(result.ids for result in results), "one process handled no row"
    assert case.stand.rows("SELECT * FROM plain_jobs") == []


@cells(forms=["advisory"], stands=["postgres", "mariadb"])
async def test_rows_of_one_key_are_never_in_work_at_once_across_processes(case: Case) -> None:
    keys, per_key = 5, 20
    tenants = [f"k{i % keys}" for i in range(keys * per_key)]
    insert_rows(case.stand, "plain_jobs", plain_rows(tenants))
    results = await run_workers(case, len(tenants))
    by_key: defaultdict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for process, result in enumerate(results):
        for tenant, start, end in result.intervals:
            by_key[tenant].append((start, end, process))
    assert sorted(by_key) == [f"k{i}" for i in range(keys)]
    assert sorted(len(spans) for spans in by_key.values()) == [per_key] * keys
    for key, spans in by_key.items():
        spans.sort()
        for (_, end, _), (start, _, _) in pairwise(spans):
            assert end <= start, f"two rows of {key} were in work at once: {spans}"
    # Both processes took part, and between them handled every row once.
    assert {process for spans in by_key.values() for _, _, process in spans} == {0, 1}
    handled = sorted(n for result in results for n in result.ids)
    assert handled == list(range(len(tenants)))
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
