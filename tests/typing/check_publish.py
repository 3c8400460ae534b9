"""Publishing as type checkers check it: ``broker.publish`` takes a row class whose form the
broker's dialect serves, a ``Publisher`` ties a queue to its message type, and ``publish_row``
takes a row instance whose constructor checked its fields.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py. The
comment above a refused line shows the gist of mypy's message. pytest never collects this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, LiteralString, TypedDict, assert_type

from trinbox import (
    GENERATED,
    Advisory,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Message,
    Payload,
    Publisher,
    RetryAfter,
    RowLock,
    SqlBroker,
    keys,
)
from trinbox._api.handles import Tx  # the class broker.transaction() yields
from trinbox.typing import MySql, Postgres, Published, Serves, Sqlite


@dataclass
class Email:
    to: str


@dataclass
class Sms:
    number: str


class Mail(TypedDict):
    to: str


class Outbox(Inbox[Lease], table="outbox"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    locked_until: Annotated[datetime | None, LockedUntil()]
    retry_after: Annotated[datetime, RetryAfter()]
    queue: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    channel: str


# -- broker.publish: a row class the dialect serves ----------------------------------------------


async def publish_rows(
    sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres], my: SqlBroker[MySql]
) -> None:
    assert_type(await sqlite.publish(Outbox, Email("a"), queue="emails"), Published)
    await sqlite.publish(Keyed, channel="c1")
    await pg.publish(Locked, Email("a"))
    await my.publish(Locked, Email("a"), delay=None)
    _sql, params = pg.insert_statement(Locked, Email("a"))
    assert_type(params, tuple[object, ...])
    named = sqlite.insert_statement(Outbox, Email("a"), paramstyle="named", queue="emails")
    assert_type(named, tuple[LiteralString, dict[str, object]])
    any_broker: SqlBroker[Any] = sqlite
    await any_broker.publish(Locked, Email("a"))
    async with sqlite.transaction() as tx:
        await tx.publish(Outbox, Email("a"), queue="emails")


async def publish_row_lock_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "publish" of "SqlBroker" has incompatible type "type[Locked]"; expected
    # "type[RowOf[Lease | Advisory, Any]]"
    await sqlite.publish(Locked, Email("a"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def insert_row_lock_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "insert_statement" of "SqlBroker" has incompatible type "type[Locked]";
    # expected "type[RowOf[Lease | Advisory, Any]]"
    sqlite.insert_statement(Locked, Email("a"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_not_a_row(pg: SqlBroker[Postgres]) -> None:
    # Argument 1 to "publish" of "SqlBroker" has incompatible type "type[int]"; expected
    # "type[RowOf[RowLock | Lease | Advisory, Any]]"
    await pg.publish(int)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_a_string(pg: SqlBroker[Postgres]) -> None:
    # Argument 1 to "publish" of "SqlBroker" has incompatible type "str"; expected
    # "type[RowOf[RowLock | Lease | Advisory, Any]]"
    await pg.publish("outbox", Email("a"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_an_instance_as_the_class(pg: SqlBroker[Postgres], row: Keyed) -> None:
    # Argument 1 to "publish" of "SqlBroker" has incompatible type "Keyed"; expected
    # "type[RowOf[RowLock | Lease | Advisory, Any]]"
    await pg.publish(row)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def tx_publish_not_a_row(sqlite: SqlBroker[Sqlite]) -> None:
    async with sqlite.transaction() as tx:
        # Argument 1 to "publish" of "Tx" has incompatible type "type[str]"; expected
        # "type[RowOf[Lease | Advisory, Any]]"
        await tx.publish(str, "x")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def tx_publish_row_lock_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    async with sqlite.transaction() as tx:
        assert_type(tx, Tx[Sqlite])
        # Argument 1 to "publish" of "Tx" has incompatible type "type[Locked]"; expected
        # "type[RowOf[Lease | Advisory, Any]]"
        await tx.publish(Locked, Email("a"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def delivery_tx_publishes_any_row(tx: keys.Tx) -> None:
    # A handler's transaction does not know its broker's dialect: it serves every form.
    assert_type(tx, Tx[Serves[object]])
    await tx.publish(Locked, Email("a"))
    await tx.publish_row(Keyed(channel="c"))


async def delivery_tx_publish_not_a_row(tx: keys.Tx) -> None:
    # Argument 1 to "publish" of "Tx" has incompatible type "type[int]"; expected
    # "type[RowOf[Any, Any]]"
    await tx.publish(int)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- Publisher: the message type of a queue ------------------------------------------------------

EMAILS = Publisher(InboxQueue(Outbox, "emails"), Email)


async def typed_publishers(sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres]) -> None:
    assert_type(EMAILS, Publisher[Outbox, Email])
    await EMAILS.publish(sqlite, Email("a"))
    await EMAILS.publish(pg, Email("a"), delay=timedelta(seconds=5))
    async with sqlite.transaction() as tx:
        await EMAILS.publish(tx, Email("a"))
    locked = Publisher(InboxQueue(Locked, "locked"), Email)
    await locked.publish(pg, Email("b"))
    raw = Publisher(InboxQueue(Outbox, "raw"), bytes)
    await raw.publish(sqlite, b"\x00")
    dicts = Publisher(InboxQueue(Outbox, "dicts"), Mail)
    assert_type(dicts, Publisher[Outbox, Mail])
    await dicts.publish(sqlite, {"to": "a"})


async def publisher_batches(sqlite: SqlBroker[Sqlite]) -> None:
    found = await EMAILS.publish_many(sqlite, [Email("a"), Message(Email("b"), unique="b")])
    assert_type(found, list[Published])
    async with sqlite.transaction() as tx:
        assert_type(await EMAILS.publish_many(tx, (Email(t) for t in "ab")), list[Published])


async def publisher_batch_wrong_message(sqlite: SqlBroker[Sqlite]) -> None:
    # List item 0 has incompatible type "Sms"; expected "Email | Message"
    await EMAILS.publish_many(sqlite, [Sms("1")])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]


async def publisher_wrong_message(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 2 to "publish" of "Publisher" has incompatible type "Sms"; expected "Email"
    await EMAILS.publish(sqlite, Sms("1"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publisher_text_message(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 2 to "publish" of "Publisher" has incompatible type "str"; expected "Email"
    await EMAILS.publish(sqlite, "hello")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publisher_in_tx_wrong_message(sqlite: SqlBroker[Sqlite]) -> None:
    async with sqlite.transaction() as tx:
        # Argument 2 to "publish" of "Publisher" has incompatible type "dict[str, str]";
        # expected "Email"
        await EMAILS.publish(tx, {"to": "a"})  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publisher_typed_dict_wrong_key(sqlite: SqlBroker[Sqlite]) -> None:
    dicts = Publisher(InboxQueue(Outbox, "dicts"), Mail)
    # Missing key "to" for TypedDict "Mail"  [typeddict-item], and
    # Extra key "too" for TypedDict "Mail"  [typeddict-unknown-key]
    await dicts.publish(sqlite, {"too": "a"})  # type: ignore[typeddict-item, typeddict-unknown-key]  # pyright: ignore[reportArgumentType]


async def publisher_row_lock_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    locked = Publisher(InboxQueue(Locked, "locked"), Email)
    # Argument 1 to "publish" of "Publisher" has incompatible type "SqlBroker[Sqlite]";
    # expected "SqlBroker[Serves[tuple[RowLock, Any]]] | Tx"
    await locked.publish(sqlite, Email("a"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# -- publish_row: fields checked by the row's constructor ----------------------------------------


async def publish_instances(sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres]) -> None:
    assert_type(await sqlite.publish_row(Keyed(channel="c1")), Published)
    await pg.publish_row(Keyed(channel="c2"), delay=None)
    async with sqlite.transaction() as tx:
        await tx.publish_row(Keyed(channel="c3"))
        # Argument 1 to "publish_row" of "Tx" has incompatible type "Locked"; expected
        # "RowOf[Lease | Advisory, Any]"
        await tx.publish_row(Locked(payload=b""))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_row_unknown_field(sqlite: SqlBroker[Sqlite]) -> None:
    # Unexpected keyword argument "chanel" for "Keyed"; did you mean "channel"?
    await sqlite.publish_row(Keyed(chanel="c1"))  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


async def publish_row_mistyped_field(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument "channel" to "Keyed" has incompatible type "int"; expected "str"
    await sqlite.publish_row(Keyed(channel=1))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_row_lock_instance_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "publish_row" of "SqlBroker" has incompatible type "Locked"; expected
    # "RowOf[Lease | Advisory, Any]"
    await sqlite.publish_row(Locked(payload=b"{}"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_row_of_a_class(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "publish_row" of "SqlBroker" has incompatible type "type[Keyed]";
    # expected "RowOf[Lease | Advisory, Any]"
    await sqlite.publish_row(Keyed)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_rows_of_two_forms_in_a_loop(sqlite: SqlBroker[Sqlite]) -> None:
    # A list of two rows of different forms holds a row lock row, which SQLite does not serve.
    for row in [Keyed(channel="c1"), Locked(payload=b"{}")]:
        await sqlite.publish_row(row)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# -- headers: names and values of text, at every publish -----------------------------------------


async def publish_headers(sqlite: SqlBroker[Sqlite]) -> None:
    await sqlite.publish(Outbox, Email("a"), queue="emails", headers={"tenant": "acme"})
    sqlite.insert_statement(
        Outbox, Email("a"), queue="emails", headers={"tenant": "acme"}, paramstyle="named"
    )
    async with sqlite.transaction() as tx:
        await tx.publish(Outbox, Email("a"), queue="emails", headers={"tenant": "acme"})
    await EMAILS.publish(sqlite, Email("a"), headers={"tenant": "acme"})
    # Dict entry 0 has incompatible type "str": "int"; expected "str": "str"
    await sqlite.publish(Outbox, Email("a"), queue="emails", headers={"retries": 3})  # type: ignore[dict-item]  # pyright: ignore[reportArgumentType]
    # Argument "headers" to "publish" of "Publisher" has incompatible type "list[...]"
    await EMAILS.publish(sqlite, Email("a"), headers=[("tenant", "acme")])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
