"""Every pool acquire is bounded (issue 17, item 2): a wait for a connection that lasts
``POOL_WAIT`` fails with ``PoolExhausted``, naming the pool's size and what holds its
connections, on every stand; a shorter wait is served."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import trio

from trinbox import InboxQueue, keys, subscriber
from trinbox._bounds import POOL_WAIT
from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import PoolExhausted
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells


@dataclass
class Job:
    n: int


def exhausted(holder: str, size: int, held: str) -> str:
    """The message of a ``holder`` that found every connection of a pool held."""
    return (
        f"^the {re.escape(holder)} waited 30 s for a connection of the .+ pool, the most it "
        f"waits, and found all {size} of its connections held all that time "
        f"\\({re.escape(held)}\\); give the broker a larger pool_size, lower the workers\\(n\\) "
        f"of subscriptions whose deliveries hold a connection each, or give connections back "
        f"sooner \\(a handler's keys\\.Pool block, a transaction\\)$"
    )


@cells(forms=["lease"])
async def test_an_acquire_past_the_bound_names_the_pool_and_its_holders(
    case: Case, clock: VirtualClock
) -> None:
    assert POOL_WAIT == 30
    async with asyncio_loop(case.name != "sqlite"):
        broker = case.stand.broker(pool_size=3)
        await broker.open()
        try:
            pool = broker.pool
            held = [
                await pool.acquire("settlement"),
                await pool.acquire("settlement"),
                await pool.acquire("lease keeper"),
            ]
            started = trio.current_time()
            with trio.fail_after(POOL_WAIT + 5), pytest.raises(PoolExhausted) as caught:
                await pool.acquire("publish")
            assert trio.current_time() - started == POOL_WAIT
            message = str(caught.value)
            assert re.match(
                exhausted("publish", 3, "2 by settlement, 1 by lease keeper"), message
            ), message
            assert pool.identity in message
            # A wait within the bound is served: a connection comes back after 29 s.
            async with trio.open_nursery() as nursery:

                async def give_back_later() -> None:
                    await trio.sleep(POOL_WAIT - 1)
                    await pool.give_back(held.pop())

                nursery.start_soon(give_back_later)
                started = trio.current_time()
                conn = await pool.acquire("publish")
                assert trio.current_time() - started == POOL_WAIT - 1
            for c in [conn, *held]:
                await pool.give_back(c)
        finally:
            await broker.aclose()


@cells(forms=["lease"])
async def test_a_publish_finds_every_connection_held_and_fails_saying_by_what(
    case: Case, clock: VirtualClock
) -> None:
    # Two handlers keep a keys.Pool connection each on a pool of two: a publish (and the
    # claims) cannot get one, and say why instead of waiting on.
    broker = case.stand.broker(pool_size=2, lease=3600)
    holding = 0
    changed = trio.Event()
    finish = trio.Event()

    @subscriber(InboxQueue(case.email, "emails").workers(2))
    async def handle(job: Job, pool: keys.Pool) -> None:
        nonlocal holding, changed
        async with pool.connection():
            holding += 1
            changed.set()
            changed = trio.Event()
            await finish.wait()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        for n in range(2):
            await broker.publish(case.email, Job(n), name="emails", customer="c")
        with trio.fail_after(10):
            while holding < 2:
                await changed.wait()
        with trio.fail_after(POOL_WAIT + 5), pytest.raises(PoolExhausted) as caught:
            await broker.publish(case.email, Job(2), name="emails", customer="c")
        message = str(caught.value)
        assert re.match(exhausted("publish", 2, "2 by keys.Pool"), message), message
        finish.set()
        with trio.fail_after(10):
            await settled(app, handle, 2)
            # Serving goes on: the next publish is claimed and handled.
            await broker.publish(case.email, Job(3), name="emails", customer="c")
            await settled(app, handle, 3)
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
