"""Dedup keys as type checkers check them: a ``Unique()`` field, ``unique=`` and
``on_duplicate=`` on every publish, ``Published`` back from each, ``Duplicate`` raised.

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
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    Publisher,
    SqlBroker,
    Unique,
    keys,
)
from trinbox.errors import Duplicate
from trinbox.typing import Published, Sqlite


@dataclass
class Account:
    user: str


class Sync(Inbox[Lease], table="sync_jobs"):
    id: Annotated[int, Id(generated=True)] = GENERATED
    queue: Annotated[str, Group()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique(window=timedelta(hours=1))] = None


async def every_publish_returns_the_row_holding_the_key(broker: SqlBroker[Sqlite]) -> None:
    found = await broker.publish(Sync, Account("ada"), queue="syncs", unique="sync-ada")
    assert_type(found, Published)
    assert_type(found.id, object)
    assert_type(found.duplicate, bool)
    assert_type(found.key, str | None)
    raised = await broker.publish(
        Sync, Account("ada"), queue="syncs", unique="sync-ada", on_duplicate="raise"
    )
    assert_type(raised, Published)
    assert_type(await broker.publish(Sync, Account("ada"), queue="syncs"), Published)
    assert_type(await broker.publish_named("syncs", Account("ada"), unique="k"), Published)
    assert_type(await broker.publish_row(Sync(queue="syncs", payload=b"{}", dedup="k")), Published)
    syncs = Publisher(InboxQueue(Sync, "syncs"), Account)
    assert_type(await syncs.publish(broker, Account("ada"), unique="k"), Published)
    async with broker.transaction() as tx:
        assert_type(await tx.publish(Sync, Account("ada"), queue="syncs", unique="k"), Published)
        assert_type(await tx.publish_named("syncs", Account("ada"), unique="k"), Published)
        assert_type(await syncs.publish(tx, Account("ada"), unique="k"), Published)
    sql, params = broker.insert_statement(Sync, Account("ada"), queue="syncs", unique="k")
    assert_type(sql, LiteralString)
    assert_type(params, tuple[object, ...])


async def a_handler_publishes_with_a_key(tx: keys.Tx) -> None:
    assert_type(await tx.publish(Sync, Account("ada"), queue="syncs", unique="k"), Published)


def a_duplicate_names_the_row(error: Duplicate) -> None:
    assert_type(error.id, object)
    assert_type(error.key, str)
    assert_type(error.table, str)


async def a_key_is_text(broker: SqlBroker[Sqlite]) -> None:
    # Argument "unique" to "publish" of "SqlBroker" has incompatible type "int"; expected
    # "str | None"
    await broker.publish(Sync, Account("ada"), queue="syncs", unique=7)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def on_duplicate_returns_or_raises(broker: SqlBroker[Sqlite]) -> None:
    # Argument "on_duplicate" to "publish" of "SqlBroker" has incompatible type
    # "Literal['ignore']"; expected "Literal['return', 'raise']"
    await broker.publish(Sync, Account("a"), queue="syncs", unique="k", on_duplicate="ignore")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def a_publisher_takes_a_key_of_text(broker: SqlBroker[Sqlite]) -> None:
    syncs = Publisher(InboxQueue(Sync, "syncs"), Account)
    # Argument "unique" to "publish" of "Publisher" has incompatible type "int"; expected
    # "str | None"
    await syncs.publish(broker, Account("ada"), unique=7)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
