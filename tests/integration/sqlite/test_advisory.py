"""The advisory form on SQLite (docs/reference.md#advisory-form,
docs/reference.md#scenarios-advisory): what only SQLite asks. The process keeps the keys in work per
database file (whatever path names it), and its candidate select passes over them: several keys are
in work at once, never two rows of one key, and a settlement wakes the claim loop. Every advisory
scenario of every stand runs in tests/integration/matrix/test_advisory.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

import trinbox
from trinbox import InboxQueue, SqlBroker, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._drivers._base import Pool, ThreadSession
from trinbox._drivers.sqlite import SqliteConnection
from trinbox._forms.advisory import AdvisoryForm
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, ClaimForm, FormContext
from trinbox._holders.sqlite_key import KeyRegistry, hold, let_go
from trinbox.errors import StartupError
from trinbox.testing import TrioClock, VirtualClock, settled

from ..matrix.test_advisory import pass_over_each_others_key
from ..serving import make_app, serving
from ..stands import SqliteStand
from .harness import Db
from .tables import EMAIL_JOBS, LockedEmail


@dataclass
class Email:
    to: str


def real_path(path: Path) -> str:
    return os.path.realpath(path)


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


async def test_several_keys_in_work_at_once(db: Db, clock: VirtualClock) -> None:
    # Each handler waits until the handlers of the other two keys have started: with one
    # delivery in work at a time they never would, and the test times out.
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=30)
    started = {customer: trio.Event() for customer in ("c1", "c2", "c3")}

    @subscriber(InboxQueue(LockedEmail, "emails").workers(3))
    async def send(email: Email) -> None:
        started[email.to].set()
        for event in started.values():
            await event.wait()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for customer in started:
            await broker.publish(LockedEmail, Email(customer), name="emails", customer=customer)
        with trio.fail_after(5):
            await settled(app, send, 3)
    assert keys_in_work(db) == set()


async def test_never_two_rows_of_one_key_in_work(db: Db, clock: VirtualClock) -> None:
    # Four workers, two keys of five rows each: the two keys are in work side by side, each
    # key's rows one at a time and in publish order.
    work = Work()
    per_key: dict[str, int] = {"c1": 0, "c2": 0}
    most_per_key: dict[str, int] = {"c1": 0, "c2": 0}
    order: dict[str, list[int]] = {"c1": [], "c2": []}
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=30)

    @subscriber(InboxQueue(LockedEmail, "emails").workers(4))
    async def send(email: Email) -> None:
        customer, n = email.to.split("/")
        per_key[customer] += 1
        most_per_key[customer] = max(most_per_key[customer], per_key[customer])
        order[customer].append(int(n))
        try:
            await work.run(email, 0.1)
        finally:
            per_key[customer] -= 1

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for n in range(5):
            for customer in ("c1", "c2"):
                await broker.publish(
                    LockedEmail, Email(f"{customer}/{n}"), name="emails", customer=customer
                )
        with trio.fail_after(10):
            await settled(app, send, 10)
    assert most_per_key == {"c1": 1, "c2": 1}
    assert work.most == 2
    assert order == {"c1": [0, 1, 2, 3, 4], "c2": [0, 1, 2, 3, 4]}
    assert keys_in_work(db) == set()


async def test_a_settlement_claims_the_next_row_of_its_key_at_once(
    db: Db, clock: VirtualClock
) -> None:
    # One key, three rows, a poll interval of a minute: each next row is claimed when the
    # row before it settles (its settlement wakes the claim loop), not a poll later.
    db.script(EMAIL_JOBS)
    broker = db.broker(poll_interval=60)
    work = Work()

    @subscriber(InboxQueue(LockedEmail, "emails").workers(2))
    async def send(email: Email) -> None:
        await work.run(email, 0.5)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        for n in range(3):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 3)
    assert work.order == ["0@x", "1@x", "2@x"]
    assert work.most == 1
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


# -- one process per file ----------------------------------------------------------------------

# Another process serving the file's advisory keys, as an advisory subscription's startup does.
HOLDER = """
import sys
from trinbox._holders.sqlite_key import hold
hold(sys.argv[1])
print("serving", flush=True)
sys.stdin.read()
"""


async def test_a_second_process_serving_the_file_is_refused_until_the_first_ends(
    db: Db,
) -> None:
    # Real time: the wait for the other process is no database call a virtual clock sees.
    db.script(EMAIL_JOBS)
    env = {**os.environ, "PYTHONPATH": str(Path(trinbox.__file__).parents[1])}
    holder = await trio.lowlevel.open_process(
        [sys.executable, "-c", HOLDER, str(db.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        with trio.fail_after(30):
            said = b""
            while not said.endswith(b"\n"):
                said += await holder.stdout.receive_some()
        assert said == b"serving\n"
        broker = db.broker(poll_interval=30)
        seen: list[str] = []

        @subscriber(InboxQueue(LockedEmail, "emails"))
        async def send(email: Email) -> None:
            seen.append(email.to)

        app = make_app()
        app.include(broker, send)
        real = real_path(db.path)
        expected = (
            f"one process serves the advisory keys of a SQLite file (the keys in work live in "
            f"its memory), found process {holder.pid} serving {real} (it holds "
            f"{real}-trinbox-advisory); stop that process, or serve this queue from it"
        )
        with trio.fail_after(10), pytest.raises(StartupError) as refused:
            await app.serve()
        assert str(refused.value).endswith(": " + expected)
    finally:
        await holder.stdin.aclose()  # the holder ends
        with trio.fail_after(30):
            await holder.wait()
        await holder.stdout.aclose()
    # The holder ended: the kernel freed its lock, and this process serves the file.
    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(LockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(5):
            await settled(app, send, 1)
    assert seen == ["a@x"]


# A process serving the file's keys, with one in work, forks (issue 17, item 9). The child
# reports whether it may serve the keys too (refused: its parent does); the parent lets go while
# the child lives on; once the test process has served and let go, the child tries again and
# reports the keys in work it starts with.
FORKER = """
import os, sys
from trinbox._drivers.sqlite import SqlitePool
from trinbox.errors import StartupError
from trinbox._holders.sqlite_key import KeyRegistry, hold, let_go

def serve(path):
    try:
        hold(path)
    except StartupError:
        return None
    return SqlitePool(path)

path = sys.argv[1]
parent = serve(path)
KeyRegistry.keys(parent.identity).add("emails-c1")  # a delivery in work as the process forks
said, say = os.pipe()
go, went = os.pipe()
if os.fork() == 0:
    try:
        os.write(say, b"refused" if serve(path) is None else b"serving")
        os.read(go, 1)
        child = serve(path)
        held = sorted(KeyRegistry.keys(parent.identity))
        os.write(say, f"{'refused' if child is None else 'serving'} {held}".encode())
        os.read(go, 1)
    finally:
        os._exit(0)
print("child", os.read(said, 100).decode(), flush=True)
let_go(path)
print("parent let go", flush=True)
sys.stdin.readline()
os.write(went, b"x")
print("child", os.read(said, 100).decode(), flush=True)
sys.stdin.readline()
os.write(went, b"x")
os.wait()
"""


async def test_a_forked_child_neither_shares_its_parents_key_lock_nor_its_keys_in_work(
    db: Db,
) -> None:
    # Real time: the waits for the other processes are no database calls.
    db.script(EMAIL_JOBS)
    env = {**os.environ, "PYTHONPATH": str(Path(trinbox.__file__).parents[1])}
    forker = await trio.lowlevel.open_process(
        [sys.executable, "-c", FORKER, str(db.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert forker.stdout is not None and forker.stdin is not None
    stdout = forker.stdout
    heard = b""

    async def said() -> str:
        nonlocal heard
        with trio.fail_after(30):
            while b"\n" not in heard:
                chunk = await stdout.receive_some()
                assert chunk, f"the forker ended, after {heard!r}"
                heard += chunk
        line, _, heard = heard.partition(b"\n")
        return line.decode()

    try:
        # The parent serves the file: its forked child is refused, as any other process.
        assert await said() == "child refused"
        assert await said() == "parent let go"
        # With the parent's lock gone, nothing holds the file: this process serves it.
        hold(str(db.path))
        let_go(str(db.path))
        await forker.stdin.send_all(b"\n")
        # The child starts with no keys in work: its parent's delivery is not its own.
        assert await said() == "child serving []"
        await forker.stdin.send_all(b"\n")
        with trio.fail_after(30):
            assert await forker.wait() == 0
    finally:
        await forker.stdin.aclose()
        await stdout.aclose()
        if forker.returncode is None:
            forker.kill()
            await forker.wait()


# -- one call on the worker thread -------------------------------------------------------------


async def test_a_settlement_and_its_workers_next_claim_are_one_call(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The settlement frees its key inside the call, so the claim after it takes that key's
    # next row; one worker-thread call in all, and the registry holds the key again for it.
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    calls: list[object] = []
    original = SqliteConnection._call

    async def counted(self: SqliteConnection, fn: Callable[[], Any], sql: Any, *rest: Any) -> Any:
        calls.append(sql)
        return await original(self, fn, sql, *rest)

    try:
        for n, customer in enumerate(("c1", "c1", "c2")):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        spec = spec_of(LockedEmail)
        ctx = FormContext(
            spec=spec,
            dialect=broker.dialect,
            statements=build_plan(broker.dialect, spec),
            pool=broker.pool,
            clock=broker.clock,
            group="emails",
        )
        form = make_form(ctx)
        assert form.traits.chains
        (first,) = await form.claim(1)
        assert (first.id, keys_in_work(db)) == (1, {"email_jobs-c1"})
        monkeypatch.setattr(SqliteConnection, "_call", counted)
        chained = await form.settle_and_claim(first, Ack(), 1)
        monkeypatch.undo()
        assert chained.error is None and chained.claim_error is None
        assert chained.claimed is not None
        assert [(d.id, d.key) for d in chained.claimed] == [(2, "email_jobs-c1")]
        assert len(calls) == 1
        assert keys_in_work(db) == {"email_jobs-c1"}
        assert db.rows("SELECT job_id FROM email_jobs ORDER BY job_id") == [(2,), (3,)]
        (second,) = chained.claimed
        await form.settle(second, Ack())
        assert keys_in_work(db) == set()
    finally:
        await broker.aclose()


def advisory_form(broker: SqlBroker[Any]) -> ClaimForm:
    spec = spec_of(LockedEmail)
    ctx = FormContext(
        spec=spec,
        dialect=broker.dialect,
        statements=build_plan(broker.dialect, spec),
        pool=broker.pool,
        clock=broker.clock,
        group="emails",
    )
    return make_form(ctx)


async def test_a_batch_settlement_and_its_workers_next_batch_are_one_call(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch's keys are freed inside the call, so its next claim takes their next rows.
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    calls: list[object] = []
    original = SqliteConnection._call

    async def counted(self: SqliteConnection, fn: Callable[[], Any], sql: Any, *rest: Any) -> Any:
        calls.append(sql)
        return await original(self, fn, sql, *rest)

    try:
        for n, customer in enumerate(("c1", "c2", "c1", "c2", "c3")):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        form = advisory_form(broker)
        assert form.traits.chains_batches
        batch = await form.claim(2)
        assert [d.id for d in batch] == [1, 2]
        monkeypatch.setattr(SqliteConnection, "_call", counted)
        errors, chained = await form.settle_batch_and_claim([(d, Ack()) for d in batch], 3)
        monkeypatch.undo()
        assert errors == [None, None] and chained.error is None and chained.claim_error is None
        assert chained.claimed is not None
        assert [(d.id, d.key) for d in chained.claimed] == [
            (3, "email_jobs-c1"),
            (4, "email_jobs-c2"),
            (5, "email_jobs-c3"),
        ]
        assert len(calls) == 1
        assert all(d.settled for d in batch) and form.in_work == 3
        assert keys_in_work(db) == {"email_jobs-c1", "email_jobs-c2", "email_jobs-c3"}
        assert db.rows("SELECT job_id FROM email_jobs ORDER BY job_id") == [(3,), (4,), (5,)]
        assert await form.settle_batch([(d, Ack()) for d in chained.claimed]) == [None] * 3
        assert keys_in_work(db) == set() and form.in_work == 0
    finally:
        await broker.aclose()


async def test_a_chained_batch_whose_transaction_fails_holds_its_keys_and_settles_row_by_row(
    db: Db,
) -> None:
    # The commit fails (a deferred foreign key): nothing of the batch took effect, so its keys
    # were never free to another claim; each row then settles alone, one failing, one standing.
    db.script(EMAIL_JOBS)
    db.script(
        "CREATE TABLE audit (job_id INTEGER REFERENCES email_jobs (job_id) "
        "DEFERRABLE INITIALLY DEFERRED);"
        "CREATE TRIGGER audit_ack AFTER DELETE ON email_jobs WHEN old.job_id = 2 "
        "BEGIN INSERT INTO audit VALUES (old.job_id); END;"
    )
    broker = db.broker()
    await broker.open()
    held: list[set[str]] = []
    original = AdvisoryForm.settle

    async def settle_alone(self: AdvisoryForm, delivery: Any, step: Any) -> None:
        held.append(keys_in_work(db))
        await original(self, delivery, step)

    try:
        for n, customer in enumerate(("c1", "c2", "c1")):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        form = advisory_form(broker)
        batch = await form.claim(2)
        assert [d.id for d in batch] == [1, 2]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(AdvisoryForm, "settle", settle_alone)
            errors, chained = await form.settle_batch_and_claim([(d, Ack()) for d in batch], 2)
        assert chained.claimed is None and chained.claim_error is None
        assert errors[0] is None and errors[1] is not None
        # When the first row settled alone, both keys were still held: no claim could take
        # row 3 (key c1) while row 1 was in work.
        assert held[0] == {"email_jobs-c1", "email_jobs-c2"}
        assert keys_in_work(db) == set() and form.in_work == 0
        assert db.rows("SELECT job_id FROM email_jobs ORDER BY job_id") == [(2,), (3,)]
    finally:
        await broker.aclose()


# -- a claim cut midway ------------------------------------------------------------------------


class CutSession:
    """A connection's blocking session whose ``at``-th take (an UPDATE) waits, between
    statements, until its call is cut, and then runs; ``reached`` is set, on Trio's side, as
    it begins to wait."""

    def __init__(
        self, inner: ThreadSession, at: int, reached: trio.Event, token: trio.lowlevel.TrioToken
    ) -> None:
        self.inner = inner
        self.at = at
        self.reached = reached
        self.token = token
        self.takes = 0

    @property
    def in_transaction(self) -> bool:
        return self.inner.in_transaction

    def _gate(self, sql: str) -> None:
        if sql.startswith("UPDATE"):
            self.takes += 1
            if self.takes == self.at:
                self.token.run_sync_soon(self.reached.set)
                raw = self.inner._raw  # type: ignore[attr-defined]  # the driver's session
                deadline = time.monotonic() + 10
                while not raw.cut and time.monotonic() < deadline:
                    time.sleep(0.001)  # on the connection's thread: no Trio event to wait on

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        self._gate(sql)
        return self.inner.execute(sql, params)

    def fetch(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        self._gate(sql)
        return self.inner.fetch(sql, params)

    def commit(self) -> None:
        self.inner.commit()

    def rollback(self) -> None:
        self.inner.rollback()


async def test_a_claim_cut_midway_on_its_thread_leaves_no_key_and_counts_nothing(
    db: Db, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The first row is taken and its key registered; the second take waits when the cancel
    # cuts the call, between statements, where SQLite's interrupt does not reach: the take
    # is refused. The claim is one transaction: it rolls back whole, and no key stays.
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    try:
        for n, customer in enumerate(("c1", "c2")):
            await broker.publish(LockedEmail, Email(f"{n}@x"), name="emails", customer=customer)
        form = advisory_form(broker)
        reached = trio.Event()
        original = SqliteConnection.run_on_thread

        async def cut(self: SqliteConnection, fn: Callable[[Any], Any], statement: str) -> Any:
            token = trio.lowlevel.current_trio_token()
            return await original(self, lambda s: fn(CutSession(s, 2, reached, token)), statement)

        monkeypatch.setattr(SqliteConnection, "run_on_thread", cut)
        claimed: list[object] = []
        async with trio.open_nursery() as nursery:

            async def claim() -> None:
                claimed.append(await form.claim(2))

            nursery.start_soon(claim)
            with trio.fail_after(10):
                await reached.wait()
            # Midway: the first row is taken, the second key registered, its take waiting.
            assert keys_in_work(db) == {"email_jobs-c1", "email_jobs-c2"}
            nursery.cancel_scope.cancel()
        monkeypatch.undo()
        assert claimed == []
        assert "did not let go in time" not in caplog.text
        assert keys_in_work(db) == set()
        assert form.in_work == 0
        assert db.rows("SELECT attempt FROM email_jobs ORDER BY job_id") == [(1,), (1,)]
        again = advisory_form(broker)
        taken = await again.claim(2)
        assert [(d.id, d.attempt, d.key) for d in taken] == [
            (1, 1, "email_jobs-c1"),
            (2, 1, "email_jobs-c2"),
        ]
        for delivery in taken:
            await again.settle(delivery, Ack())
        assert keys_in_work(db) == set()
        assert db.rows("SELECT * FROM email_jobs") == []
    finally:
        await broker.aclose()


async def test_process_keys_need_a_pool_with_threads(db: Db) -> None:
    db.script(EMAIL_JOBS)
    broker = db.broker()
    await broker.open()
    try:
        spec = spec_of(LockedEmail)
        ctx = FormContext(
            spec=spec,
            dialect=broker.dialect,
            statements=build_plan(broker.dialect, spec),
            pool=PoolWithoutThreads(broker.pool),
            clock=broker.clock,
            group="emails",
        )
        rule = (
            r"^email_jobs \(LockedEmail\): SQLite's advisory keys are claimed by one call on a "
            r"connection's thread, found a pool without threads \(PoolWithoutThreads\); give "
            r"the subscription the SQLite driver's pool$"
        )
        with pytest.raises(TypeError, match=rule):
            make_form(ctx)
    finally:
        await broker.aclose()


class PoolWithoutThreads:
    """The broker's pool, as a pool whose connections run no function on their thread."""

    def __init__(self, inner: Pool) -> None:
        self.inner = inner
        self.max_size = inner.max_size
        self.spare = inner.spare
        self.identity = inner.identity
        self.acquire = inner.acquire
        self.try_acquire = inner.try_acquire
        self.give_back = inner.give_back
        self.close = inner.close
        self.abandon = inner.abandon
        self.aclose = inner.aclose
