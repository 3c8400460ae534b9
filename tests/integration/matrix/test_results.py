"""Results on every stand and form (issue 20, item 5): a handler's ``HandlerOutcome.ack(result)``
is written into the row's Result field by the ack statement, in the broker's codec, and
``broker.wait(Row, id)`` returns how the row settled — ack with the result decoded into the
field's type, drop, dead letter (a group, through its OriginGroup, or a table) — polling on the
broker's clock, so virtual time waits no real time. A wait in a handler of the row's own queue
is refused; a result on a table without a Result field is the handler's failure."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any
from uuid import UUID, uuid4

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
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
    Result,
    RetryAfter,
    RowLock,
    subscriber,
)
from trinbox.errors import DeclarationError
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells


@dataclass
class Order:
    n: int


@dataclass
class Receipt:
    total: int
    lines: list[str]


class RowLockedOrder(Inbox[RowLock], table="order_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LeasedOrder(Inbox[Lease], table="order_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LockedOrder(Inbox[Advisory], table="order_jobs", advisory_lock="order_jobs-{id}"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class RowLockedPlainOrder(Inbox[RowLock], table="plain_orders"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LeasedPlainOrder(Inbox[Lease], table="plain_orders"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class LockedPlainOrder(Inbox[Advisory], table="plain_orders", advisory_lock="plain-{id}"):
    id: Annotated[int, Id()]
    attempt: Annotated[int, Attempt(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


PLAIN_ORDERS: dict[str, type[Any]] = {
    "row_lock": RowLockedPlainOrder,
    "lease": LeasedPlainOrder,
    "advisory": LockedPlainOrder,
}
"""Group-less: a spent row moves into the dead letter table ``plain_orders_dead``."""

ORDERS: dict[str, type[Any]] = {
    "row_lock": RowLockedOrder,
    "lease": LeasedOrder,
    "advisory": LockedOrder,
}


async def test_wait_returns_the_ack_with_its_result_a_drop_and_a_dead_letter(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=1)
    row = ORDERS[case.form]
    handled: list[int] = []

    @subscriber(InboxQueue(row, "orders"))
    async def price(order: Order) -> HandlerOutcome | None:
        handled.append(order.n)
        await trio.sleep(30)  # the waits below start before the rows settle
        if order.n == 1:
            return HandlerOutcome.ack(Receipt(total=42, lines=["a", "b"]))
        if order.n == 2:
            return HandlerOutcome.drop()
        if order.n == 3:
            return HandlerOutcome.retry()  # max_attempts(1): into the dead letter group
        return None  # an ack without a result

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, price).max_attempts(1).dead_letter("orders.dead")
    async with serving(app):
        for n in (1, 2, 3, 4):
            await broker.publish(row, Order(n), id=n, queue="orders")
        with trio.fail_after(HOUR):
            acked = await broker.wait(row, 1)
            dropped = await broker.wait(row, 2)
            dead = await broker.wait(row, 3)
            bare = await broker.wait(row, 4)
            await settled(app, price, 4)
    assert sorted(handled) == [1, 2, 3, 4]
    assert acked.outcome == "ack"
    assert acked.result == Receipt(total=42, lines=["a", "b"])
    assert acked.row is not None and acked.row.receipt == Receipt(42, ["a", "b"])
    assert acked.row.processed_at is not None and acked.row.id == 1
    assert (dropped.outcome, dropped.result) == ("drop", None)
    assert dropped.row is not None and dropped.row.receipt is None
    assert (dead.outcome, dead.result) == ("dead_letter", None)
    assert dead.row is not None and (dead.row.queue, dead.row.origin) == ("orders.dead", "orders")
    assert (bare.outcome, bare.result) == ("ack", None)
    # The column holds the codec's JSON (an ack without a result: JSON null); a drop and a
    # dead letter leave it NULL.
    is_null = dict(case.stand.rows("SELECT id, receipt IS NULL FROM order_jobs"))
    assert {n: bool(v) for n, v in is_null.items()} == {1: False, 2: True, 3: True, 4: False}
    receipt = case.stand.value("SELECT receipt FROM order_jobs WHERE id = 1")
    assert (json.loads(receipt) if isinstance(receipt, str) else receipt) == {
        "total": 42,
        "lines": ["a", "b"],
    }


async def test_a_dead_letter_table_move_settles_the_wait(case: Case, clock: VirtualClock) -> None:
    broker = case.stand.broker(poll_interval=1)
    row = PLAIN_ORDERS[case.form]

    @subscriber(InboxQueue(row, "orders"))
    async def price(order: Order) -> HandlerOutcome:
        return HandlerOutcome.retry()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row, dead_letter="plain_orders_dead"))
    app.include(broker, price).max_attempts(1).dead_letter("plain_orders_dead")
    async with serving(app):
        await broker.publish(row, Order(1), id=7)
        with trio.fail_after(HOUR):
            found = await broker.wait(row, 7)
    assert (found.outcome, found.row, found.result) == ("dead_letter", None, None)
    assert case.stand.rows("SELECT id FROM plain_orders_dead") == [(7,)]


@cells(forms=["lease"])
async def test_a_batch_and_a_transactional_ack_write_their_results(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=1)
    row = ORDERS[case.form]

    @subscriber(InboxQueue(row, "orders").batch(4))
    async def price(orders: list[Order]) -> list[HandlerOutcome]:
        return [HandlerOutcome.ack(Receipt(o.n % 2, [])) for o in orders]

    @subscriber(InboxQueue(row, "single").transactional())
    async def alone(order: Order) -> HandlerOutcome:
        return HandlerOutcome.ack(Receipt(order.n, ["tx"]))

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, price)
    app.include(broker, alone)
    async with serving(app):
        for n in (1, 2, 3, 4):
            await broker.publish(row, Order(n), id=n, queue="orders")
        await broker.publish(row, Order(5), id=5, queue="single")
        with trio.fail_after(HOUR):
            results = [(await broker.wait(row, n)).result for n in (1, 2, 3, 4, 5)]
    assert results == [
        Receipt(1, []),
        Receipt(0, []),
        Receipt(1, []),
        Receipt(0, []),
        Receipt(5, ["tx"]),
    ]


@cells()
async def test_a_settlement_in_this_process_wakes_the_wait_before_its_poll(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)  # a poll would come an hour later
    row = ORDERS[case.form]

    @subscriber(InboxQueue(row, "orders"))
    async def price(order: Order) -> HandlerOutcome:
        await trio.sleep(30)  # the wait below reads the row unsettled first
        return HandlerOutcome.ack(Receipt(order.n, []))

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, price)
    async with serving(app):
        await broker.publish(row, Order(7), id=7, queue="orders")
        started = trio.current_time()
        with trio.fail_after(HOUR / 2):
            found = await broker.wait(row, 7)
        waited = trio.current_time() - started
    assert found.result == Receipt(7, [])
    assert 30 <= waited < 60


@cells(stands=["sqlite", "postgres"], forms=["lease"])
async def test_waiting_in_a_handler_of_the_rows_own_queue_is_refused(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    broker = case.stand.broker(poll_interval=1)
    row = ORDERS[case.form]
    errors: list[BaseException] = []

    @subscriber(InboxQueue(row, "orders"))
    async def price(order: Order) -> HandlerOutcome:
        try:
            await broker.wait(row, 2)
        except DeclarationError as exc:
            errors.append(exc)
        return HandlerOutcome.ack()

    @subscriber(InboxQueue(row, "other"))
    async def other(order: Order) -> HandlerOutcome:
        # Another queue's row: a handler may wait for it.
        found = await broker.wait(row, 1)
        return HandlerOutcome.ack(Receipt(found.row.id if found.row else 0, [found.outcome]))

    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.include(broker, price)
    app.include(broker, other)
    async with serving(app):
        await broker.publish(row, Order(1), id=1, queue="orders")
        await broker.publish(row, Order(2), id=2, queue="orders")
        await broker.publish(row, Order(3), id=3, queue="other")
        with trio.fail_after(HOUR):
            found = await broker.wait(row, 3)
    assert found.result == Receipt(1, ["ack"])
    assert len(errors) == 2
    assert str(errors[0]) == (
        "a handler waits for rows of other queues only (every worker of a saturated queue "
        "waiting on a row only a free worker would handle waits for ever), found "
        "broker.wait(LeasedOrder, 2) in a handler of order_jobs (group 'orders'); publish the "
        "row and return, and take its result in a handler of a queue of its own (a reply), "
        "or wait outside the handler"
    )


@cells(forms=["lease"])
async def test_a_result_on_a_table_without_a_result_field_is_a_failure(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.finished, "emails"))
    async def send(email: Order) -> HandlerOutcome:
        return HandlerOutcome.ack(Receipt(1, []))

    app = make_app()
    app.include(broker, send).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.finished, Order(1), name="emails", customer="c")
        with trio.fail_after(60):
            await settled(app, send, 1)
    assert app.statistics(send).dead_lettered == 1
    (error,) = {str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1]}
    assert error.endswith(
        "a result is written into the row's Result field, found HandlerOutcome.ack(Receipt("
        "total=1, lines=[])) on email_jobs (LeasedFinished), which has none; add a Result "
        "field (result: Annotated[Receipt | None, Result()] = None, beside a ProcessedAt "
        "field), or return HandlerOutcome.ack()"
    )
    with pytest.raises(DeclarationError, match=r"^broker\.wait reads how a row settled from"):
        await broker.wait(case.finished, 1)


def test_a_result_field_needs_a_processed_at_field() -> None:
    with pytest.raises(
        DeclarationError,
        match=r"a Result field is read after the row's ack, so the row is kept, found Result "
        r"on 'receipt' of a table without a ProcessedAt field",
    ):

        class Deleted(Inbox[Lease], table="deleted_jobs"):
            id: Annotated[int, Id()]
            locked_until: Annotated[datetime | None, LockedUntil()]
            receipt: Annotated[Receipt | None, Result()] = None
            payload: Annotated[bytes, Payload()]


async def test_waits_go_by_the_brokers_clock_and_a_bound_says_too_slow(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=1)
    row = ORDERS[case.form]
    app = make_app()
    app.on_startup(lambda: broker.create_tables(row))
    app.add_broker(broker)
    async with serving(app):
        await broker.publish(row, Order(1), id=1, queue="nobody")
        start = trio.current_time()
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(timedelta(minutes=10).total_seconds()):
                await broker.wait(row, 1)
        assert trio.current_time() - start == pytest.approx(600)


class UuidOrder(Inbox[Lease], table="uuid_orders"):
    id: Annotated[UUID, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    receipt: Annotated[Receipt | None, Result()] = None
    payload: Annotated[bytes, Payload()]


@cells(forms=["lease"])
async def test_a_uuid_id_is_waited_for_as_the_publish_wrote_it(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=1)

    @subscriber(InboxQueue(UuidOrder, "orders"))
    async def price(order: Order) -> HandlerOutcome:
        return HandlerOutcome.ack(Receipt(order.n, []))

    app = make_app()
    app.on_startup(lambda: broker.create_tables(UuidOrder))
    app.include(broker, price)
    job = uuid4()
    async with serving(app):
        await broker.publish(UuidOrder, Order(9), id=job)
        with trio.fail_after(HOUR):
            found = await broker.wait(UuidOrder, job)
    assert found.result == Receipt(9, [])
    assert found.row is not None and found.row.id == job
