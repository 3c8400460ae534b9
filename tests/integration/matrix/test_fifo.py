"""FIFO groups (``Group(fifo=True)``, docs/reference.md#fifo-groups,
docs/reference.md#scenarios-fifo) on PostgreSQL and MariaDB in the row lock and lease forms, and on
SQLite in the lease form: a group's rows are handled one at a time in order, whatever the workers,
across brokers, and while another transaction holds the group's guard; a retried, failing or delayed
head holds its group at its place (behind the rows due before it only with
``delayed_rows_move_behind``), a dead letter moves a poison head out; other groups run beside it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
    Backoff,
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
    subscriber,
)
from trinbox._operations.queues import depths, opened, queues_of, redrive
from trinbox.errors import AlreadySubscribed, FifoAtSerializable
from trinbox.schema import ddl
from trinbox.testing import VirtualClock, idle, settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from ..stands import MariaStand, Stand, fresh_stand
from .conftest import Case
from .kit import DUE, HOUR, ClaimWatch, cells, insert_rows, where
from .test_database_clock import clock_broker
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


class BehindLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True, delayed_rows_move_behind=True)]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class BehindLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True, delayed_rows_move_behind=True)]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


# Group(fifo=True, delayed_rows_move_behind=True): ordered by due time.
LEDGER_BEHIND: dict[str, type[Inbox[Any, Any]]] = {"row_lock": BehindLock, "lease": BehindLease}

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
@pytest.mark.parametrize("behind", [False, True], ids=["at_its_place", "moved_behind"])
async def test_a_failing_head_waits_out_its_backoff(
    case: Case, clock: VirtualClock, behind: bool
) -> None:
    """The README's ledger: 100, 13, 200, 300 published, 13 fails once (an exception, the
    default backoff). By default 13 waits at the head and nothing behind it is
    claimed meanwhile; with ``delayed_rows_move_behind`` it waits behind the rest."""
    row = (LEDGER_BEHIND if behind else LEDGER)[case.form]
    broker = case.stand.broker()
    ledger = Ledger()
    started: list[tuple[int, float]] = []

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> None:
        started.append((entry.n, trio.current_time()))
        with ledger.working(GROUP, entry.n):
            if entry.n == 13 and ledger.started.count(13) == 1:
                raise RuntimeError("the posting's account is locked")

    app = _app(broker, row, work)
    async with serving(app):
        await _publish(broker, row, 100, 13, 200, 300)
        with trio.fail_after(60):
            await settled(app, work, 5)
    if behind:
        assert ledger.started == [100, 13, 200, 300, 13]
        return
    assert ledger.started == [100, 13, 13, 200, 300]
    first, again = (t for n, t in started if n == 13)
    assert again - first >= 0.5  # the backoff (a second, up to half off), waited at the head
    assert [n for n, t in started if first < t < again] == []


@fifo_cells
@pytest.mark.parametrize("behind", [False, True], ids=["at_its_place", "moved_behind"])
async def test_a_delayed_head(case: Case, clock: VirtualClock, behind: bool) -> None:
    """``retry_after(d)`` keeps the head at its place, holding its group, unless delayed rows
    move behind: then it waits behind the rows due before it (the reference's [1, 2, 3, 1])."""
    row = (LEDGER_BEHIND if behind else LEDGER)[case.form]
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
    assert ledger.started == ([1, 2, 3, 1] if behind else [1, 1, 2, 3])


@fifo_cells
@pytest.mark.parametrize("behind", [False, True], ids=["at_its_place", "moved_behind"])
async def test_a_row_published_with_a_delay(case: Case, clock: VirtualClock, behind: bool) -> None:
    """A delayed publish is a row not yet due: by default it holds its group at its place
    (publish order) until it is due; with ``delayed_rows_move_behind`` the rows due before
    it go first."""
    row = (LEDGER_BEHIND if behind else LEDGER)[case.form]
    broker = case.stand.broker()
    ledger = Ledger()
    started: dict[int, float] = {}

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> None:
        started[entry.n] = trio.current_time()
        with ledger.working(GROUP, entry.n):
            pass

    app = _app(broker, row, work)
    async with serving(app):
        published = trio.current_time()
        await broker.publish(row, Entry(1), account=GROUP, delay=timedelta(seconds=5))
        await broker.publish(row, Entry(2), account=GROUP)
        with trio.fail_after(60):
            await settled(app, work, 2)
    assert ledger.started == ([2, 1] if behind else [1, 2])
    assert started[1] - published >= 4.999  # the delay, through the database's times
    if not behind:
        assert started[2] >= started[1]


@fifo_cells
async def test_a_failing_head_reaches_its_dead_letter_and_the_group_flows(
    case: Case, clock: VirtualClock
) -> None:
    """A poison head raises every time: it holds its group through its backoffs until
    max_attempts moves it to its dead letter, and then the rows behind it run in order."""
    row = LEDGER[case.form]
    broker = case.stand.broker()
    ledger = Ledger()

    @subscriber(InboxQueue(row, GROUP))
    async def work(entry: Entry) -> None:
        with ledger.working(GROUP, entry.n):
            if entry.n == 1:
                raise RuntimeError("poison")

    app = make_app()
    app.include(broker, work).max_attempts(3).dead_letter("acct_dead")
    app.on_startup(lambda: broker.create_tables(row))
    async with serving(app):
        await _publish(broker, row, 1, 2, 3)
        with trio.fail_after(60):
            await settled(app, work, 5)
    assert ledger.started == [1, 1, 1, 2, 3]
    assert case.stand.rows(f"SELECT account FROM {TABLE}") == [("acct_dead",)]


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
    case: Case,
    ledger: Ledger,
    release: trio.Event | None = None,
    workers: int = 4,
    *,
    every: bool = False,
) -> AsyncIterator[SqlBroker[Any]]:
    """Two apps on two brokers serving the group of one table (``every``: one subscription
    over every group), each with ``workers``; their handlers record into ``ledger`` and, with
    ``release``, hold row 1 until it is set."""
    row = LEDGER[case.form]
    served: list[tuple[App, Subscriber[Any, Any]]] = []
    brokers = [case.stand.broker(), case.stand.broker()]
    queue = InboxQueue(row, "ledger").every_group() if every else InboxQueue(row, GROUP)
    for broker in brokers:

        @subscriber(queue.workers(workers))
        async def work(entry: Entry) -> None:
            with ledger.working(GROUP, entry.n):
                if release is not None and entry.n == 1:
                    await release.wait()
                await trio.sleep(0.01)  # the other claimer has its chance meanwhile

        served.append((_app(broker, row, work), work))
    async with serving(served[0][0]), serving(served[1][0]):
        yield brokers[0]


@fifo_cells
@pytest.mark.parametrize("every", [False, True], ids=["one_group", "every_group"])
async def test_two_claimers_never_hold_two_rows_of_a_group_and_keep_its_order(
    case: Case, clock: VirtualClock, every: bool
) -> None:
    ledger = Ledger()
    row = LEDGER[case.form]
    async with _two_claimers(case, ledger, every=every) as broker:
        await _publish(broker, row, *range(1, 13))
        with trio.fail_after(120):
            await ledger.wait_finished(12)
    assert ledger.started == list(range(1, 13))
    assert ledger.most == {GROUP: 1}


@fifo_cells
@pytest.mark.parametrize("every", [False, True], ids=["one_group", "every_group"])
@pytest.mark.parametrize("ahead", [False, True], ids=["behind", "ahead"])
async def test_the_head_in_work_holds_back_its_group(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch, ahead: bool, every: bool
) -> None:
    """While row 1 is in work on one claimer, the other claims nothing: neither the row behind
    it nor (``ahead``) a row that entered the group ahead of it, with a smaller priority; a
    subscription over every group (``every``) no more than one to the group."""
    ledger = Ledger()
    release = trio.Event()
    row = LEDGER[case.form]
    watch = ClaimWatch(monkeypatch)
    async with _two_claimers(case, ledger, release, workers=1, every=every) as broker:
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
@pytest.mark.parametrize("every", [False, True], ids=["one_group", "every_group"])
async def test_a_claim_takes_nothing_while_another_transaction_holds_the_guard(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch, every: bool
) -> None:
    row = LEDGER[case.form]
    broker = case.stand.broker(poll_interval=1.0)  # claims every virtual second
    ledger = Ledger()
    watch = ClaimWatch(monkeypatch)
    queue = InboxQueue(row, "ledger").every_group() if every else InboxQueue(row, GROUP)

    @subscriber(queue)
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


# -- one subscription over every group of the table ------------------------------------------


class Postings:
    """What the handlers of an every-group test saw: each group's rows in the order they
    started, the most rows of one group in work at once, and the most in work in all."""

    def __init__(self) -> None:
        self.by_group: dict[str, list[int]] = {}
        self.in_work: dict[str, int] = {}
        self.most = 0
        self.most_of_a_group = 0
        self.finished = 0
        self.changed = trio.Event()

    @contextmanager
    def working(self, group: str, n: int) -> Iterator[None]:
        self.by_group.setdefault(group, []).append(n)
        self.in_work[group] = self.in_work.get(group, 0) + 1
        self.most_of_a_group = max(self.most_of_a_group, self.in_work[group])
        self.most = max(self.most, sum(self.in_work.values()))
        try:
            yield
        finally:
            self.in_work[group] -= 1
            self.finished += 1
            self.changed.set()
            self.changed = trio.Event()

    async def wait_finished(self, count: int) -> None:
        while self.finished < count:
            await self.changed.wait()


@dataclass
class Posting:
    account: str
    n: int


async def _post(broker: SqlBroker[Any], row: type[Inbox[Any, Any]], groups: int, rows: int) -> None:
    """``rows`` postings into each of ``groups`` accounts, interleaved, in one transaction."""
    async with broker.transaction() as tx:
        for n in range(rows):
            for g in range(groups):
                await tx.publish(row, Posting(f"a{g}", n), account=f"a{g}")


def _every_group(row: type[Inbox[Any, Any]], postings: Postings, work: float = 0.05) -> Any:
    @subscriber(InboxQueue(row, "ledger").every_group().workers(4))
    async def post(posting: Posting) -> None:
        with postings.working(posting.account, posting.n):
            await trio.sleep(work)

    return post


@fifo_cells
async def test_every_group_keeps_each_group_in_order_side_by_side(
    case: Case, clock: VirtualClock
) -> None:
    """One subscription over every group, workers(4), eight accounts of six postings: each
    account's postings in order, one at a time, and up to four accounts side by side."""
    row = LEDGER[case.form]
    broker = case.stand.broker()
    postings = Postings()
    post = _every_group(row, postings)
    app = _app(broker, row, post)
    async with serving(app):
        await _post(broker, row, groups=8, rows=6)
        with trio.fail_after(120):
            await settled(app, post, 48)
    assert postings.by_group == {f"a{g}": list(range(6)) for g in range(8)}
    assert postings.most_of_a_group == 1
    assert postings.most == 4
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


@fifo_cells
async def test_every_group_serves_a_group_published_into_while_serving(
    case: Case, clock: VirtualClock
) -> None:
    """A group that did not exist when the app started is served as soon as a row is
    published into it: the publish wakes the subscription (the poll interval is an hour)."""
    row = LEDGER[case.form]
    broker = case.stand.broker(poll_interval=HOUR)
    postings = Postings()
    post = _every_group(row, postings, work=0)
    app = _app(broker, row, post)
    async with serving(app):
        await _post(broker, row, groups=1, rows=2)
        with trio.fail_after(60):
            await postings.wait_finished(2)
            await idle(app, post)
            published = trio.current_time()
            await broker.publish(row, Posting("new", 0), account="new")
            await broker.publish(row, Posting("new", 1), account="new")
            await settled(app, post, 4)
    assert trio.current_time() - published < HOUR
    assert postings.by_group == {"a0": [0, 1], "new": [0, 1]}


@fifo_cells
async def test_every_group_a_failing_head_holds_its_group_only(
    case: Case, clock: VirtualClock
) -> None:
    """Account a0's head fails once and waits out its backoff at the head: a0 waits, and the
    other accounts go on meanwhile."""
    row = LEDGER[case.form]
    broker = case.stand.broker()
    postings = Postings()
    started: list[tuple[str, int, float]] = []

    @subscriber(InboxQueue(row, "ledger").every_group().workers(4))
    async def post(posting: Posting) -> None:
        started.append((posting.account, posting.n, trio.current_time()))
        with postings.working(posting.account, posting.n):
            if (posting.account, posting.n) == ("a0", 0) and postings.by_group["a0"] == [0]:
                raise RuntimeError("the account is locked")

    app = _app(broker, row, post)
    async with serving(app):
        await _post(broker, row, groups=3, rows=3)
        with trio.fail_after(60):
            await settled(app, post, 10)
    assert postings.by_group == {"a0": [0, 0, 1, 2], "a1": [0, 1, 2], "a2": [0, 1, 2]}
    failed, retried = (t for g, n, t in started if (g, n) == ("a0", 0))
    assert retried - failed >= 0.5  # the backoff, waited out at a0's head
    # The other accounts finished meanwhile.
    assert max(t for g, _, t in started if g != "a0") < retried


@fifo_cells
async def test_every_group_passes_over_its_dead_letter_group(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poison head moves to the dead letter group, a group of the same table, which the
    subscription over every group does not serve; its account goes on."""
    row = LEDGER[case.form]
    broker = case.stand.broker()
    postings = Postings()

    @subscriber(InboxQueue(row, "ledger").every_group().workers(4).backoff(Backoff.none()))
    async def post(posting: Posting) -> None:
        with postings.working(posting.account, posting.n):
            if (posting.account, posting.n) == ("a0", 0):
                raise RuntimeError("poison")

    app = make_app()
    app.include(broker, post).max_attempts(2).dead_letter("ledger_dead")
    app.on_startup(lambda: broker.create_tables(row))
    watch = ClaimWatch(monkeypatch)
    async with serving(app):
        await _post(broker, row, groups=2, rows=2)
        with trio.fail_after(60):
            await settled(app, post, 5)
            # Three more claims, each finding the dead letter row and taking nothing.
            await watch.wait_done(watch.done + 3)
    assert postings.finished == 5
    assert not watch.failed
    assert postings.by_group == {"a0": [0, 0, 1], "a1": [0, 1]}
    assert case.stand.rows(f"SELECT account FROM {TABLE}") == [("ledger_dead",)]


@fifo_cells
async def test_every_group_two_brokers_never_run_two_rows_of_a_group(
    case: Case, clock: VirtualClock
) -> None:
    """Two apps on two brokers, each with one subscription over every group and workers(4):
    each account's postings in order, never two of one account in work at once."""
    row = LEDGER[case.form]
    postings = Postings()
    brokers = [case.stand.broker(), case.stand.broker()]
    apps = []
    for broker in brokers:
        post = _every_group(row, postings, work=0.01)
        apps.append(_app(broker, row, post))
    async with serving(apps[0]), serving(apps[1]):
        await _post(brokers[0], row, groups=6, rows=8)
        with trio.fail_after(120):
            await postings.wait_finished(48)
    assert postings.by_group == {f"a{g}": list(range(8)) for g in range(6)}
    assert postings.most_of_a_group == 1
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


@fifo_cells
async def test_every_group_two_processes_keep_each_group_in_order(case: Case) -> None:
    """Two OS processes, each with one subscription over every group and workers(4)
    (fifo_process.py ``every``): each of five accounts' postings in order, each after the one
    before it ended, whichever process took it; both processes took part."""
    row = LEDGER[case.form]
    dialect = "mysql" if case.name == "mariadb" else case.name
    case.stand.script(";\n".join(ddl(row, dialect)))
    groups, per_group = 5, 8
    # Entry n is posting n % 100 of account n // 100.
    insert_rows(
        case.stand,
        TABLE,
        [
            {
                "account": f"a{g}",
                "priority": 0,
                "retry_after": DUE,
                "attempt": 1,
                "payload": b'{"n": %d}' % (g * 100 + i),
            }
            for i in range(per_group)
            for g in range(groups)
        ],
    )
    results = await run_workers(
        case, groups * per_group, "tests.integration.matrix.fifo_process", "every"
    )
    by_group: dict[int, list[tuple[float, float, int]]] = {}
    for result in results:
        for n, start, end in result.intervals:
            by_group.setdefault(int(n) // 100, []).append((start, end, int(n) % 100))
    assert sorted(by_group) == list(range(groups))
    for g, spans in by_group.items():
        spans.sort()
        assert [i for _, _, i in spans] == list(range(per_group)), f"account a{g}"
        for (_, end, i), (start, _, _) in pairwise(spans):
            assert end <= start, f"posting {i} of a{g} was still in work when the next began"
    assert all(result.ids for result in results), "one process handled no row"
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


@fifo_cells
@pytest.mark.parametrize("every_first", [True, False], ids=["every_first", "group_first"])
async def test_every_group_beside_a_subscription_to_one_group_is_refused(
    case: Case, every_first: bool
) -> None:
    """One process serves a group once: a subscription over every group and one to a group
    of the same table overlap, whichever comes first."""
    row = LEDGER[case.form]
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "ledger").every_group())
    async def every(entry: Entry) -> None:
        pass

    @subscriber(InboxQueue(row, GROUP))
    async def one(entry: Entry) -> None:
        pass

    app = _app(broker, row, *((every, one) if every_first else (one, every)))
    second, queue = (one, f"group {GROUP!r} of ") if every_first else (every, "every group of ")
    expected = (
        f"{where(second)}: one queue has one subscription per process, and one over every "
        f"group serves each group, found a second subscription to {queue}{TABLE} "
        f"({row.__qualname__}); scale one subscription with .workers(n)"
    )
    with trio.fail_after(20), pytest.raises(AlreadySubscribed) as caught:
        await app.serve()
    assert str(caught.value) == expected


@fifo_cells
async def test_the_depth_of_every_group_adds_up_its_groups(case: Case) -> None:
    """``trinbox inspect``'s numbers for a subscription over every group: the rows of every
    group of the table but its dead letter group, whose rows are its dead letters."""
    row = LEDGER[case.form]
    dialect = "mysql" if case.name == "mariadb" else case.name
    case.stand.script(";\n".join(ddl(row, dialect)))
    later = datetime(2999, 1, 1, tzinfo=UTC)
    insert_rows(
        case.stand,
        TABLE,
        [
            {
                "account": account,
                "priority": 0,
                "retry_after": due,
                "attempt": 1,
                "payload": b"{}",
                "dead_from": origin,
            }
            for account, due, origin in [
                ("a0", DUE, None),
                ("a0", DUE, None),
                ("a1", DUE, None),
                ("a1", later, None),
                # A dead letter of a1's: every group's are this queue's.
                ("ledger_dead", DUE, "a1"),
                # Moved before the table had an origin: no queue's.
                ("ledger_dead", DUE, None),
            ]
        ],
    )

    @subscriber(InboxQueue(row, "ledger").every_group())
    async def post(entry: Entry) -> None:
        pass

    app = make_app()
    app.include(case.stand.broker(), post).max_attempts(3).dead_letter("ledger_dead")
    async with opened(app.brokers):
        (depth,) = await depths(queues_of(app))
    assert (depth.table, depth.group, depth.queue) == (TABLE, None, "ledger")
    assert (depth.due, depth.scheduled, depth.dead) == (3, 1, 1)
    assert depth.in_work == (0 if case.form == "lease" else None)
    assert depth.oldest_due_age_seconds is not None


@fifo_cells
async def test_every_group_on_the_database_clock(case: Case) -> None:
    """On the database clock (its host clock a quarter century wrong), the read of the
    groups whose head is due and each head's claim take the server's now."""
    row = LEDGER[case.form]
    broker = clock_broker(case.stand)
    postings = Postings()
    post = _every_group(row, postings, work=0)
    app = _app(broker, row, post)
    async with serving(app):
        await _post(broker, row, groups=3, rows=2)
        with trio.fail_after(30):
            await settled(app, post, 6)
    assert postings.by_group == {f"a{g}": [0, 1] for g in range(3)}


@cells(forms=("lease",), stands=("postgres",))
async def test_every_group_leaves_unstamped_the_head_of_a_group_held_elsewhere(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL's lease claim stamps as it selects: the head of a group whose guard another
    transaction holds is stamped by the claim all the same, and rolled back to the group's
    savepoint, while the head of another group in the same claim is taken and committed."""
    row = LEDGER[case.form]
    broker = case.stand.broker(poll_interval=1.0)
    postings = Postings()
    post = _every_group(row, postings, work=0)
    watch = ClaimWatch(monkeypatch)
    app = _app(broker, row, post)
    async with serving(app):
        # The test's connection holds the guard of GROUP; the other group is free.
        insert_rows(
            case.stand,
            TABLE,
            [
                {"account": account, "priority": 0, "retry_after": DUE, "attempt": 1}
                | {"payload": b'{"account": "%s", "n": 0}' % account.encode()}
                for account in (GROUP, "free")
            ],
        )
        with trio.fail_after(60):
            with _guard_held(case.stand):
                await postings.wait_finished(1)
                seen = watch.done
                await watch.wait_done(seen + 2)
                # Its head is neither handled nor left stamped by the claims that passed it.
                assert postings.by_group == {"free": [0]}
                assert case.stand.rows(f"SELECT locked_until FROM {TABLE}") == [(None,)]
            await postings.wait_finished(2)
    assert postings.by_group == {"free": [0], GROUP: [0]}
    assert not watch.failed


@fifo_cells
async def test_every_group_redrives_each_row_to_its_own_group(case: Case) -> None:
    """Over every group, the dead letter group's rows are the queue's whatever group they
    came from: a redrive returns each to its own (its OriginGroup), or all into the group
    it is told; a row with no origin recorded is no queue's and stays."""
    row = LEDGER[case.form]
    dialect = "mysql" if case.name == "mariadb" else case.name
    case.stand.script(";\n".join(ddl(row, dialect)))
    insert_rows(
        case.stand,
        TABLE,
        [
            {"account": "ledger_dead", "priority": 0, "retry_after": DUE, "attempt": 3}
            | {"payload": b"{}", "dead_from": origin}
            for origin in ("a0", "a1", None, "a1")
        ],
    )

    @subscriber(InboxQueue(row, "ledger").every_group())
    async def post(entry: Entry) -> None:
        pass

    app = make_app()
    app.include(case.stand.broker(), post).max_attempts(3).dead_letter("ledger_dead")
    async with opened(app.brokers):
        (queue,) = queues_of(app)
        first = await redrive(queue, [1, 2, 3])
        rest = await redrive(queue, None, to_group="a9")
    assert (list(first.moved), first.group) == ([1, 2], None)
    # Asked for and left: a dead letter of no queue (no origin recorded).
    assert (list(first.elsewhere), list(first.missing)) == ([(3, None)], [])
    assert (list(rest.moved), rest.group) == ([4], "a9")
    found = case.stand.rows(f"SELECT id, account, dead_from, attempt FROM {TABLE} ORDER BY id")
    assert [tuple(r) for r in found] == [
        (1, "a0", None, 1),
        (2, "a1", None, 1),
        (3, "ledger_dead", None, 3),
        (4, "a9", None, 1),
    ]
