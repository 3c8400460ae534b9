"""A service written the way users write one, with nothing to refuse: under mypy --strict and
pyright strict every line passes, and pyright infers every type completely (no
``reportUnknown*``: a partially unknown type is an error in its strict mode).

Handlers of every kind (functions, methods, objects with an async ``__call__``),
decorated or bound inline, subscribers in variables, lists, dicts and helper functions, mounts
in loops, publishing through brokers, transactions and Publishers, the hooks and statistics.
pytest never collects this file (tests/unit/test_typing_behaviour.py checks it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, LiteralString, TypedDict, assert_type

import trio

from trinbox import (
    GENERATED,
    Advisory,
    App,
    AppInfo,
    Attempt,
    Backoff,
    Group,
    HandlerOutcome,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OnFailure,
    Payload,
    Publisher,
    RetryAfter,
    RowLock,
    Serializable,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.events import SubscriptionStatistics
from trinbox.testing import settled
from trinbox.typing import (
    Mount,
    MySql,
    Plain,
    Postgres,
    ShutdownReport,
    Sqlite,
    Subscriber,
    Transactional,
)


@dataclass
class Email:
    to: str


class Mail(TypedDict):
    to: str


class Outbox(Inbox[Lease], table="outbox"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    locked_until: Annotated[datetime | None, LockedUntil()]
    attempt: Annotated[int, Attempt(generated=True)] = GENERATED
    retry_after: Annotated[datetime, RetryAfter()] = GENERATED
    queue: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory, Immediate], table="keyed", advisory_lock="k-{id}"):
    id: Annotated[int, Id(generated=True)] = GENERATED


class Locked(Inbox[RowLock, Serializable], table="locked"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    payload: Annotated[bytes, Payload()]


EMAILS = InboxQueue(Outbox, "emails")
MAILER = Publisher(EMAILS, Email)


@subscriber(EMAILS)
async def send(email: Email) -> None: ...


@subscriber(EMAILS.workers(4).lease(timedelta(seconds=60)).poll_interval(0.5))
async def send_with_keys(email: Email, attempt: keys.Attempt, pool: keys.Pool) -> HandlerOutcome:
    if attempt > 3:
        return HandlerOutcome.drop()
    await pool.execute("SELECT 1")
    return HandlerOutcome.ack()


@subscriber(EMAILS.transactional())
async def send_in_tx(email: Email, tx: keys.Tx) -> HandlerOutcome | None:
    await tx.execute("INSERT INTO sent VALUES (1)")
    await tx.publish(Outbox, Email("b"), queue="other")
    return None


@subscriber(InboxQueue(Keyed, "k"))
async def on_keyed(row: Keyed, attempt: keys.Attempt) -> None: ...


@subscriber(InboxQueue(Keyed, "k").batch(10))
async def on_keyed_batch(rows: list[Keyed], pool: keys.Pool) -> list[HandlerOutcome]:
    return [HandlerOutcome.ack() for _ in rows]


@subscriber(InboxQueue(Locked, "l").on_failure(OnFailure()).backoff(Backoff("constant")))
async def on_locked(message: dict[str, int]) -> None: ...


@subscriber(InboxQueue(Locked, "l").transactional().workers(2))
async def on_locked_in_tx(
    message: bytes, attempt: keys.Attempt, tx: keys.Tx, pool: keys.Pool
) -> None: ...


async def plain_handler(email: Email) -> None: ...
async def on_mail(mail: Mail, pool: keys.Pool) -> None: ...
async def on_either(message: Email | Mail) -> None: ...
async def on_anything(message: Any) -> None: ...


class Service:
    """Handlers as methods, and an object whose ``__call__`` is the handler."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def handle(self, email: Email, attempt: keys.Attempt) -> None: ...

    async def __call__(self, email: Email) -> HandlerOutcome:
        return HandlerOutcome.ack()


bound_inline = subscriber(EMAILS)(plain_handler)
factory = subscriber(EMAILS)
from_factory = factory(plain_handler)


def make_subscriber(name: str) -> Subscriber[Outbox, Plain]:
    return subscriber(InboxQueue(Outbox, name))(plain_handler)


def make_tx_subscriber() -> Subscriber[Outbox, Transactional]:
    return send_in_tx


def check_mounts(app: App) -> None:
    sqlite = SqlBroker.sqlite("sqlite:///x.db")
    pg = SqlBroker.postgres("postgresql://db/x")
    my = SqlBroker.mysql("mysql://db/x")
    app.include(sqlite, send)
    app.include(sqlite, send_with_keys).max_attempts(3).dead_letter("dead")
    app.include(sqlite, send_in_tx)
    app.include(sqlite, on_keyed)
    app.include(sqlite, on_keyed_batch)
    app.include(pg, on_locked)
    app.include(my, on_locked_in_tx)
    app.include(sqlite, bound_inline)
    app.include(sqlite, from_factory)
    app.include(sqlite, make_subscriber("made"))
    app.include(pg, make_tx_subscriber())
    mount = app.include(pg, send)
    assert_type(mount.backoff(Backoff("linear")), Mount)
    for sub in [send, send_with_keys, send_in_tx]:
        app.include(sqlite, sub)
        app.include(pg, sub)
    for name, by_name in {"send": send, "keyed": on_keyed}.items():
        assert_type(name, str)
        app.include(sqlite, by_name)
    mounts = [app.include(pg, sub) for sub in [on_locked, on_locked_in_tx]]
    assert_type(mounts, list[Mount])
    typed: list[Subscriber[Any, Any]] = [send, on_locked]
    for any_sub in typed:
        app.include(pg, any_sub)


def check_handlers_of_every_kind(app: App, broker: SqlBroker[Sqlite]) -> None:
    service = Service("x")
    subscribers = (
        subscriber(EMAILS)(service.handle),
        subscriber(EMAILS)(service),
        subscriber(EMAILS)(on_either),
        subscriber(EMAILS)(on_mail),
        subscriber(EMAILS.transactional())(on_mail),
        subscriber(EMAILS)(on_anything),
    )
    for sub in subscribers:
        app.include(broker, sub)
    app.include(broker, subscriber(EMAILS)(service.handle))
    app.include(broker, subscriber(EMAILS)(service))
    app.include(broker, subscriber(EMAILS.transactional())(on_mail))
    handler = subscriber(EMAILS)(service.handle).handler
    assert_type(handler, Callable[[Email, keys.Attempt], Awaitable[None]])


def check_statistics(app: App) -> None:
    assert_type(app.statistics(send), SubscriptionStatistics)
    assert_type(app.statistics(), tuple[SubscriptionStatistics, ...])
    assert_type(app.mounts, tuple[Mount, ...])
    assert_type(app.brokers, tuple[SqlBroker[Any], ...])


async def check_publishing(
    sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres], my: SqlBroker[MySql]
) -> None:
    await sqlite.publish(Outbox, Email("a"), queue="emails")
    await pg.publish(Locked, {"a": 1})
    await my.publish(Keyed)
    await sqlite.publish_row(Keyed())
    await MAILER.publish(sqlite, Email("a"))
    await MAILER.publish(pg, Email("a"), delay=timedelta(seconds=1))
    async with sqlite.transaction() as tx:
        await tx.publish(Outbox, Email("x"), queue="q")
        await tx.publish_row(Keyed())
        await MAILER.publish(tx, Email("c"))
        assert_type(await tx.execute("SELECT 1"), int)
        assert_type(await tx.fetchval("SELECT 1"), object)
        for record in await tx.fetch("SELECT 1"):
            print(record)
    sql, params = pg.insert_statement(Locked, b"x")
    assert_type(sql, LiteralString)
    assert_type(params, tuple[object, ...])


async def check_serving() -> None:
    app = App(AppInfo("svc"))
    broker = SqlBroker.sqlite("sqlite:///x.db")
    app.include(broker, send)

    @app.on_startup
    async def create() -> None:
        await broker.create_tables(Outbox)

    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        await settled(app, send, 1)
        app.shutdown()
    assert_type(await app.serve(), ShutdownReport)
