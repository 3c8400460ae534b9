"""The ``Unique()`` role on every stand and form, in tables ``create_tables`` makes: a dedup key
is held by one unfinished row of its table at a time, from its publish until its ack, its drop
or its move into a dead letter; a retry keeps it, a row kept by ``ProcessedAt`` lets it go,
and a row in the table's dead letter group holds it no more. Every way to publish returns the
row that holds the key, or raises ``Duplicate``; a redrive leaves a dead letter whose key a
live row holds where it is, and says so; a window keys each period apart; startup refuses a
table without the unique index."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import pytest
import trio

from trinbox import (
    Advisory,
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
    ProcessedAt,
    Publisher,
    RetryAfter,
    RowLock,
    SqlBroker,
    Unique,
    keys,
    subscriber,
)
from trinbox._operations.queues import opened, queues_of, redrive
from trinbox.errors import DeclarationError, Duplicate, SchemaError
from trinbox.schema import DialectName, ddl
from trinbox.testing import settled

from ..serving import make_app, serving
from ..stands import SqliteStand
from .conftest import Case
from .kit import DUE, cells

TABLE = "unique_jobs"
PLAIN = "unique_plain"


class KeyedLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class KeyedLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class KeyedAdvisory(Inbox[Advisory], table=TABLE, advisory_lock="unique-{id}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


KEYED: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": KeyedLock,
    "lease": KeyedLease,
    "advisory": KeyedAdvisory,
}


# No group, ack deletes: the index is on the key column itself; dead letters go to a table.
class PlainLock(Inbox[RowLock], table=PLAIN):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class PlainLease(Inbox[Lease], table=PLAIN):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class PlainAdvisory(Inbox[Advisory], table=PLAIN, advisory_lock="plain-{id}"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


PLAINS: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": PlainLock,
    "lease": PlainLease,
    "advisory": PlainAdvisory,
}


@dataclass
class Sync:
    user: str


def _tables(app: Any, broker: SqlBroker[Any], row: type[Inbox[Any, Any]], dead: str | None) -> None:
    async def create() -> None:
        await broker.create_tables(row, dead_letter=dead)

    app.on_startup(create)


def _idle(row: type[Inbox[Any, Any]]) -> Any:
    """A subscription to the group ``jobs``: rows published elsewhere stay unfinished."""

    @subscriber(InboxQueue(row, "jobs"))
    async def never(sync: Sync) -> None:
        raise AssertionError("nothing is published into jobs")

    return never


async def test_every_way_to_publish_returns_the_row_holding_the_key(case: Case) -> None:
    row = KEYED[case.form]
    broker = case.stand.broker()
    app = make_app()
    app.include(broker, _idle(row))
    _tables(app, broker, row, None)
    broker.route(row, "idle")
    idle = Publisher(InboxQueue(row, "idle"), Sync)
    async with serving(app):
        first = await broker.publish(row, Sync("a"), queue="idle", unique="user-a")
        assert not first.duplicate
        assert first.key == "user-a"
        assert isinstance(first.id, int)
        again = await broker.publish(row, Sync("a"), queue="idle", unique="user-a")
        assert (again.id, again.duplicate, again.key) == (first.id, True, "user-a")
        with pytest.raises(Duplicate) as raised:
            await broker.publish(
                row, Sync("a"), queue="idle", unique="user-a", on_duplicate="raise"
            )
        assert (raised.value.id, raised.value.key) == (first.id, "user-a")
        assert str(raised.value) == (
            f"publish into {TABLE} ({row.__qualname__}): a dedup key is held by one unfinished "
            f"row at a time, found 'user-a' held by the row {first.id} and nothing written; "
            f'leave the message to that row, or publish with on_duplicate="return" to get it '
            f"back"
        )
        async with broker.transaction() as tx:
            in_tx = await tx.publish(row, Sync("a"), queue="idle", unique="user-a")
            named_in_tx = await tx.publish_named("idle", Sync("a"), unique="user-a")
            # A key written in this transaction is held for its own next publish too.
            b = await tx.publish(row, Sync("b"), queue="idle", unique="user-b")
            b_again = await tx.publish(row, Sync("b"), queue="idle", unique="user-b")
        by_publisher = await idle.publish(broker, Sync("a"), unique="user-a")
        named = await broker.publish_named("idle", Sync("a"), unique="user-a")
        make: Any = row
        made = make(queue="idle", retry_after=DUE, attempt=1, payload=b"{}", dedup="user-a")
        by_row = await broker.publish_row(made)
        for found in (in_tx, named_in_tx, by_publisher, named, by_row):
            assert (found.id, found.duplicate) == (first.id, True)
        assert not b.duplicate
        assert (b_again.id, b_again.duplicate) == (b.id, True)
        # Without a key: no dedup, and nothing read back.
        for _ in range(2):
            keyless = await broker.publish(row, Sync("c"), queue="idle")
            assert (keyless.id, keyless.duplicate, keyless.key) == (None, False, None)
    # (A publish that found its key held may have used up an id of the table's sequence.)
    rows = case.stand.rows(f"SELECT id, dedup FROM {TABLE} ORDER BY id")
    assert rows[:2] == [(first.id, "user-a"), (b.id, "user-b")]
    assert [key for _, key in rows[2:]] == [None, None]


async def test_a_retry_keeps_the_key_and_an_ack_kept_by_processed_at_frees_it(
    case: Case,
) -> None:
    row = KEYED[case.form]
    broker = case.stand.broker()
    second = trio.Event()
    go_on = trio.Event()

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(sync: Sync, attempt: keys.Attempt) -> HandlerOutcome:
        if attempt == 1:
            return HandlerOutcome.retry()
        second.set()
        await go_on.wait()
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle).backoff(Backoff.none())
    _tables(app, broker, row, None)
    async with serving(app):
        first = await broker.publish(row, Sync("a"), queue="jobs", unique="k")
        with trio.fail_after(10):
            await second.wait()
        # Retried and in work again: the row holds its key all along.
        held = await broker.publish(row, Sync("a"), queue="jobs", unique="k")
        assert (held.id, held.duplicate) == (first.id, True)
        go_on.set()
        with trio.fail_after(10):
            await settled(app, handle, 2)
        # Acked: the row is kept (ProcessedAt), and holds the key no more.
        after = await broker.publish(row, Sync("a"), queue="other", unique="k")
        assert not after.duplicate
        assert after.id != first.id
    rows = case.stand.rows(f"SELECT id, processed_at IS NULL FROM {TABLE} ORDER BY id")
    assert [(i, bool(open_)) for i, open_ in rows] == [(first.id, False), (after.id, True)]


async def test_a_drop_frees_the_key(case: Case) -> None:
    row = PLAINS[case.form]
    broker = case.stand.broker()

    @subscriber(InboxQueue(row, "plain"))
    async def handle(sync: Sync) -> HandlerOutcome:
        return HandlerOutcome.drop()

    app = make_app()
    app.include(broker, handle)
    _tables(app, broker, row, None)
    async with serving(app):
        first = await broker.publish(row, Sync("a"), unique="k")
        with trio.fail_after(10):
            await settled(app, handle, 1)
        after = await broker.publish(row, Sync("a"), unique="k")
        assert not after.duplicate
        assert after.id != first.id
        with trio.fail_after(10):
            await settled(app, handle, 2)


async def test_a_dead_letter_group_frees_the_key_and_a_redrive_leaves_a_held_one(
    case: Case,
) -> None:
    row = KEYED[case.form]
    broker = case.stand.broker()

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(sync: Sync) -> HandlerOutcome:
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, handle).max_attempts(1).dead_letter("jobs.dead")
    _tables(app, broker, row, None)
    async with serving(app):
        held = await broker.publish(row, Sync("a"), queue="jobs", unique="k")
        free = await broker.publish(row, Sync("b"), queue="jobs", unique="j")
        with trio.fail_after(10):
            await settled(app, handle, 2)
        # In the dead letter group: the key is free for a new row (of a group nobody serves).
        live = await broker.publish(row, Sync("a"), queue="idle", unique="k")
        assert not live.duplicate
    assert case.stand.rows(f"SELECT id, queue, dedup FROM {TABLE} ORDER BY id") == [
        (held.id, "jobs.dead", "k"),
        (free.id, "jobs.dead", "j"),
        (live.id, "idle", "k"),
    ]
    (jobs,) = queues_of(app)
    async with opened(app.brokers):
        done = await redrive(jobs, None)
    assert done.moved == (free.id,)
    assert done.held == ((held.id, "k"),)
    assert case.stand.rows(f"SELECT id, queue FROM {TABLE} ORDER BY id") == [
        (held.id, "jobs.dead"),
        (free.id, "jobs"),
        (live.id, "idle"),
    ]


async def test_a_dead_letter_table_frees_the_key_and_a_redrive_leaves_a_held_one(
    case: Case,
) -> None:
    row = PLAINS[case.form]
    broker = case.stand.broker()

    go_on = trio.Event()

    @subscriber(InboxQueue(row, "plain"))
    async def handle(sync: Sync) -> HandlerOutcome:
        await go_on.wait()
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, handle).max_attempts(1).dead_letter(f"{PLAIN}_dead")
    _tables(app, broker, row, f"{PLAIN}_dead")
    async with serving(app):
        first = await broker.publish(row, Sync("a"), unique="k")
        twin = await broker.publish(row, Sync("a"), unique="k")
        assert (twin.id, twin.duplicate) == (first.id, True)
        go_on.set()
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert case.stand.rows(f"SELECT id FROM {PLAIN}") == []
    # Two dead letters of one key, and a live row holding it: neither goes back.
    case.stand.execute(
        f"INSERT INTO {PLAIN}_dead (id, attempt, payload, dedup) VALUES (100, 1, ?, 'k')",
        b"{}",
    )
    (plain,) = queues_of(app)
    async with opened(app.brokers):
        done = await redrive(plain, None)
    # The first of two dead letters of one key goes back, the second is left.
    assert done.moved == (first.id,)
    assert done.held == ((100, "k"),)
    assert case.stand.rows(f"SELECT id, dedup FROM {PLAIN}") == [(first.id, "k")]
    assert case.stand.rows(f"SELECT id FROM {PLAIN}_dead") == [(100,)]


async def test_a_publish_refuses_a_key_it_cannot_write(case: Case) -> None:
    row = KEYED[case.form]
    broker = case.stand.broker()
    app = make_app()
    app.include(broker, _idle(row))
    _tables(app, broker, row, None)
    async with serving(app):
        with pytest.raises(
            DeclarationError, match=r"^publish into unique_jobs .*found dedup= among"
        ):
            await broker.publish(row, Sync("a"), queue="idle", dedup="k")
        with pytest.raises(DeclarationError, match=r"a dedup key is a str .*found int 7"):
            await broker.publish(row, Sync("a"), queue="idle", unique=7)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        with pytest.raises(DeclarationError, match=r"^publish into email_jobs .*a table without"):
            await broker.publish(case.email, Sync("a"), name="emails", unique="k")
    assert case.stand.rows(f"SELECT id FROM {TABLE}") == []


class Windowed(Inbox[Lease], table="windowed_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique(window=timedelta(hours=1))] = None


@cells(forms=("lease",))
async def test_a_window_keys_each_period_of_the_due_time_apart(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(Windowed, "windowed"))
    async def handle(sync: Sync) -> None:
        raise AssertionError("nothing falls due")

    app = make_app()
    app.include(broker, handle)
    _tables(app, broker, Windowed, None)
    later = timedelta(days=400)  # after the test's clock, which starts in 2030
    async with serving(app):
        now = broker.clock()
        start = now.replace(minute=0, second=0, microsecond=0)
        first = await broker.publish(Windowed, Sync("a"), delay=later, unique="report")
        same = await broker.publish(
            Windowed, Sync("a"), delay=later + timedelta(minutes=1) * 0, unique="report"
        )
        next_hour = await broker.publish(
            Windowed, Sync("a"), delay=later + timedelta(hours=1), unique="report"
        )
    due = start + later
    assert first.key == f"report@{due:%Y-%m-%dT%H}:00:00Z"
    assert (same.id, same.duplicate) == (first.id, True)
    assert not next_hour.duplicate
    assert next_hour.key == f"report@{due + timedelta(hours=1):%Y-%m-%dT%H}:00:00Z"
    assert case.stand.rows("SELECT dedup FROM windowed_jobs ORDER BY id") == [
        (first.key,),
        (next_hour.key,),
    ]


# The fix the startup check names, per stand, once the DDL's unique index is left out (MySQL:
# its generated column and index dropped).
FIX: dict[str, str] = {
    "postgres": (
        'CREATE UNIQUE INDEX IF NOT EXISTS "unique_jobs_unique" ON "unique_jobs" ("dedup") '
        'WHERE "processed_at" IS NULL AND "origin" IS NULL'
    ),
    "mariadb": (
        "ALTER TABLE `unique_jobs` ADD COLUMN `dedup_unfinished` VARCHAR(191) COLLATE "
        "utf8mb4_bin GENERATED ALWAYS AS (IF(`processed_at` IS NULL AND `origin` IS NULL, "
        "`dedup`, NULL)) STORED, ADD UNIQUE INDEX `unique_jobs_unique` (`dedup_unfinished`)"
    ),
    "sqlite": (
        "CREATE UNIQUE INDEX IF NOT EXISTS `unique_jobs_unique` ON `unique_jobs` (`dedup`) "
        "WHERE `processed_at` IS NULL AND `origin` IS NULL"
    ),
}


@cells(forms=("lease",))
async def test_startup_refuses_a_unique_field_without_its_index_and_names_the_fix(
    case: Case,
) -> None:
    dialects: dict[str, DialectName] = {"postgres": "postgres", "mariadb": "mysql"}
    dialect = dialects.get(case.name, "sqlite")
    for statement in ddl(KeyedLease, dialect):
        if not statement.startswith("CREATE UNIQUE INDEX"):
            case.stand.script(statement)
    if dialect == "mysql":
        case.stand.script(
            "ALTER TABLE unique_jobs DROP INDEX unique_jobs_unique, DROP COLUMN dedup_unfinished"
        )
    broker = case.stand.broker()
    app = make_app()
    app.include(broker, _idle(KeyedLease))
    with trio.fail_after(10), pytest.raises(SchemaError) as refused:
        await app.serve()
    holds = {
        "mariadb": "`processed_at` IS NULL AND `origin` IS NULL",
        "postgres": '"processed_at" IS NULL AND "origin" IS NULL',
    }.get(case.name, "`processed_at` IS NULL AND `origin` IS NULL")
    assert str(refused.value).endswith(
        f" on 'jobs' of KeyedLease>): a Unique field is enforced by a unique index on its "
        f"key over the rows that hold it (the rows where {holds}), without which two "
        f"publishes of one key both write, found none on the column 'dedup' of {TABLE} "
        f"(KeyedLease); add it: {FIX[case.name]}"
    )
    # The fix, run as printed, makes the table serve.
    case.stand.script(FIX[case.name])
    app = make_app()
    app.include(broker, _idle(KeyedLease))
    async with serving(app):
        found = await broker.publish(KeyedLease, Sync("a"), queue="idle", unique="k")
        again = await broker.publish(KeyedLease, Sync("a"), queue="idle", unique="k")
    assert (again.id, again.duplicate) == (found.id, True)


@cells(forms=("lease",))
async def test_insert_statement_dedups_on_your_own_driver(case: Case) -> None:
    broker = case.stand.broker()
    app = make_app()
    app.include(broker, _idle(KeyedLease))
    _tables(app, broker, KeyedLease, None)
    async with serving(app):
        pass  # the tables
    style: Literal["qmark", "format"] = "qmark" if case.name == "sqlite" else "format"
    sql, params = broker.insert_statement(
        KeyedLease, Sync("a"), queue="idle", unique="k", paramstyle=style
    )
    if case.name == "mariadb":
        # PyMySQL counts changed rows: 1 for the new row, 0 for the duplicate.
        assert [case.stand.execute(sql, *params) for _ in range(2)] == [1, 0]
    elif isinstance(case.stand, SqliteStand):
        with sqlite3.connect(case.stand.path, isolation_level=None) as conn:
            first, again = (conn.execute(sql, params).fetchall() for _ in range(2))
        assert len(first) == 1
        assert again == []
    else:
        first, again = (case.stand.rows(sql, *params) for _ in range(2))
        assert len(first) == 1
        assert again == []  # a duplicate: no row back
    assert case.stand.rows(f"SELECT dedup FROM {TABLE}") == [("k",)]
