"""Two claimers on one SQLite file never share a row (REFERENCE.md §10.2 concurrency.rs)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import trio

from trinbox import App, InboxQueue, subscriber

from .harness import Db, make_app, serving
from .tables2 import JOBS, LeasedJob, insert_jobs

ROWS = 200


@dataclass
class Job:
    n: int


async def test_two_brokers_on_one_file_deliver_each_row_exactly_once(db: Db) -> None:
    db.script(JOBS)
    seen: list[tuple[str, int]] = []
    all_seen = trio.Event()

    def make(name: str) -> App:
        @subscriber(InboxQueue(LeasedJob, "jobs").workers(4))
        async def handle(job: Job) -> None:
            seen.append((name, job.n))
            await trio.sleep(0.005)  # some work, so that both claimers get rows
            if len({n for _, n in seen}) == ROWS:
                all_seen.set()

        app = make_app()
        app.include(db.broker(poll_interval=0.05), handle)
        return app

    first = make("first")
    second = make("second")
    with trio.fail_after(60):
        async with serving(first), serving(second):
            insert_jobs(db, [json.dumps({"n": n}).encode() for n in range(ROWS)])
            await all_seen.wait()
    counts = Counter(n for _, n in seen)
    assert sorted(counts) == list(range(ROWS))
    assert set(counts.values()) == {1}, [n for n, c in counts.items() if c > 1]
    by_app = Counter(name for name, _ in seen)
    assert by_app["first"] > 0
    assert by_app["second"] > 0
    assert db.rows("SELECT * FROM jobs") == []
