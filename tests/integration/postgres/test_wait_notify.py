"""``broker.wait`` woken by another process's settlement (issue 20, item 5; docs/reference.md
#listen-and-notify): with ``listen_notify``, a broker whose deliveries settle rows of a table
with a Result field announces the table on ``trinbox_settled``, and a waiting process reads
its row at once instead of at its next poll (an hour here).

Real clock, as in test_notify.py: a notification arrives on a socket while every task waits.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from trinbox import (
    App,
    AppInfo,
    CancelResult,
    HandlerOutcome,
    InboxQueue,
    Message,
    SqlBroker,
    subscriber,
)
from trinbox._drivers.aio import asyncio_loop
from trinbox.testing import settled
from trinbox.typing import Settled

from ..serving import serving
from ..stands import PostgresStand, fresh_stand
from ..worker_kit import Worker
from .settle_process import Ask, Quote, QuoteJob

HOUR = 3600.0
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        yield stand


def waiting_app(stand: PostgresStand) -> tuple[App, SqlBroker[Any]]:
    """A process that only publishes and waits: it subscribes to nothing, so only a
    notification can wake its wait before the hour-long poll."""
    broker = SqlBroker.postgres(stand.url, poll_interval=HOUR, listen_notify=True)
    app = App(AppInfo("waiter"))
    app.add_broker(broker)
    app.on_startup(lambda: broker.create_tables(QuoteJob))
    return app, broker


async def parked(task: trio.lowlevel.Task) -> None:
    """Until ``task`` waits on a ``trio.Event``: a wait that read its row unsettled. Looked
    at every 10 ms: no event says it, and trio-asyncio's loop keeps
    ``wait_all_tasks_blocked`` from returning."""
    while not any(  # noqa: ASYNC110
        frame.f_code is trio.Event.wait.__code__ for frame, _ in task.iter_await_frames()
    ):
        await trio.sleep(0.01)


class Waiter:
    """A ``broker.wait`` in a task of its own, and what it returned."""

    def __init__(self, broker: SqlBroker[Any], ident: int) -> None:
        self.broker = broker
        self.ident = ident
        self.task: trio.lowlevel.Task | None = None
        self.found: Settled[QuoteJob] | None = None
        self.done = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.task = trio.lowlevel.current_task()
        task_status.started()
        self.found = await self.broker.wait(QuoteJob, self.ident)
        self.done.set()

    async def read_unsettled(self) -> None:
        assert self.task is not None
        await parked(self.task)


async def test_a_settlement_in_another_process_wakes_the_wait(pg: PostgresStand) -> None:
    app, broker = waiting_app(pg)
    async with serving(app), trio.open_nursery() as nursery:
        await broker.publish(QuoteJob, Ask(21), id=21)
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.integration.postgres.settle_process", pg.url],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        settler = Worker(process)
        nursery.start_soon(settler.read)
        nursery.start_soon(settler.drain)
        waiter = Waiter(broker, 21)
        try:
            with trio.fail_after(60):
                await settler.ready.wait()
                assert settler.out.decode().startswith("claimed 21"), settler.err.decode()
                await nursery.start(waiter.run)
                await waiter.read_unsettled()
                assert process.stdin is not None
                await process.stdin.send_all(b"go\n")
                with trio.fail_after(15):
                    await waiter.done.wait()  # an hour before the poll, without the notification
                assert await process.wait() == 0, settler.err.decode()
        finally:
            process.kill()
    assert waiter.found is not None
    assert (waiter.found.outcome, waiter.found.result) == ("ack", Quote(42))


async def test_one_notification_per_table_while_one_is_in_flight(pg: PostgresStand) -> None:
    """Settlements are announced apart from their own round trips, coalesced: a hundred
    settlements send far fewer than a hundred notifications, and at least one."""
    app, broker = waiting_app(pg)
    rows = 100

    @subscriber(InboxQueue(QuoteJob, "quotes").workers(10))
    async def price(ask: Ask) -> HandlerOutcome:
        return HandlerOutcome.ack(Quote(ask.n))

    app.include(broker, price)
    with psycopg.connect(pg.url, autocommit=True) as listening:
        listening.execute("LISTEN trinbox_settled")
        async with serving(app):
            await broker.publish_many(QuoteJob, [Message(Ask(n), id=n) for n in range(rows)])
            with trio.fail_after(60):
                await settled(app, price, rows)
                last = await broker.wait(QuoteJob, rows - 1)
        payloads = [n.payload for n in listening.notifies(timeout=1.0, stop_after=rows)]
    assert last.result == Quote(rows - 1)
    assert payloads, "no notification"
    assert set(payloads) == {"quote_jobs"}
    assert len(payloads) < rows / 2, len(payloads)


async def test_a_queued_cancel_of_another_broker_wakes_the_wait(pg: PostgresStand) -> None:
    """A cancel settles a queued row as a drop; with ``listen_notify`` the cancelling broker
    (here one that serves nothing, as ``trinbox jobs cancel`` is) announces it, so a wait in
    another process reads ``"drop"`` at once instead of at its next poll."""
    app, broker = waiting_app(pg)
    admin = SqlBroker.postgres(pg.url, poll_interval=HOUR, listen_notify=True)
    async with serving(app), trio.open_nursery() as nursery:
        await broker.publish(QuoteJob, Ask(7), id=7)
        waiter = Waiter(broker, 7)
        await nursery.start(waiter.run)
        await waiter.read_unsettled()
        async with asyncio_loop(admin.needs_asyncio):
            await admin.open()
            try:
                assert await admin.cancel(QuoteJob, 7) is CancelResult.QUEUED
            finally:
                await admin.aclose()
        with trio.fail_after(15):
            await waiter.done.wait()  # an hour before the poll, without the notification
    assert waiter.found is not None
    assert (waiter.found.outcome, waiter.found.result) == ("drop", None)
