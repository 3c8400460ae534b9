"""Batch publish on PostgreSQL's own terms: through PgBouncer in transaction pooling (no
statement outlives its transaction, the arrays' insert prepared anew each time), and with
``listen_notify``, one NOTIFY per group a batch wrote, delivered at its commit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from trinbox import Message, SqlBroker
from trinbox.testing import TrioClock

from ..matrix.test_publish_many import ManyLease
from ..serving import make_app, serving
from ..stands import PostgresStand, fresh_stand
from .test_pgbouncer import Bounced, bounced

__all__ = ["bounced"]


@dataclass
class Job:
    n: int


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as found:
        assert isinstance(found, PostgresStand)
        yield found


async def test_a_batch_through_pgbouncer(bounced: Bounced) -> None:
    broker = bounced.broker()
    app = make_app()
    app.add_broker(broker)

    @app.on_startup
    async def create() -> None:
        await broker.create_tables(ManyLease)

    async with serving(app):
        for _ in range(3):  # each batch on whichever server session PgBouncer hands out
            await broker.publish_many(ManyLease, [Job(0)], queue="jobs")
        found = await broker.publish_many(
            ManyLease,
            [Job(1), Message(Job(2), unique="k"), Message(Job(3), unique="k"), Job(4)],
            queue="jobs",
            chunk=2,
        )
        async with broker.transaction() as tx:
            more = await tx.publish_many(ManyLease, [Job(5), Job(6)], queue="jobs", chunk=1)
    assert [(p.duplicate, p.key) for p in found] == [
        (False, None),
        (False, "k"),
        (True, "k"),
        (False, None),
    ]
    assert found[2].id == found[1].id
    rows = bounced.stand.rows("SELECT id, payload FROM many_jobs ORDER BY id")
    written = [found[0].id, found[1].id, found[3].id, more[0].id, more[1].id]
    assert [i for i, _ in rows][3:] == written
    assert [bytes(p) for _, p in rows][3:] == [b'{"n":%d}' % n for n in (1, 2, 4, 5, 6)]


async def test_one_notify_per_group_at_the_commit(stand: PostgresStand) -> None:
    broker = SqlBroker.postgres(
        stand.url, poll_interval=0.05, clock=TrioClock(), listen_notify=True
    )
    app = make_app()
    app.add_broker(broker)

    @app.on_startup
    async def create() -> None:
        await broker.create_tables(ManyLease)

    with psycopg.connect(stand.url, autocommit=True) as listener:
        listener.execute('LISTEN "many_jobs"')
        async with serving(app):
            items = [Message(Job(n), queue="ab"[n % 2]) for n in range(6)]
            await broker.publish_many(ManyLease, items, chunk=2)
            await broker.publish_many(ManyLease, [Job(6), Job(7)], queue="a")
        got = [n.payload for n in listener.notifies(timeout=1.0, stop_after=10)]
    assert sorted(got[:2]) == ["a", "b"]
    assert got[2:] == ["a"]
