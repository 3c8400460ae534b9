"""Claimers that run side by side on one database, on every stand and form
(docs/reference.md#claim-loop, docs/reference.md#scenarios-concurrency,
docs/reference.md#scenarios-databases).

Two OS processes are in test_processes.py.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import trio

from trinbox import App, HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells, insert_emails, native

ROWS = 200


@dataclass
class Job:
    n: int


async def test_two_brokers_on_one_database_deliver_each_row_exactly_once(case: Case) -> None:
    seen: list[tuple[str, int]] = []
    all_seen = trio.Event()

    def make(name: str) -> App:
        # SQLite's advisory claim takes nothing while its first due row is in work, so more
        # workers would only wait for the poll interval (tests/integration/sqlite).
        workers = 1 if (case.name, case.form) == ("sqlite", "advisory") else 4

        @subscriber(InboxQueue(case.email, "emails").workers(workers))
        async def handle(job: Job) -> None:
            seen.append((name, job.n))
            await trio.sleep(0.005)  # some work, so that both claimers get rows
            if len({n for _, n in seen}) == ROWS:
                all_seen.set()

        app = make_app()
        app.include(case.stand.broker(poll_interval=0.05), handle)
        return app

    first = make("first")
    second = make("second")
    with trio.fail_after(60):
        async with serving(first), serving(second):
            insert_emails(case.stand, [json.dumps({"n": n}).encode() for n in range(ROWS)])
            await all_seen.wait()
    counts = Counter(n for _, n in seen)
    assert sorted(counts) == list(range(ROWS))
    assert set(counts.values()) == {1}, [n for n, c in counts.items() if c > 1]
    by_app = Counter(name for name, _ in seen)
    if (case.name, case.form) != ("sqlite", "advisory"):
        # (On SQLite the advisory form takes nothing while the first due row is in work, so
        # the claimer that settles and claims again at once may take every row.)
        assert by_app["first"] > 0
        assert by_app["second"] > 0
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@cells(forms=["row_lock"])
async def test_a_handler_publishes_into_its_own_table_while_it_holds_its_row(case: Case) -> None:
    """The row lock claim holds its transaction (and its rows) while the handler runs. A claim
    that found fewer rows than its limit read up to the end of its group: at REPEATABLE READ,
    MySQL would gap-lock that end, and an insert into the same queue would wait for the claim's
    transaction, which waits for the handler. trinbox claims at READ COMMITTED, so the
    handler's publishes go through (at REPEATABLE READ this test times out)."""
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(
        case.name,
        "INSERT INTO email_jobs (name, customer, retry_after, payload) VALUES (?, ?, ?, ?)",
    )
    batches: list[list[int]] = []

    # A batch of 4: the claim of the one row waiting is not filled.
    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job], pool: keys.Pool) -> HandlerOutcome:
        batches.append([job.n for job in jobs])
        if jobs[0].n == 1:
            await broker.publish(case.email, Job(2), name="emails", customer="c2")
            await pool.execute(insert, "emails", "c3", broker.clock(), b'{"n": 3}')
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 3)
    # The publish woke the subscription; its claim may have found the pool's row too.
    assert batches[0] == [1]
    assert sorted(n for batch in batches[1:] for n in batch) == [2, 3]
    assert case.stand.rows("SELECT * FROM email_jobs") == []
