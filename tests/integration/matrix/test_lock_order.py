"""One lock order in the lease form (issue 17, item 2): a settlement takes its delivery's token,
then a pooled connection, and the lease keeper never waits for a token while it holds a
connection. With as many lease subscriptions as pool connections, every keeper round lands
beside settlements, and claims, settlements and publishes all go on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import InboxQueue, Subscriber, subscriber
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells, insert_emails

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
