"""Limits per key and for the whole queue (``InboxQueue.limit``) in the advisory form: a row in
work holds, beside the session lock of its advisory key, one slot of its limit key (and one of
the queue's) as session locks of the same session (trinbox._dialects._advisory_slots), taken
without waiting in the key's round trip and let go with the key at the settlement.

On PostgreSQL and MariaDB. A key at its limit is skipped while other keys' rows fill the same
claim; the slots end with the key's unlock, or with the session (closed, killed). SQLite's
advisory form keeps its keys in the one process serving the file, and each key's slot with it
(trinbox._holders.sqlite_key.SlotRule): the same claims hold there."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

import pytest
import trio

from trinbox import Advisory, Attempt, Group, Id, Inbox, InboxQueue, Payload, keys, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._declare._limits import ClaimLimits
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.advisory import AdvisoryForm
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, Delivery, FormContext, Retry
from trinbox._holders.session_lock import SessionLocks
from trinbox._holders.sqlite_key import KeyRegistry
from trinbox.testing import idle

from ..serving import make_app, serving
from ..stands import MariaStand, PostgresStand, SqliteStand, Stand
from .conftest import Case
from .test_limits_row_lock import limits_of

ON_SERVERS = pytest.mark.parametrize(
    "case",
    [("postgres", "advisory"), ("mariadb", "advisory")],
    ids=["postgres-advisory", "mariadb-advisory"],
    indirect=True,
)
# SQLite's process keeps the slots with its keys in work (one process serves a file).
EVERY_STAND = pytest.mark.parametrize(
    "case",
    [("postgres", "advisory"), ("mariadb", "advisory"), ("sqlite", "advisory")],
    ids=["postgres-advisory", "mariadb-advisory", "sqlite-advisory"],
    indirect=True,
)

# A key of any text: the slots' names are hashed, so length and characters do not matter.
HOSTILE = ["it's", 'say "hi"', "back\\slash", "%s %%", "x" * 300, "ключ 鍵 🔑", "", "NULL"]
ONE_EACH: Counter[str | None] = Counter([*HOSTILE, None])

SLOT_JOBS = {
    "sqlite": """
        CREATE TABLE slot_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            tenant TEXT,
            attempt INTEGER NOT NULL DEFAULT 1,
            payload BLOB
        )
    """,
    "postgres": """
        CREATE TABLE slot_jobs (
            id BIGSERIAL PRIMARY KEY,
            name TEXT NOT NULL,
            tenant TEXT,
            attempt INT NOT NULL DEFAULT 1,
            payload BYTEA
        )
    """,
    "mariadb": """
        CREATE TABLE slot_jobs (
            id BIGINT AUTO_INCREMENT PRIMARY KEY,
            name VARCHAR(191) NOT NULL,
            tenant TEXT,
            attempt INT NOT NULL DEFAULT 1,
            payload LONGBLOB
        ) ENGINE=InnoDB
    """,
}


class Slotted(Inbox[Advisory], table="slot_jobs", advisory_lock="slot_jobs:{id}"):
    """Each row its own advisory key; the limit's key is the tenant."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    tenant: str | None
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


def per_key(limit: int) -> ClaimLimits:
    return limits_of(InboxQueue(Slotted, "jobs").limit(key="tenant", concurrency=limit))


def whole(limit: int) -> ClaimLimits:
    return limits_of(InboxQueue(Slotted, "jobs").limit(concurrency=limit))


def jobs(stand: Stand, tenants: Sequence[str | None], group: str = "jobs") -> None:
    """Rows of ``tenants`` in claim order (id), in one statement: nothing is woken."""
    marks = ", ".join("(?, ?, ?)" for _ in tenants)
    values = [v for t in tenants for v in (group, t, json.dumps({"tenant": t}).encode())]
    stand.execute(f"INSERT INTO slot_jobs (name, tenant, payload) VALUES {marks}", *values)


@asynccontextmanager
async def limited_form(case: Case, limits: ClaimLimits) -> AsyncIterator[AdvisoryForm]:
    """The advisory form of a subscription to group "jobs" under ``limits``, as
    ``Subscription.open`` builds it."""
    case.stand.script(SLOT_JOBS[case.stand.name])
    async with asyncio_loop(case.name != "sqlite"):
        broker = case.stand.broker(pool_size=20)
        await broker.open()
        try:
            spec = spec_of(Slotted)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=build_plan(broker.dialect, spec, limits=limits),
                pool=broker.pool,
                clock=broker.clock,
                group="jobs",
                limited=True,
                limits=limits,
            )
            form = make_form(ctx)
            assert isinstance(form, AdvisoryForm)
            yield form
        finally:
            await broker.aclose()


def tenants_of(taken: Sequence[Delivery]) -> Counter[Any]:
    return Counter(d.values["tenant"] for d in taken)


async def claim_each(form: AdvisoryForm, count: int) -> list[Delivery]:
    """``count`` claims of one row each."""
    found: list[Delivery] = []
    for _ in range(count):
        found += await form.claim(1)
    return found


# -- what the server shows -------------------------------------------------------------------


# MariaDB: a row's slot key, the weight of its tenant in the column's collation, read from
# the row itself (so a test holds no copy of the collation's rules); the queue's is '*'.
_MY_KEY = (
    "(SELECT COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM(tenant)))), 'NULL') FROM slot_jobs "
    "WHERE tenant <=> ? LIMIT 1)"
)


def slot_key(stand: Stand, tenant: str) -> str:
    """The slot key the candidates give a row of ``tenant``: its text quoted (PostgreSQL),
    the weight of its text in hex after a ``w`` (MariaDB; ``*`` for the queue)."""
    if isinstance(stand, PostgresStand):
        return "'" + tenant.replace("'", "''") + "'"
    return "*" if tenant == "*" else str(stand.value(f"SELECT {_MY_KEY}", tenant))


def slot_names(stand: Stand, tenant: str | None, count: int) -> list[str]:
    """MariaDB's lock names of ``tenant``'s ``count`` slots, as docs/reference.md gives them."""
    key = "'*'" if tenant == "*" else _MY_KEY
    params: tuple[object, ...] = () if tenant == "*" else (tenant,)
    return [
        str(
            stand.value(
                "SELECT CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', LOWER(DATABASE()), "
                f"'slot_jobs', QUOTE('jobs'), {key}, CAST(? AS CHAR))))",
                *params,
                i,
            )
        )
        for i in range(count)
    ]


async def own_locks(stand: Stand, conn: Any, names: Sequence[str]) -> int:
    """How many advisory locks the session ``conn`` holds (MariaDB: of ``names``)."""
    if isinstance(stand, PostgresStand):
        rows = await conn.fetch(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        return int(rows[0][0])
    found = 0
    for name in names:
        rows = await conn.fetch("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", (name,))
        found += bool(rows[0][0])
    return found


def held_slots(stand: Stand, tenant: str | None, count: int) -> int:
    """How many of ``tenant``'s ``count`` slots (or the queue's, ``tenant="*"``) a session
    holds, by names written here as docs/reference.md gives them (SQLite: the rows in work
    that the process keeps with each slot key)."""
    if isinstance(stand, SqliteStand):
        database = "sqlite:" + os.path.realpath(stand.path)
        keys, slots = KeyRegistry.keys(database), KeyRegistry.slots(database)
        in_work = [slots[k][1] for k in keys if k in slots and slots[k][0] == ("slot_jobs", "jobs")]
        if tenant == "*":
            return len(in_work)
        quoted = "NULL" if tenant is None else "'" + tenant.replace("'", "''") + "'"
        return in_work.count(quoted)
    if isinstance(stand, PostgresStand):
        key = "'*'" if tenant == "*" else "quote_nullable(CAST(? AS text))"
        params: tuple[object, ...] = () if tenant == "*" else (tenant,)
        return int(
            stand.value(
                "SELECT COUNT(*) FROM generate_series(0, ?) AS g(i) WHERE hashtextextended("
                f"concat('trinbox_slot:slot_jobs:', quote_nullable('jobs'), ':', {key}, ':', i), "
                "0) IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks AS l "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database()))",
                count - 1,
                *params,
            )
        )
    assert isinstance(stand, MariaStand)
    return sum(
        stand.value("SELECT IS_USED_LOCK(?)", name) is not None
        for name in slot_names(stand, tenant, count)
    )


def advisory_locks(stand: Stand) -> int:
    """Every advisory lock (PostgreSQL) of the stand's database: keys and slots."""
    assert isinstance(stand, PostgresStand)
    return int(
        stand.value(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database "
            "= (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    )


# -- claims ----------------------------------------------------------------------------------


@EVERY_STAND
async def test_a_key_at_its_limit_is_skipped_and_the_others_fill_the_claim(case: Case) -> None:
    async with limited_form(case, per_key(3)) as form:
        jobs(case.stand, ["a"] * 5 + ["b"] * 2 + ["c"])
        first = await form.claim(4)
        # a's fourth row waits for a free slot; b's first row is claimed beside a's three.
        assert tenants_of(first) == {"a": 3, "b": 1}
        assert held_slots(case.stand, "a", 3) == 3
        second = await form.claim(10)
        assert tenants_of(second) == {"b": 1, "c": 1}
        assert list(await form.claim(10)) == []
        for delivery in first:
            await form.settle(delivery, Ack())
        assert held_slots(case.stand, "a", 3) == 0
        assert tenants_of(await form.claim(10)) == {"a": 2}
        assert list(await form.claim(10)) == []


@EVERY_STAND
async def test_a_claim_holds_one_slot_per_row_and_takes_no_other(case: Case) -> None:
    async with limited_form(case, per_key(3)) as form:
        jobs(case.stand, ["a", "b"])
        taken = await form.claim(10)
        assert tenants_of(taken) == {"a": 1, "b": 1}
        # The slot series stops at the first it gets: one slot of each key, not three.
        assert held_slots(case.stand, "a", 3) == 1
        assert held_slots(case.stand, "b", 3) == 1
        if isinstance(case.stand, PostgresStand):
            assert advisory_locks(case.stand) == 4  # two keys, two slots


@ON_SERVERS
@pytest.mark.parametrize("full", ["key", "queue"])
async def test_a_slot_lock_that_finds_no_free_slot_lets_go_of_all_it_took(
    case: Case, full: str
) -> None:
    # The candidates pass over a full key, so a claim meets one only when another claim took
    # its last slot in between: here the lock is run by hand on a row of a full key (or a
    # key with a free slot in a full queue).
    both = limits_of(
        InboxQueue(Slotted, "jobs").limit(key="tenant", concurrency=1).limit(concurrency=2)
    )
    async with limited_form(case, both) as form:
        jobs(case.stand, ["a", "b", "a", "c"])
        taken = await form.claim(10)
        assert tenants_of(taken) == {"a": 1, "b": 1}
        row_id, tenant = (3, "a") if full == "key" else (4, "c")
        key = f"slot_jobs:{row_id}"
        if isinstance(case.stand, MariaStand):
            database = urlsplit(case.stand.url).path.lstrip("/").lower()
            key = f"{database}.{key}"
        hold = form._hold
        assert isinstance(hold, SessionLocks)
        session = await form.ctx.pool.acquire("test")
        try:
            got = await hold.lock_and_take(
                session, key, slot_key(case.stand, tenant), "jobs", form.take_ops(row_id, None)
            )
            assert got is None
            names = [key]
            if isinstance(case.stand, MariaStand):
                names += [*slot_names(case.stand, "a", 1), *slot_names(case.stand, "c", 1)]
                names += slot_names(case.stand, "*", 2)
            assert await own_locks(case.stand, session, names) == 0
        finally:
            await form.ctx.pool.give_back(session)
        assert held_slots(case.stand, "c", 1) == 0
        assert held_slots(case.stand, "*", 2) == 2


@EVERY_STAND
async def test_one_row_claims_each_take_a_slot_and_an_ack_frees_one(case: Case) -> None:
    async with limited_form(case, per_key(3)) as form:
        jobs(case.stand, ["a"] * 5)
        taken = await claim_each(form, 5)
        assert len(taken) == 3
        await form.settle(taken[0], Ack())
        # One slot free: one row more, not two.
        assert len(await claim_each(form, 3)) == 1
        assert held_slots(case.stand, "a", 3) == 3


@EVERY_STAND
async def test_a_retry_and_a_drop_let_their_slots_go(case: Case) -> None:
    async with limited_form(case, per_key(1)) as form:
        jobs(case.stand, ["a", "a"])
        (first,) = await form.claim(10)
        assert list(await form.claim(10)) == []
        await form.settle(first, Retry())  # a failure's return, or a retry's
        assert held_slots(case.stand, "a", 1) == 0
        (again,) = await form.claim(10)
        await form.release(again)  # dropped unsettled: its session is closed
        with trio.fail_after(10):
            # No event tells when the server has ended the closed session: poll it.
            while not (third := await form.claim(10)):  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert tenants_of(third) == {"a": 1}


@EVERY_STAND
async def test_a_settle_and_claim_lets_the_slot_go_and_takes_the_key_s_next_row(
    case: Case,
) -> None:
    async with limited_form(case, per_key(1)) as form:
        jobs(case.stand, ["a", "a", "b"])
        first = await form.claim(10)
        assert tenants_of(first) == {"a": 1, "b": 1}
        delivery = next(d for d in first if d.values["tenant"] == "a")
        chained = await form.settle_and_claim(delivery, Ack(), 1)
        assert chained.error is None and chained.claimed is not None
        assert tenants_of(chained.claimed) == {"a": 1}
        assert held_slots(case.stand, "a", 1) == 1


@ON_SERVERS
async def test_a_killed_session_frees_its_key_and_slots(case: Case) -> None:
    async with limited_form(case, per_key(2)) as form:
        jobs(case.stand, ["a"] * 3)
        taken = await form.claim(10)
        assert len(taken) == 2
        if isinstance(case.stand, PostgresStand):
            pid = int((await conn_of(taken[0]).fetch("SELECT pg_backend_pid()"))[0][0])
            case.stand.execute("SELECT pg_terminate_backend(?)", pid)
        else:
            pid = int((await conn_of(taken[0]).fetch("SELECT CONNECTION_ID()"))[0][0])
            case.stand.execute(f"KILL CONNECTION {pid}")
        with trio.fail_after(10):
            while not (again := await form.claim(10)):  # noqa: ASYNC110
                await trio.sleep(0.01)
        # The killed session's row and slot came back: one row of a again, not two.
        assert len(again) == 1
        assert held_slots(case.stand, "a", 2) == 2
        form.abandon(taken[0])


def conn_of(delivery: Delivery) -> Any:
    assert delivery.conn is not None
    return delivery.conn


@EVERY_STAND
async def test_an_abandoned_session_frees_its_slots(case: Case) -> None:
    async with limited_form(case, per_key(1)) as form:
        jobs(case.stand, ["a", "a"])
        (taken,) = await form.claim(10)
        form.abandon(taken)
        with trio.fail_after(10):
            while not (again := await form.claim(10)):  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert tenants_of(again) == {"a": 1}


@EVERY_STAND
async def test_a_null_key_is_one_key_of_its_own(case: Case) -> None:
    async with limited_form(case, per_key(2)) as form:
        jobs(case.stand, [None, None, None, "a", "NULL"])
        assert tenants_of(await form.claim(10)) == {None: 2, "a": 1, "NULL": 1}
        assert list(await form.claim(10)) == []


@pytest.mark.parametrize("case", [("mariadb", "advisory")], ids=["mariadb-advisory"], indirect=True)
async def test_keys_the_column_compares_equal_share_their_slots(case: Case) -> None:
    # A case-insensitive collation (PAD SPACE) makes these one tenant, as the column compares
    # them: one key of the limit, as the lease form's ranking would count them.
    async with limited_form(case, per_key(1)) as form:
        case.stand.execute(
            "ALTER TABLE slot_jobs MODIFY tenant VARCHAR(191) COLLATE utf8mb4_general_ci"
        )
        jobs(case.stand, ["Acme", "acme", "ACME ", "other"])
        assert tenants_of(await form.claim(10)) == {"Acme": 1, "other": 1}
        assert list(await form.claim(10)) == []


@EVERY_STAND
async def test_hostile_keys_each_keep_their_own_slots(case: Case) -> None:
    async with limited_form(case, per_key(1)) as form:
        jobs(case.stand, HOSTILE + HOSTILE + [None, None])
        taken = await form.claim(30)
        assert tenants_of(taken) == ONE_EACH
        assert list(await form.claim(30)) == []
        for tenant in [*HOSTILE, None]:
            assert held_slots(case.stand, tenant, 1) == 1, tenant
        for delivery in taken:
            await form.settle(delivery, Ack())
        assert tenants_of(await form.claim(30)) == ONE_EACH


@EVERY_STAND
async def test_the_whole_queue_cap_bounds_every_key_together(case: Case) -> None:
    async with limited_form(case, whole(4)) as form:
        jobs(case.stand, ["a", "b", "c", "d", "e", "f"])
        first = await claim_each(form, 3)
        assert len(first) == 3
        assert len(await form.claim(10)) == 1
        assert list(await form.claim(10)) == []
        assert held_slots(case.stand, "*", 4) == 4
        await form.settle(first[0], Ack())
        assert len(await form.claim(10)) == 1


@EVERY_STAND
async def test_a_per_key_limit_and_a_whole_queue_cap_together(case: Case) -> None:
    both = limits_of(
        InboxQueue(Slotted, "jobs").limit(key="tenant", concurrency=2).limit(concurrency=5)
    )
    async with limited_form(case, both) as form:
        jobs(case.stand, ["a"] * 4 + ["b"] * 4 + ["c"] * 4)
        taken = await form.claim(10)
        # In claim order a, a, b, b, c (c's second row would pass the cap, not its key's).
        assert tenants_of(taken) == {"a": 2, "b": 2, "c": 1}
        assert list(await form.claim(10)) == []
        assert held_slots(case.stand, "*", 5) == 5
        # A row whose key has a slot but the queue none takes no slot of its key either.
        assert held_slots(case.stand, "c", 2) == 1
        if isinstance(case.stand, PostgresStand):
            assert advisory_locks(case.stand) == 15  # five keys, five slots, five whole


@EVERY_STAND
async def test_another_group_s_rows_in_work_count_for_nothing(case: Case) -> None:
    async with limited_form(case, per_key(1)) as form:
        jobs(case.stand, ["a"], group="other")
        jobs(case.stand, ["a"])
        theirs = make_form(FormContext(**{**vars_of(form.ctx), "group": "other"}))
        assert isinstance(theirs, AdvisoryForm)
        assert tenants_of(await theirs.claim(10)) == {"a": 1}
        assert tenants_of(await form.claim(10)) == {"a": 1}


def vars_of(ctx: FormContext) -> dict[str, Any]:
    return {name: getattr(ctx, name) for name in ctx.__dataclass_fields__}


# -- served ----------------------------------------------------------------------------------


@dataclass
class Job:
    tenant: str


@EVERY_STAND
async def test_served_many_keys_never_pass_their_limits_and_other_keys_flow(
    case: Case,
) -> None:
    case.stand.script(SLOT_JOBS[case.stand.name])
    broker = case.stand.broker(poll_interval=3600, pool_size=20)
    in_work: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []
    changed = trio.Event()
    slow = trio.Event()

    queue = (
        InboxQueue(Slotted, "jobs")
        .workers(12)
        .limit(key="tenant", concurrency=2)
        .limit(concurrency=7)
    )

    @subscriber(queue)
    async def work(job: Job) -> None:
        nonlocal changed
        in_work[job.tenant] += 1
        most[job.tenant] = max(most[job.tenant], in_work[job.tenant])
        most["*"] = max(most["*"], sum(in_work.values()))
        changed.set()
        if job.tenant == "slow":
            await slow.wait()
        else:
            await trio.sleep(0.01)
        in_work[job.tenant] -= 1
        done.append(job.tenant)
        changed.set()

    async def until(check: Callable[[], bool]) -> None:
        nonlocal changed
        with trio.fail_after(20):
            while not check():
                changed = trio.Event()
                await changed.wait()

    tenants = [f"t{n % 6}" for n in range(60)]
    jobs(case.stand, ["slow"] * 4 + tenants)
    app = make_app()
    app.include(broker, work)
    async with serving(app):
        # slow holds its two slots the whole time; every other key's rows flow past it.
        await until(lambda: len(done) == len(tenants))
        await idle(app, work)
        assert in_work["slow"] == 2
        slow.set()
        await until(lambda: done.count("slow") == 4)
    assert most["slow"] == 2
    assert max(n for t, n in most.items() if t != "*") == 2
    assert most["*"] <= 7
    assert case.stand.rows("SELECT id FROM slot_jobs") == []


@EVERY_STAND
async def test_served_a_failure_lets_its_slot_go_and_its_row_returns(case: Case) -> None:
    case.stand.script(SLOT_JOBS[case.stand.name])
    broker = case.stand.broker(poll_interval=3600)
    in_work = most = 0
    attempts: list[int] = []
    done = trio.Event()

    @subscriber(InboxQueue(Slotted, "jobs").workers(4).limit(key="tenant", concurrency=1))
    async def work(job: Job, attempt: keys.Attempt) -> None:
        nonlocal in_work, most
        in_work += 1
        most = max(most, in_work)
        attempts.append(attempt)
        await trio.sleep(0.01)
        in_work -= 1
        if len(attempts) == 6:
            done.set()
        if attempt == 1:
            raise RuntimeError("the first attempt of each row fails")  # retried at once

    jobs(case.stand, ["a"] * 3)
    app = make_app()
    app.include(broker, work)
    async with serving(app):
        # Each failure's settlement lets the tenant's one slot go: the next row (or the same
        # one again) is claimed at once, one at a time.
        with trio.fail_after(20):
            await done.wait()
        await idle(app, work)
    assert sorted(attempts) == [1, 1, 1, 2, 2, 2]
    assert most == 1
    assert case.stand.rows("SELECT id FROM slot_jobs") == []


@EVERY_STAND
async def test_served_transactional_rows_keep_their_slots_to_the_commit(case: Case) -> None:
    case.stand.script(SLOT_JOBS[case.stand.name])
    broker = case.stand.broker(poll_interval=3600, pool_size=12)
    in_work: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []
    finished = trio.Event()

    @subscriber(
        InboxQueue(Slotted, "jobs").transactional().workers(6).limit(key="tenant", concurrency=2)
    )
    async def work(job: Job, tx: keys.Tx) -> None:
        in_work[job.tenant] += 1
        most[job.tenant] = max(most[job.tenant], in_work[job.tenant])
        # The handler's transaction is on the session that holds the key and its slot.
        assert await tx.fetchval("SELECT 1") == 1
        await trio.sleep(0.02)
        in_work[job.tenant] -= 1
        done.append(job.tenant)
        if len(done) == 9:
            finished.set()

    jobs(case.stand, ["a"] * 6 + ["b"] * 3)
    app = make_app()
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(20):
            await finished.wait()
        await idle(app, work)
    assert most == {"a": 2, "b": 2}
    assert case.stand.rows("SELECT id FROM slot_jobs") == []


@EVERY_STAND
async def test_served_batches_hold_no_more_of_a_key_than_its_limit(case: Case) -> None:
    case.stand.script(SLOT_JOBS[case.stand.name])
    broker = case.stand.broker(poll_interval=3600, pool_size=12)
    in_work: Counter[str] = Counter()
    most: Counter[str] = Counter()
    batches: list[Counter[str]] = []
    finished = trio.Event()

    @subscriber(InboxQueue(Slotted, "jobs").batch(4).workers(2).limit(key="tenant", concurrency=2))
    async def work(batch: list[Job]) -> None:
        batches.append(Counter(job.tenant for job in batch))
        for job in batch:
            in_work[job.tenant] += 1
            most[job.tenant] = max(most[job.tenant], in_work[job.tenant])
        await trio.sleep(0.02)
        for job in batch:
            in_work[job.tenant] -= 1
        if sum(batches, Counter()).total() == 12:
            finished.set()

    jobs(case.stand, ["a"] * 6 + ["b"] * 6)
    app = make_app()
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(20):
            await finished.wait()
        await idle(app, work)
    # Each batch's rows hold their slots until the batch settles: two of a tenant at most,
    # in one batch or across both workers' batches.
    assert max(n for batch in batches for n in batch.values()) <= 2
    assert most == {"a": 2, "b": 2}
    assert case.stand.rows("SELECT id FROM slot_jobs") == []
