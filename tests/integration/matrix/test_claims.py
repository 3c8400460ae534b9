"""A subscription's claims never take the pool's last connection, in every form, on every stand
(REFERENCE.md §3.1 Workers (b), §10.2 forms/claims.rs)."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from trinbox import InboxQueue, subscriber
from trinbox.testing import VirtualClock

from ..serving import make_app, serving
from .conftest import Case

# Rows enough to fill a pool of eight twice over.
ROWS = 16
POOL = 8


@dataclass
class Email:
    to: str


def expected_in_work(case: Case) -> int:
    """A lease holds no connection, so every row goes into work; a delivery of the other forms
    holds one, and the subscription stops one short of the pool. SQLite's process keeps the
    keys instead of sessions, and its advisory claim takes nothing while a row is in work."""
    if case.form == "lease":
        return ROWS
    if case.name == "sqlite":
        return 1
    return POOL - 1


async def test_a_subscription_leaves_the_pool_its_last_connection(
    case: Case, clock: VirtualClock
) -> None:
    stand = case.stand
    # Written by hand, before the app serves: its first claim sees every row. Each row has a
    # key of its own (the advisory form locks plain_jobs-{tenant}).
    for n in range(ROWS):
        stand.execute(
            "INSERT INTO plain_jobs (tenant, payload) VALUES (?, ?)",
            f"t{n}",
            f'{{"to":"{n}@x"}}'.encode(),
        )
    broker = stand.broker(poll_interval=60, pool_size=POOL)
    released: dict[str, trio.Event] = {f"{n}@x": trio.Event() for n in range(ROWS)}
    started: list[str] = []
    changed = trio.Event()

    @subscriber(InboxQueue(case.plain, "jobs").workers(ROWS))
    async def work(job: Email) -> None:
        nonlocal changed
        started.append(job.to)
        changed.set()
        changed = trio.Event()
        await released[job.to].wait()

    async def started_at_least(count: int) -> None:
        while len(started) < count:
            await changed.wait()

    expected = expected_in_work(case)
    app = make_app(grace=0)
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(30):
            await started_at_least(expected)
        # Claims go on meanwhile (or wait for a connection); none takes another row.
        await trio.sleep(5)
        assert len(started) == expected
        sub = app.subscription(work)
        assert sub.in_work == expected
        # The pool still lends a connection to a handler's or the service's own query.
        with trio.fail_after(5):
            assert await broker.database.fetchval("SELECT 1") == 1
        if expected < ROWS:
            # A settlement makes room, and the next claim takes a row (on SQLite within a
            # poll interval).
            released[started[0]].set()
            with trio.fail_after(120):
                await sub.wait_finished(1)
                await started_at_least(expected + 1)
            assert sub.in_work == expected
        for event in released.values():
            event.set()
        # Virtual time: SQLite's advisory claims take the rows one poll interval apart.
        with trio.fail_after(ROWS * 60 + 60):
            await sub.wait_finished(ROWS)
    assert stand.rows("SELECT * FROM plain_jobs") == []
