"""What serving and shutting down does on SQLite alone: every sqlite3 connection the driver opened
is closed, and the row lock form is refused (docs/design.md#trio-structure,
docs/reference.md#opening-a-subscription). Serving, hooks, startup refusals and shutdown on every
database are in tests/integration/matrix/test_lifecycle.py."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import trinbox._drivers.sqlite as sqlite_driver
from trinbox import Inbox, InboxQueue, keys, subscriber
from trinbox._drivers.sqlite import SqlitePool
from trinbox.errors import UnsupportedForm
from trinbox.testing import VirtualClock, settled
from trinbox.typing import ShutdownReport

from ..serving import make_app, serving
from .harness import Db
from .tables2 import (
    JOB_FORMS,
    JOBS,
    RowLockedJob,
    insert_jobs,
)

HOUR = 3600.0


@dataclass
class Job:
    n: int


class RawConnections:
    """Records every sqlite3 connection the driver opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[sqlite3.Connection] = []
        connect = sqlite_driver._connect

        def recording(path: str, busy_timeout: float) -> sqlite3.Connection:
            raw = connect(path, busy_timeout)
            self.opened.append(raw)
            return raw

        monkeypatch.setattr(sqlite_driver, "_connect", recording)

    def still_open(self) -> int:
        count = 0
        for raw in self.opened:
            try:
                raw.execute("SELECT 1")
            except sqlite3.ProgrammingError:
                continue
            count += 1
        return count


# -- SQLite's own connections ----------------------------------------------------------------


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_shutdown_closes_every_sqlite3_connection(
    db: Db, row: type[Inbox[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        async with serving(app):
            await broker.publish(row, Job(1))
            await settled(app, handle, 1)
    assert app.report == ShutdownReport(locks_released=0, connections_closed=0)
    assert raws.opened
    assert raws.still_open() == 0


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_cancel_past_grace_leaves_no_sqlite3_connection_open(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    started = trio.Event()

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(job: Job) -> None:
        started.set()
        await trio.sleep(HOUR)

    app = make_app(grace=5.0)
    app.include(broker, handle)
    with trio.fail_after(HOUR / 2):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            pool = broker.pool
            await started.wait()
            nursery.cancel_scope.cancel()
    assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
    assert isinstance(pool, SqlitePool)
    assert pool._idle == []
    assert raws.opened
    assert raws.still_open() == 0


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_shutdown_past_grace_of_a_transactional_handler_closes_its_connection(
    db: Db, row: type[Inbox[Any, Any]], clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.script(JOBS)
    insert_jobs(db, [b'{"n": 1}'])
    raws = RawConnections(monkeypatch)
    broker = db.broker(poll_interval=HOUR, lease=8 * HOUR)
    wrote = trio.Event()

    @subscriber(InboxQueue(row, "jobs").transactional())
    async def handle(job: Job, tx: keys.Tx) -> None:
        await tx.execute("INSERT INTO audit (note) VALUES ('in work')")
        wrote.set()
        await trio.sleep_forever()

    app = make_app(grace=1.0)
    app.include(broker, handle)
    with trio.fail_after(HOUR / 2):
        async with serving(app):
            await wrote.wait()
    assert app.report == ShutdownReport(locks_released=1, connections_closed=0)
    assert db.rows("SELECT note FROM audit") == []
    assert raws.still_open() == 0


# -- refused at include -------------------------------------------------------------------------


async def test_row_lock_table_on_sqlite_is_refused_at_include(db: Db) -> None:
    broker = db.broker()

    @subscriber(InboxQueue(RowLockedJob, "jobs"))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    expected = (
        "jobs (RowLockedJob): SQLite cannot serve the RowLock form (it serves Lease or "
        "Advisory); SQLite has no row locks; declare Inbox[Lease] with a LockedUntil field, "
        "or Inbox[Advisory] with advisory_lock="
    )
    with pytest.raises(UnsupportedForm, match=f"^{re.escape(expected)}$"):
        app.include(broker, handle)  # type: ignore[arg-type]
