"""Routes, publishing by name, subscriptions by name and replies, as type checkers check them:
``broker.route`` takes a row class the broker's dialect serves and keeps the message type it is
given, and wherever a route stands for its name (``publish_named``, ``tx.publish_named``,
``HandlerOutcome.ack().reply``, ``keys.Out.reply``) the message must be of that type; a name
given as a ``str`` takes any message. A ``RoutedQueue`` handler takes the decoded message and
context keys (``keys.Out`` last), never ``keys.Tx``, and its queue is never transactional.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py. The
comment above a refused line shows the gist of mypy's message. pytest never collects this file.
"""
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, assert_type

from trinbox import (
    App,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RoutedQueue,
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import (
    BatchTakesNoRowKeys,
    ByNameNeverTransactional,
    Mount,
    NotAHandler,
    Postgres,
    Published,
    Route,
    RoutedSubscriber,
    Sqlite,
    TxNeedsTransactional,
)


@dataclass
class Placed:
    order: int


@dataclass
class Packed:
    order: int


class Order(Inbox[Lease], table="orders"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


# -- routes keep their message type -----------------------------------------------------------


async def routes_and_publishes(sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres]) -> None:
    placed = sqlite.route(Order, "orders.placed", Placed)
    assert_type(placed, Route[Placed])
    assert_type(sqlite.route(Order, "orders.*"), Route[object])
    assert_type(pg.route(Locked, "locked.*", Packed), Route[Packed])
    assert_type(await sqlite.publish_named(placed, Placed(1)), Published)
    await sqlite.publish_named("orders.paid", {"any": "message"}, delay=None)
    async with sqlite.transaction() as tx:
        await tx.publish_named(placed, Placed(2))
        await tx.publish_named("orders.paid", "any message")


def route_row_lock_on_sqlite(sqlite: SqlBroker[Sqlite]) -> None:
    # Argument 1 to "route" of "SqlBroker" has incompatible type "type[Locked]"; expected
    # "type[RowOf[Lease | Advisory, Any]]"
    sqlite.route(Locked, "locked")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def publish_another_message(sqlite: SqlBroker[Sqlite]) -> None:
    placed = sqlite.route(Order, "orders.placed", Placed)
    # Cannot infer value of type parameter "T" of "publish_named" of "SqlBroker" (the route
    # says Placed, the message is a Packed)
    await sqlite.publish_named(placed, Packed(1))  # type: ignore[misc]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def tx_publish_another_message(sqlite: SqlBroker[Sqlite]) -> None:
    placed = sqlite.route(Order, "orders.placed", Placed)
    async with sqlite.transaction() as tx:
        # Cannot infer value of type parameter "T" of "publish_named" of "Tx"
        await tx.publish_named(placed, Packed(1))  # type: ignore[misc]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def publish_named_a_row_class(sqlite: SqlBroker[Sqlite]) -> None:
    # No overload variant of "publish_named" of "SqlBroker" matches argument types
    # "type[Order]", "Placed"
    await sqlite.publish_named(Order, Placed(1))  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]


# -- replies ------------------------------------------------------------------------------------


PACKED: Route[Packed] = SqlBroker.sqlite("sqlite:///jobs.db").route(Order, "orders.packed", Packed)


def replies_keep_their_type() -> None:
    assert_type(HandlerOutcome.ack().reply(PACKED, Packed(1)), HandlerOutcome)
    both = HandlerOutcome.ack().reply("orders.audit", {"any": 1}).reply(PACKED, Packed(2))
    assert_type(both, HandlerOutcome)


def reply_another_message() -> None:
    # Cannot infer value of type parameter "T" of "reply" of "HandlerOutcome" (the route says
    # Packed, the message is a Placed)
    HandlerOutcome.ack().reply(PACKED, Placed(1))  # type: ignore[misc]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def pack(placed: Placed, out: keys.Out) -> HandlerOutcome:
    out.reply(PACKED, Packed(placed.order))
    out.reply("orders.audit", placed)
    return HandlerOutcome.ack()


async def pack_in_tx(placed: Placed, tx: keys.Tx, attempt: keys.Attempt, out: keys.Out) -> None:
    out.reply(PACKED, Packed(attempt))


async def out_of_another_message(placed: Placed, out: keys.Out) -> None:
    # Cannot infer value of type parameter "T" of "reply" of "Out"
    out.reply(PACKED, placed)  # type: ignore[misc]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def out_not_last(placed: Placed, out: keys.Out, attempt: keys.Attempt) -> None: ...
async def batch_out(placed: list[Placed], out: keys.Out) -> None: ...


ORDERS = InboxQueue(Order, "orders.placed")


def check_out_slots(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(app.include(broker, subscriber(ORDERS)(pack)), Mount)
    assert_type(app.include(broker, subscriber(ORDERS.transactional())(pack_in_tx)), Mount)
    assert_type(subscriber(ORDERS)(out_not_last), NotAHandler)
    assert_type(subscriber(ORDERS.batch(10))(batch_out), BatchTakesNoRowKeys)
    app.include(broker, subscriber(ORDERS)(out_not_last))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    app.include(broker, subscriber(ORDERS.batch(10))(batch_out))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- subscriptions by name ------------------------------------------------------------------------


async def on_placed(placed: Placed, attempt: keys.Attempt, out: keys.Out) -> HandlerOutcome: ...
async def on_batch(placed: list[Placed], pool: keys.Pool) -> None: ...
async def on_placed_in_tx(placed: Placed, tx: keys.Tx) -> None: ...
async def on_row(row: Order) -> None: ...


def check_by_name(app: App, sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres]) -> None:
    by_name = subscriber(RoutedQueue("orders.placed").workers(4))(on_placed)
    assert_type(
        by_name,
        RoutedSubscriber[Callable[[Placed, keys.Attempt, keys.Out], Awaitable[HandlerOutcome]]],
    )
    assert_type(app.include(sqlite, by_name), Mount)
    assert_type(app.include(pg, by_name), Mount)
    batched = subscriber(RoutedQueue("orders.placed").batch(10))(on_batch)
    assert_type(batched, RoutedSubscriber[Callable[[list[Placed], keys.Pool], Awaitable[None]]])
    assert_type(app.include(sqlite, batched), Mount)


def check_by_name_refusals(app: App, sqlite: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(RoutedQueue("orders.placed"))(on_placed_in_tx), TxNeedsTransactional)
    app.include(sqlite, subscriber(RoutedQueue("orders.placed"))(on_placed_in_tx))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    # Missing positional argument "never" in call to "transactional" of "RoutedQueue"
    RoutedQueue("orders.placed").transactional()  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def the_refusal_names_its_rule(never: ByNameNeverTransactional) -> None:
    assert_type(RoutedQueue("orders.placed").transactional(never), ByNameNeverTransactional)
