"""FIFO groups (``Group(fifo=True)``, REFERENCE.md §3.6, tests/forms/fifo.rs) on PostgreSQL and
MariaDB in the row lock and lease forms, and on SQLite in the lease form: a group's rows are
handled one at a time in claim order, whatever the workers, across brokers, and while another
transaction holds the group's guard; a retried head blocks its group, a delayed one moves
behind rows due earlier, a dead letter moves a poison head out; other groups run beside it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pymysql
import pytest
import trio

from trinbox import (
    App,
    Attempt,
    FifoAtSerializable,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    Priority,
    RetryAfter,
    RowLock,
    Serializable,
    SqlBroker,
    Subscriber,
    subscriber,
)
from trinbox.schema import ddl
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import MariaStand, Stand, fresh_stand
from .conftest import Case
from .kit import DUE, ClaimWatch, cells, insert_rows
from .test_processes import run_workers

TABLE = "ledger"
GROUP = "acct"


class LedgerLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    dead_from: Annotated[str | None, OriginGroup()] = None
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class LedgerLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    dead_from: Annotated[str | None, OriginGroup()] = None
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


LEDGER: dict[str, type[Inbox[Any, Any]]] = {"row_lock": LedgerLock, "lease": LedgerLease}

fifo_cells = cells(forms=("row_lock", "lease"))
server_cells = cells(forms=("row_lock", "lease"), stands=("postgres", "mariadb"))


@dataclass
class Entry:
    n: int


class Ledger:
    """What the handlers of one test saw, across its apps: the order rows started in, and the
    most rows of one group in work at once."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.in_work: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.finished = 0
        self.changed = trio.Event()

    @contextmanager
    def working(self, group: str, n: int) -> Iterator[None]:
        self.started.append(n)
        self.in_work[group] = self.in_work.get(group, 0) + 1
        self.most[group] = max(self.most.get(group, 0), self.in_work[group])
        self._changed()
        try:
            yield
        finally:
            self.in_work[group] -= 1
            self.finished += 1
            self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_started(self, count: int) -> None:
        while len(self.started) < count:
            await self.changed.wait()

    async def wait_finished(self, count: int) -> None:
        """Wait until ``count`` handler calls have returned (their rows settle after)."""
        while self.finished < count:
            await self.changed.wait()


async def _publish(
    broker: SqlBroker[Any], row: type[Inbox[Any, Any]], *ns: int, group: str = GROUP, **columns: Any
) -> None:
    """Publish rows in one transaction, so a claim sees all of them or none."""
    async with broker.transaction() as tx:
        for n in ns:
            await tx.publish(row, Entry(n), account=group, **columns)


def _app(
    broker: SqlBroker[Any], row: type[Inbox[Any, Any]], *handlers: Subscriber[Any, Any]
) -> App:
    app = make_app()
    for handler in handlers:
        app.include(broker, handler)
    app.on_startup(lambda: broker.create_tables(row))
    return app


@fifo_cells
async def test_a_group_keeps_its_order_under_four_workers(case: Case, clock: VirtualClock) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()

    @subscriber(InboxQueue(row, GROUP).workers(4))
    async def work(entry: Entry) -> None:
        with ledger.working(GROUP, entry.n):
            # Earlier rows take longer: rows handled side by side would finish out of order.
            await trio.sleep((9 - entry.n) * 0.25)

    app = _app(broker, row, work)
    async with serving(app):
        await _publish(broker, row, *range(1, 9))
        with trio.fail_after(120):
            await settled(app, work, 8)
    assert ledger.started == [1, 2, 3, 4, 5, 6, 7, 8]
    assert ledger.most == {GROUP: 1}


@fifo_cells
async def test_a_delayed_head_moves_behind_rows_due_earlier(
    case: Case, clock: VirtualClock
) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> HandlerOutcome:
        with ledger.working(GROUP, entry.n):
            if entry.n == 1 and ledger.started.count(1) == 1:
                return HandlerOutcome.retry_after(timedelta(seconds=1))
            return HandlerOutcome.ack()

    app = _app(broker, row, work)
    async with serving(app):
        await _publish(broker, row, 1, 2, 3)
        with trio.fail_after(60):
            await settled(app, work, 4)
    assert ledger.started == [1, 2, 3, 1]


@fifo_cells
async def test_a_retried_head_blocks_its_group(case: Case, clock: VirtualClock) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> HandlerOutcome:
        with ledger.working(GROUP, entry.n):
            if entry.n == 1 and ledger.started.count(1) < 3:
                return HandlerOutcome.retry()
            return HandlerOutcome.ack()

    app = _app(broker, row, work)
    async with serving(app):
        await _publish(broker, row, 1, 2, 3)
        with trio.fail_after(60):
            await settled(app, work, 5)
    assert ledger.started == [1, 1, 1, 2, 3]


@fifo_cells
async def test_a_dead_letter_moves_a_poison_head_out(case: Case, clock: VirtualClock) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> HandlerOutcome:
        with ledger.working(GROUP, entry.n):
            return HandlerOutcome.retry() if entry.n == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, work).max_attempts(3).dead_letter("acct_dead")
    app.on_startup(lambda: broker.create_tables(row))
    async with serving(app):
        await _publish(broker, row, 1, 2, 3)
        with trio.fail_after(60):
            await settled(app, work, 5)
    # Three attempts hold the group; then the head moves to the dead letter group and the
    # rows behind it run in order.
    assert ledger.started == [1, 1, 1, 2, 3]
    assert case.stand.rows(f"SELECT account, dead_from FROM {TABLE}") == [("acct_dead", GROUP)]


@asynccontextmanager
async def _two_claimers(
    case: Case, ledger: Ledger, release: trio.Event | None = None, workers: int = 4
) -> AsyncIterator[SqlBroker[Any]]:
    """Two apps on two brokers serving the group of one table, each with ``workers``; their
    handlers record into ``ledger`` and, with ``release``, hold row 1 until it is set."""
    row = LEDGER[case.form]
    served: list[tuple[App, Subscriber[Any, Any]]] = []
    brokers = [case.stand.broker(), case.stand.broker()]
    for broker in brokers:

        @subscriber(InboxQueue(row, GROUP).workers(workers))
        async def work(entry: Entry) -> None:
            with ledger.working(GROUP, entry.n):
                if release is not None and entry.n == 1:
                    await release.wait()
                await trio.sleep(0.01)  # the other claimer has its chance meanwhile

        served.append((_app(broker, row, work), work))
    async with serving(served[0][0]), serving(served[1][0]):
        yield brokers[0]


@fifo_cells
async def test_two_claimers_never_hold_two_rows_of_a_group_and_keep_its_order(
    case: Case, clock: VirtualClock
) -> None:
    ledger = Ledger()
    row = LEDGER[case.form]
    async with _two_claimers(case, ledger) as broker:
        await _publish(broker, row, *range(1, 13))
        with trio.fail_after(120):
            await ledger.wait_finished(12)
    assert ledger.started == list(range(1, 13))
    assert ledger.most == {GROUP: 1}


@fifo_cells
@pytest.mark.parametrize("ahead", [False, True], ids=["behind", "ahead"])
async def test_the_head_in_work_holds_back_its_group(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch, ahead: bool
) -> None:
    """While row 1 is in work on one claimer, the other claims nothing: neither the row behind
    it nor (``ahead``) a row that entered the group ahead of it, with a smaller priority."""
    ledger = Ledger()
    release = trio.Event()
    row = LEDGER[case.form]
    watch = ClaimWatch(monkeypatch)
    async with _two_claimers(case, ledger, release, workers=1) as broker:
        await _publish(broker, row, 1)
        with trio.fail_after(60):
            await ledger.wait_started(1)
            if ahead:
                await _publish(broker, row, 2, priority=-1)
            else:
                await _publish(broker, row, 2)
            # The claimer without row 1 claims again and again, taking nothing.
            seen = watch.done
            await watch.wait_done(seen + 4)
            assert ledger.started == [1]
            release.set()
            await ledger.wait_started(2)
    assert ledger.started == [1, 2]
    assert ledger.most == {GROUP: 1}
    assert not watch.failed


@fifo_cells
async def test_other_groups_of_the_table_run_beside_a_fifo_group(
    case: Case, clock: VirtualClock
) -> None:
    """Two subscriptions on two groups of one table: each keeps its own order, and a row in
    work in one group does not hold back the other."""
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()
    both = trio.Event()

    def handler(group: str) -> Subscriber[Any, Any]:
        @subscriber(InboxQueue(row, group).workers(2))
        async def work(entry: Entry) -> None:
            with ledger.working(group, entry.n):
                if entry.n in (1, 11) and not both.is_set():
                    # Each group's first row waits for the other's: both are in work at once.
                    if ledger.in_work.get("a", 0) and ledger.in_work.get("b", 0):
                        both.set()
                    await both.wait()

        return work

    a, b = handler("a"), handler("b")
    app = _app(broker, row, a, b)
    async with serving(app):
        await _publish(broker, row, 1, 2, 3, group="a")
        await _publish(broker, row, 11, 12, 13, group="b")
        with trio.fail_after(60):
            await settled(app, a, 3)
            await settled(app, b, 3)
    assert [n for n in ledger.started if n < 10] == [1, 2, 3]
    assert [n for n in ledger.started if n > 10] == [11, 12, 13]
    assert ledger.most == {"a": 1, "b": 1}


@fifo_cells
async def test_two_processes_keep_the_order_of_a_group(case: Case) -> None:
    """Two OS processes with workers(4) each (fifo_process.py): the group's twelve rows are
    handled in order, each after the one before it ended, whichever process took it."""
    row = LEDGER[case.form]
    dialect = "mysql" if case.name == "mariadb" else case.name
    case.stand.script(";\n".join(ddl(row, dialect)))
    rows = 12
    insert_rows(
        case.stand,
        TABLE,
        [
            {
                "account": GROUP,
                "priority": 0,
                "retry_after": DUE,
                "attempt": 1,
                "payload": b'{"n": %d}' % n,
            }
            for n in range(1, rows + 1)
        ],
    )
    results = await run_workers(case, rows, "tests.integration.matrix.fifo_process")
    spans = sorted((start, end, int(n)) for result in results for n, start, end in result.intervals)
    assert [n for _, _, n in spans] == list(range(1, rows + 1))
    for (_, end, n), (start, _, _) in pairwise(spans):
        assert end <= start, f"row {n} was still in work when the next began"
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


# -- the group guard, held by hand on another connection (servers) ------------------------------


@contextmanager
def _guard_held(stand: Stand) -> Iterator[None]:
    """Hold the group's guard in a transaction on a connection of the test's own: PostgreSQL
    its advisory lock; MariaDB a lock on row 2, behind the head (the guard's two counts then
    differ, though the head itself is free)."""
    if stand.name == "postgres":
        with psycopg.connect(stand.url) as conn:  # one transaction until the block ends
            conn.execute(f"SELECT pg_advisory_xact_lock(hashtextextended('{TABLE}:{GROUP}', 0))")
            try:
                yield
            finally:
                conn.rollback()
        return
    assert isinstance(stand, MariaStand)
    my = pymysql.connect(**{**stand._args, "autocommit": False})  # type: ignore[arg-type]
    try:
        with my.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute("START TRANSACTION")
            cur.execute(f"SELECT id FROM {TABLE} WHERE id = 2 FOR UPDATE")
            assert [tuple(r) for r in cur.fetchall()] == [(2,)]
        try:
            yield
        finally:
            my.rollback()
    finally:
        my.close()


@server_cells
async def test_a_claim_takes_nothing_while_another_transaction_holds_the_guard(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker(poll_interval=1.0)  # claims every virtual second
    ledger = Ledger()
    watch = ClaimWatch(monkeypatch)

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> None:
        with ledger.working(GROUP, entry.n):
            pass

    app = _app(broker, row, work)
    async with serving(app):
        # Rows by raw SQL, which wakes nobody, then the guard, before the next claim runs.
        insert_rows(
            case.stand,
            TABLE,
            [
                {
                    "account": GROUP,
                    "priority": 0,
                    "retry_after": DUE,
                    "attempt": 1,
                    "payload": b'{"n": %d}' % n,
                }
                for n in (1, 2, 3)
            ],
        )
        with trio.fail_after(60):
            with _guard_held(case.stand):
                seen = watch.done
                await watch.wait_done(seen + 3)  # three claims, each taking nothing
                assert ledger.started == []
            await ledger.wait_finished(3)
    assert ledger.started == [1, 2, 3]
    assert not watch.failed


# -- MariaDB: a row lock FIFO table at SERIALIZABLE ---------------------------------------------


class SerialLedger(Inbox[RowLock, Serializable], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    payload: Annotated[bytes, Payload()]


async def test_a_mariadb_row_lock_fifo_table_at_serializable_is_refused(tmp_path: Path) -> None:
    with fresh_stand("mariadb", tmp_path) as stand:
        broker = stand.broker()

        @subscriber(InboxQueue(SerialLedger, GROUP))
        async def work(entry: Entry) -> None:
            pass

        # Refused as the subscription is mounted, before anything runs.
        with trio.fail_after(20), pytest.raises(FifoAtSerializable) as caught:
            await _app(broker, SerialLedger, work).serve()
    message = str(caught.value)
    assert message.startswith("ledger (SerialLedger): a FIFO group's guard counts its rows ")
    assert "found a row lock FIFO table at Serializable" in message
    assert "declare Inbox[RowLock, ReadCommitted]" in message
