"""The advisory form on SQLite (REFERENCE.md §3.4, §10.2 forms/advisory/*, seed 000): what only
SQLite asks. The process keeps the keys in work per database file (whatever path names it), and
a subscription has one delivery in work at a time. Every advisory scenario of every stand runs
in tests/integration/matrix/test_advisory.py."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from trinbox import InboxQueue, SqlBroker, subscriber
from trinbox._forms.advisory import KeyRegistry
from trinbox.testing import TrioClock, VirtualClock, settled

from ..matrix.test_advisory import pass_over_each_others_key
from ..serving import make_app, serving
from ..stands import SqliteStand
from .harness import Db
from .tables import EMAIL_JOBS, LockedEmail


@dataclass
class Email:
    to: str


def keys_in_work(db: Db) -> set[str]:
    """The keys the process registry holds for ``db``'s file."""
    return set(KeyRegistry.keys("sqlite:" + os.path.realpath(db.path)))


class Work:
    """What a handler saw: the order of its messages and how many were in work at once."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.in_work = 0
        self.most = 0
        self.started: list[float] = []
        self.ended: list[float] = []

    async def run(self, email: Email, seconds: float) -> None:
        self.order.append(email.to)
        self.started.append(trio.current_time())
        self.in_work += 1
        self.most = max(self.most, self.in_work)
        try:
            await trio.sleep(seconds)
        finally:
            self.in_work -= 1
            self.ended.append(trio.current_time())


async def serve_customers(db: Db, customers: Sequence[str], *, workers: int) -> Work:
    """Publish one row per customer (in order), serve them with ``workers`` workers and a
    handler that works one second each, and return what the handler saw."""
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=0.5)
    work = Work()

    @subscriber(InboxQueue(LockedEmail, "emails").workers(workers))
    async def send(email: Email) -> None:
        await work.run(email, 1.0)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for n, customer in enumerate(customers):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        with trio.fail_after(60):
            await settled(app, send, len(customers))
    return work


# -- keys ------------------------------------------------------------------------------------


async def test_one_delivery_in_work_at_a_time_even_with_workers(
    db: Db, clock: VirtualClock
) -> None:
    # Different keys and three workers: SQLite's claim reads the first due row alone, and
    # takes nothing while it is in work; each next row waits up to a poll interval (0.5 s).
    work = await serve_customers(db, ["c1", "c2", "c3"], workers=3)
    assert work.order == ["0@x", "1@x", "2@x"]
    assert work.most == 1
    for before, after in zip(work.ended, work.started[1:], strict=False):
        assert before <= after
    assert keys_in_work(db) == set()


async def test_the_registry_knows_one_file_under_two_names(
    db: Db, tmp_path: Path, clock: VirtualClock
) -> None:
    db.script(EMAIL_JOBS)
    # The second broker names the same file another way; the registry keys it by its real
    # path, so the brokers still pass over each other's key.
    (tmp_path / "sub").mkdir()
    second = SqlBroker.sqlite(
        f"sqlite:///{tmp_path}/sub/../{db.path.name}", poll_interval=0.25, clock=TrioClock()
    )
    await pass_over_each_others_key(SqliteStand(db.path), db.broker(poll_interval=0.25), second)
    assert keys_in_work(db) == set()
