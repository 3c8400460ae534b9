"""A cancel request announced while the listening connection was down is read as soon as it
listens again (docs/reference.md #cancel-trinbox): the reconnect wakes every cancel watch, as
it wakes the subscriptions and the waits, instead of leaving the request to the watch's next
poll (an hour here). The request is written straight into the table, as a cancel whose
NOTIFY nobody heard leaves it.

Real clock, as in test_notify.py: the reconnect comes on a socket while every task waits.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import trio

from trinbox import App, AppInfo, CancelRequests, InboxQueue, SqlBroker, subscriber
from trinbox._declare._inbox import spec_of
from trinbox.testing import settled

from ..matrix.test_cancel import Job, LeasedJob
from ..serving import serving
from ..stands import PostgresStand, fresh_stand

HOUR = 3600.0
REQUESTS = CancelRequests("reconnect_cancels", expire_after=timedelta(hours=2))


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        yield stand


async def test_the_listeners_reconnect_wakes_the_cancel_watches(pg: PostgresStand) -> None:
    broker = SqlBroker.postgres(pg.url, poll_interval=HOUR, listen_notify=True)
    broker.use_cancel_requests(REQUESTS)
    entered = trio.Event()
    seen: list[str] = []

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def wait_for_ever(job: Job) -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append("cancelled")
            raise

    app = App(AppInfo("worker"))
    app.on_startup(lambda: broker.create_tables(LeasedJob))
    app.on_startup(lambda: broker.create_tables(REQUESTS))
    app.include(broker, wait_for_ever)
    async with serving(app):
        await broker.publish(LeasedJob, Job(1), id=1, queue="jobs")
        with trio.fail_after(10):
            await entered.wait()
            pg.execute(
                "INSERT INTO reconnect_cancels (queue_table, row_id, expires_at) "
                "VALUES (?, '1', now() + interval '1 hour')",
                spec_of(LeasedJob).qualified_name,
            )
            killed = pg.value(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
            assert killed == 1
            await settled(app, wait_for_ever, 1)
        stats = app.statistics(wait_for_ever)
    assert seen == ["cancelled"]
    assert (stats.cancelled, stats.cancel_requests_served) == (1, 1)
    assert pg.value("SELECT count(*) FROM reconnect_cancels") == 0
