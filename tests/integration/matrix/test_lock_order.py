"""One lock order in the lease form (issue 17, item 2): a settlement takes its delivery's token,
then a pooled connection, and the lease keeper never waits for a token while it holds a
connection. With as many lease subscriptions as pool connections, every keeper round lands
beside settlements, and claims, settlements and publishes all go on."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import InboxQueue, keys, subscriber
from trinbox.errors import StartupError
from trinbox.testing import VirtualClock, settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import cells, insert_emails, native, where

ROWS = 60  # rows of each queue written before the app serves
PUBLISHED = 8  # rows of each queue published while it serves
# Seconds a handler works: with a lease of one second, a whole number of keeper rounds (a
# third of the lease; half of it before the rounds went by deadline), so that settlements
# land on the rounds' instants of virtual time.
HANDLING = 1.0


@dataclass
class Job:
    n: int


def lease_queues(case: Case, count: int) -> list[Subscriber[Any, Any]]:
    """``count`` lease subscriptions, one per group of email_jobs, each with rows waiting and
    handlers slow enough that keeper rounds run while they work."""
    handlers: list[Subscriber[Any, Any]] = []
    for g in range(count):
        insert_emails(
            case.stand, [json.dumps({"n": n}).encode() for n in range(ROWS)], name=f"q{g}"
        )

        @subscriber(InboxQueue(case.email, f"q{g}").workers(20))
        async def handle(job: Job) -> None:
            await trio.sleep(HANDLING)

        handlers.append(handle)
    return handlers


async def serve_until_settled(case: Case, queues: int, pool_size: int) -> None:
    broker = case.stand.broker(lease=1, pool_size=pool_size, poll_interval=0.1)
    handlers = lease_queues(case, queues)
    app = make_app()
    for handle in handlers:
        app.include(broker, handle)
    async with serving(app):
        # Meanwhile a publish into each queue every quarter second, each within two seconds:
        # a keeper and a settlement waiting on each other would hold every connection, and
        # publishes, claims and settlements would wait until the 60-second settlement bound
        # cut the settlements (virtual time jumps there).
        async with trio.open_nursery() as nursery:

            async def publish() -> None:
                for n in range(PUBLISHED):
                    for g in range(queues):
                        with trio.fail_after(2):
                            await broker.publish(case.email, Job(n), name=f"q{g}", customer="c")
                    await trio.sleep(0.25)

            nursery.start_soon(publish)
            # Every row, each handled in a second by a queue's workers: a few seconds' work.
            with trio.fail_after(20):
                for handle in handlers:
                    await settled(app, handle, ROWS + PUBLISHED)
        for handle in handlers:
            stats = app.statistics(handle)
            assert stats.settle_errors == ()
            assert stats.settle_failures == 0
            # The keeper's rounds ran beside the settlements, and lost no lease.
            assert stats.lease_extensions > 0
            assert stats.leases_lost == 0
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0


@cells(forms=["lease"])
async def test_two_lease_queues_on_a_pool_of_two_never_stall(
    case: Case, clock: VirtualClock
) -> None:
    await serve_until_settled(case, queues=2, pool_size=2)


@cells(forms=["lease"])
async def test_as_many_grouped_lease_queues_as_the_default_pool_holds_never_stall(
    case: Case, clock: VirtualClock
) -> None:
    # The brokers' default pools: 8 connections on SQLite, 10 on the servers.
    size = 8 if case.name == "sqlite" else 10
    await serve_until_settled(case, queues=size, pool_size=size)


# -- the keeper's connection in the pool budget ---------------------------------------------------


@cells(forms=["lease"])
async def test_a_transactional_lease_subscription_counts_its_keepers_connection(
    case: Case, clock: VirtualClock
) -> None:
    # One delivery's transaction, the keeper's round and the connection kept free: a pool of
    # two is too small.
    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(case.stand.broker(pool_size=2), handle)
    expected = (
        f"test: the deliveries of one broker's subscriptions hold a connection each while in "
        f"work, and one connection of its pool stays free for claims and upkeep, found up to 2 "
        f"held ({where(handle)}: 1 and 1 for its lease keeper) on a pool of 2; give the broker "
        f"pool_size=3, or lower their workers(n)"
    )
    with trio.fail_after(10), pytest.raises(StartupError, match=f"^{re.escape(expected)}$"):
        await app.serve()


def wait_for_a_round_waiting_on_a_lock(stand: Stand) -> None:
    """Return once a session of the stand's database waits for a row lock (the keeper's
    round, on a row a handler's transaction updated): polls the server for up to ten
    seconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if stand.name == "postgres":
            sql = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        else:
            # The keeper's locking select (the claim's ends in SKIP LOCKED).
            sql = (
                "SELECT count(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
                "AND COMMAND = 'Query' AND INFO LIKE '%FOR UPDATE'"
            )
        if stand.value(sql):
            return
        time.sleep(0.02)
    raise AssertionError("no round waited on the handler's row lock")


@cells(forms=["lease"], stands=["postgres", "mariadb"])
async def test_a_keeper_round_waiting_on_a_handlers_transaction_leaves_it_a_connection(
    case: Case,
) -> None:
    # Real time: the round waits on a row lock (a database call in flight), which would
    # stop virtual time. A handler updates its own row in its transaction; the keeper's
    # round then waits on that row, holding a connection; the handler's keys.Pool query
    # needs one more. Counting the keeper's connection caps the workers so that one is free
    # (without it, two transactions and the round hold the pool of three, and the query
    # waits until POOL_WAIT cuts it).
    broker = case.stand.broker(pool_size=3, lease=3)
    insert_emails(case.stand, [json.dumps({"n": n}).encode() for n in range(2)])
    first_done = trio.Event()
    counted: list[object] = []

    @subscriber(InboxQueue(case.email, "emails").transactional().workers(2))
    async def handle(job: Job, tx: keys.Tx, pool: keys.Pool) -> None:
        if job.n == 0:
            own_row = native(case.name, "UPDATE email_jobs SET customer = ? WHERE customer = ?")
            await tx.execute(own_row, "locked", "c0")
            await trio.to_thread.run_sync(wait_for_a_round_waiting_on_a_lock, case.stand)
            counted.append(await pool.fetchval("SELECT count(*) FROM email_jobs"))
            first_done.set()
        else:
            await first_done.wait()

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(60):
        async with serving(app):
            await settled(app, handle, 2)
            stats = app.statistics(handle)
    assert counted == [2]
    assert (stats.acked, stats.retried, stats.released, stats.settle_errors) == (2, 0, 0, ())
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
