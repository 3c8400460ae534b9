"""Batch publish as type checkers check it: ``publish_many`` on the broker and on ``Tx`` (a
handler's ``keys.Tx`` too) returns ``list[Published]``, takes plain messages and ``Message``
items, refuses a row class the dialect cannot serve as ``publish`` does; and
``insert_many_statement`` returns a list of statements whose parameters' type follows the
paramstyle.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py. The
comment above a refused line shows the gist of mypy's message. pytest never collects this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, LiteralString, assert_type

from trinbox import (
    GENERATED,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Message,
    Payload,
    RowLock,
    SqlBroker,
    Unique,
    keys,
)
from trinbox.typing import Postgres, Published, Sqlite


@dataclass
class Email:
    to: str


class Mail(Inbox[Lease], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    queue: Annotated[str, Group()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class Locked(Inbox[RowLock], table="locked_mail"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    payload: Annotated[bytes, Payload()]


async def a_batch_returns_what_each_publish_would(broker: SqlBroker[Sqlite]) -> None:
    items = [Email("a"), Message(Email("b"), delay=timedelta(hours=1), unique="b")]
    found = await broker.publish_many(Mail, items, queue="emails", chunk=500)
    assert_type(found, list[Published])
    assert_type(found[0].id, object)
    assert_type(
        await broker.publish_many(Mail, (Email(to) for to in "abc"), on_duplicate="raise"),
        list[Published],
    )
    async with broker.transaction() as tx:
        assert_type(await tx.publish_many(Mail, items, queue="emails"), list[Published])


async def a_handler_publishes_a_batch(email: Email, tx: keys.Tx) -> None:
    assert_type(await tx.publish_many(Mail, [email, email], queue="emails"), list[Published])


def a_batch_for_your_own_driver(broker: SqlBroker[Postgres]) -> None:
    for sql, params in broker.insert_many_statement(Mail, [Email("a")], queue="emails"):
        assert_type(sql, LiteralString)
        assert_type(params, tuple[object, ...])
    for sql, named in broker.insert_many_statement(Mail, [Email("a")], paramstyle="pyformat"):
        assert_type(sql, LiteralString)
        assert_type(named, dict[str, object])


async def a_row_lock_batch_on_sqlite(broker: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "publish_many" of "SqlBroker" has incompatible type "type[Locked]";
    # expected "type[RowOf[Lease | Advisory, Any]]"
    await broker.publish_many(Locked, [Email("a")])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def a_batch_is_of_items(broker: SqlBroker[Sqlite]) -> None:
    # Argument "on_duplicate" to "publish_many" of "SqlBroker" has incompatible type
    # "Literal['skip']"; expected "Literal['return', 'raise']"
    await broker.publish_many(Mail, [Email("a")], on_duplicate="skip")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def a_message_key_is_text() -> None:
    # Argument "unique" to "Message" has incompatible type "int"; expected "str | None"
    Message(Email("a"), unique=7)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
