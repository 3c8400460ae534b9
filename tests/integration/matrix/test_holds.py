"""What a delivery holds ends with it (issue 8, items 6, 7 and 8): workers never outnumber the
connections their deliveries hold, a settlement that fails is a failed settlement and serving
goes on, and a delivery's ``keys.Tx`` cannot outlive it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.errors import ConnectionLost, SettlementError, StartupError, TransactionHeld
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells, insert_emails, native, where


@dataclass
class Job:
    n: int


def add_rows(case: Case, count: int) -> None:
    insert_emails(case.stand, [json.dumps({"n": n}).encode() for n in range(count)])


@cells(forms=["lease", "advisory"])
async def test_transactional_workers_beyond_the_pool_neither_hang_nor_starve_the_pool(
    case: Case, clock: VirtualClock
) -> None:
    # Each transactional delivery holds a connection from its claim to its settlement: six
    # workers on a pool of three must not take the connection that claims, the lease keeper
    # and keys.Pool need.
    add_rows(case, 6)
    select_one = native(case.name, "SELECT count(*) FROM email_jobs WHERE job_id = ?")

    @subscriber(InboxQueue(case.email, "emails").transactional().workers(6))
    async def handle(job: Job, tx: keys.Tx, pool: keys.Pool) -> HandlerOutcome:
        await pool.fetchval(select_one, job.n + 1)  # a connection of its own, beside the tx
        await trio.sleep(1)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(case.stand.broker(pool_size=3, lease=HOUR), handle)
    with trio.fail_after(60):
        async with serving(app):
            await settled(app, handle, 6)
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0


@cells(forms=["lease", "advisory", "row_lock"])
async def test_subscriptions_whose_deliveries_would_hold_the_whole_pool_are_refused_at_startup(
    case: Case, clock: VirtualClock
) -> None:
    def queue(name: str) -> InboxQueue[Any, Any]:
        q = InboxQueue(case.email, name).workers(2)
        return q if case.form == "row_lock" else q.transactional()

    @subscriber(queue("emails"))
    async def first(job: Job) -> None:
        pass

    @subscriber(queue("others"))
    async def second(job: Job) -> None:
        pass

    app = make_app()
    broker = case.stand.broker(pool_size=3)
    app.include(broker, first)
    app.include(broker, second)
    # A transactional lease subscription's keeper takes a connection for its rounds besides
    # its deliveries', so each is capped at one worker on a pool of three.
    each = "1 and 1 for its lease keeper" if case.form == "lease" else "2"
    expected = (
        f"test: the deliveries of one broker's subscriptions hold a connection each while in "
        f"work, and one connection of its pool stays free for claims and upkeep, found up to 4 "
        f"held ({where(first)}: {each}, {where(second)}: {each}) on a pool of 3; give the "
        f"broker pool_size=5, or lower their workers(n)"
    )
    with trio.fail_after(10), pytest.raises(StartupError, match=f"^{re.escape(expected)}$"):
        await app.serve()


@cells(stands=["postgres"])
async def test_a_settlement_whose_connection_is_lost_is_logged_and_serving_goes_on(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The handler's transaction loses its connection; the retry cannot roll it back.
    add_rows(case, 2)
    handled: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        handled.append(job.n)
        if job.n == 0 and handled.count(0) == 1:
            pid = await tx.fetchval("SELECT pg_backend_pid()")
            case.stand.value("SELECT pg_terminate_backend(?)", pid)
            return HandlerOutcome.retry()
        return HandlerOutcome.ack()

    app = make_app()
    app.include(case.stand.broker(lease=HOUR), handle)
    with trio.fail_after(30):
        async with serving(app):
            await settled(app, handle, 3)
            stats = app.statistics(handle)
            if case.form == "lease":
                # The lease form retries by its token, on another connection: it still settles.
                assert stats.settle_failures == 0
            else:
                assert stats.settle_failures == 1
                (error,) = stats.settle_errors
                expected = SettlementError if case.form == "advisory" else ConnectionLost
                assert isinstance(error, expected)
    assert sorted(handled) == [0, 0, 1]
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0


@cells()
async def test_a_kept_tx_raises_transaction_held_and_runs_nothing(
    case: Case, clock: VirtualClock
) -> None:
    add_rows(case, 1)
    kept: list[keys.Tx] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(job: Job, tx: keys.Tx) -> HandlerOutcome:
        kept.append(tx)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(case.stand.broker(lease=HOUR), handle)
    delete = native(case.name, "DELETE FROM plain_jobs WHERE tenant = ?")
    with trio.fail_after(30):
        async with serving(app):
            await settled(app, handle, 1)
            with pytest.raises(TransactionHeld, match="ends with its delivery"):
                await kept[0].execute(delete, "x")
            with pytest.raises(TransactionHeld):
                await kept[0].publish(case.email, Job(9), name="emails", customer="c")
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
