"""Routes and subscriptions by name without a database: which route a name takes (an exact
route beats a prefix, the longer prefix the shorter, a pattern routed again takes the last
route), and every refusal of routes, publishes by name, subscriptions by name and replies, each
with the rule, what was found and the fix (docs/reference.md#routes)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, cast

import pytest

from trinbox import (
    Advisory,
    App,
    Attempt,
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
from trinbox._api.handles import Out
from trinbox._api.routes import Routes, make_route
from trinbox._engine import startup
from trinbox.errors import DeclarationError, NoRoute, TransactionHeld, UnsupportedForm
from trinbox.typing import Subscriber


class Order(Inbox[Lease], table="orders"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Invoice(Inbox[Lease], table="invoices"):
    id: Annotated[int, Id(generated=True)]
    kind: Annotated[str, Group()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Audit(Inbox[Lease], table="audit_jobs"):
    """One queue (no Group field): a name routed here only picks the table."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Ticket(Inbox[Advisory], table="tickets", advisory_lock="ticket-{id}"):
    """Row mode: no Payload field."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Placed:
    order: int


def broker() -> SqlBroker[Any]:
    return SqlBroker.sqlite("sqlite:///never.db")


def refused(message: str) -> pytest.RaisesExc[DeclarationError]:
    return pytest.raises(DeclarationError, match=re.escape(message))


# -- which route a name takes ----------------------------------------------------------------


def test_an_exact_route_beats_a_prefix_and_the_longer_prefix_the_shorter() -> None:
    b = broker()
    every = b.route(Audit, "*")
    orders = b.route(Order, "orders.*")
    invoices = b.route(Invoice, "orders.invoice.*")
    placed = b.route(Invoice, "orders.placed")
    found = b.routes.find
    assert found("orders.placed") is placed
    assert found("orders.invoice.sent") is invoices
    assert found("orders.invoiced") is orders  # "orders.invoice." is not its prefix
    assert found("orders.") is orders
    assert found("users.created") is every
    assert found("orders") is every  # "orders.*" takes names after "orders." only


def test_a_pattern_routed_again_takes_the_last_route() -> None:
    b = broker()
    b.route(Order, "orders.placed")
    last = b.route(Invoice, "orders.placed")
    b.route(Order, "orders.*")
    prefix = b.route(Invoice, "orders.*")
    assert b.routes.find("orders.placed") is last
    assert b.routes.find("orders.shipped") is prefix
    assert [r.pattern for r in b.routes] == ["orders.placed", "orders.*"]


def test_an_unrouted_name_raises_no_route_naming_the_fix_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    routes = Routes()
    routes.add(make_route(Order, "orders.*", object, where="route"))
    with caplog.at_level(logging.WARNING, "trinbox.publish"), pytest.raises(NoRoute) as raised:
        routes.lead("users.created", where="publish_named")
    assert str(raised.value) == (
        "publish_named: no route leads the name 'users.created' to a table (routed: "
        "'orders.*'); add .route(Row, 'users.created') to the broker, or a prefix route like "
        ".route(Row, 'users.*')"
    )
    assert raised.value.name == "users.created"
    assert isinstance(raised.value, DeclarationError)
    assert [r.getMessage() for r in caplog.records] == [str(raised.value)]


def test_a_route_stands_for_its_name_and_a_prefix_route_for_none() -> None:
    b = broker()
    placed = b.route(Order, "orders.placed", Placed)
    every = b.route(Order, "orders.*")
    assert b.routes.lead(placed, where="here") == ("orders.placed", placed)
    assert placed.message is Placed and every.message is object
    with refused(
        "a prefix route leads many names and publishes none by itself, found <Route "
        "'orders.*' into Order of object> where a name goes; pass the name, like "
        "'orders.created'"
    ):
        b.routes.lead(every, where="here")


# -- refused routes ----------------------------------------------------------------------------


def test_a_route_into_a_row_mode_table_is_refused() -> None:
    with refused(
        "route(Ticket, 'tickets.*'): tickets (Ticket) lends no payload, so no column "
        "holds a message's bytes; route a table with a Payload field, or publish this "
        "table's rows with broker.publish(Ticket, field=...)"
    ):
        broker().route(Ticket, "tickets.*")


@pytest.mark.parametrize("pattern", ["", "orders*.*", "**", "*orders"])
def test_a_pattern_has_one_star_at_its_end(pattern: str) -> None:
    with refused(
        f"route(Order, {pattern!r}): a route's pattern is a name ('orders.created') or a "
        f"prefix ending in one '*' ('orders.*', or '*' for every name), found {pattern!r}"
    ):
        broker().route(Order, pattern)


def test_a_route_takes_a_row_class_the_dialect_serves() -> None:
    with pytest.raises(UnsupportedForm):
        broker().route(cast("type[Order]", Locked), "locked.*")
    with refused("a queue is declared by a subclass of Inbox, found 'orders'"):
        broker().route(cast("type[Order]", "orders"), "orders.*")
    with refused("a route leads names into a row class's table, found the instance"):
        instance = Order(id=1, name="x", attempt=1, locked_until=None, payload=b"")
        broker().route(cast("type[Order]", instance), "orders.*")


def test_a_publish_by_name_writes_its_name_into_the_group_field() -> None:
    b = broker()
    b.route(Order, "orders.*")
    b.route(Audit, "audit.*")
    spec, fields = b._routed("orders.placed", {"attempt": 1}, where="here")  # pyright: ignore[reportPrivateUsage]
    assert (spec.table, fields) == ("orders", {"attempt": 1, "name": "orders.placed"})
    # The name only picks a table without a Group field.
    spec, fields = b._routed("audit.x", {}, where="here")  # pyright: ignore[reportPrivateUsage]
    assert (spec.table, fields) == ("audit_jobs", {})
    with refused(
        "here: a message published by name goes into the Group field name of orders (Order) as "
        "its name, found name='other' beside the name 'orders.placed'; leave name= "
        "out, or publish the name 'other'"
    ):
        b._routed("orders.placed", {"name": "other"}, where="here")  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("name", ["", "orders.*", 3])
def test_a_published_name_is_a_name(name: object) -> None:
    b = broker()
    b.route(Order, "*")
    with refused("publish_named: the name is a message name, a non-empty str without '*'"):
        b._routed(cast("str", name), {}, where="publish_named")  # pyright: ignore[reportPrivateUsage]


# -- subscriptions by name ----------------------------------------------------------------------


async def on_placed(placed: Placed, attempt: keys.Attempt) -> None:
    pass


def test_a_subscription_by_name_mounts_the_group_of_its_name() -> None:
    b = broker()
    b.route(Order, "orders.*")
    by_name = subscriber(RoutedQueue("orders.placed").workers(3).lease(60).poll_interval(5))(
        on_placed
    )
    app = App()
    mount = app.include(b, by_name)
    queue = mount.subscriber.queue
    assert (queue.row, queue.name, queue.group) == (Order, "orders.placed", "orders.placed")
    assert (queue.worker_count, queue.lease_for, queue.poll_every) == (
        3,
        timedelta(seconds=60),
        timedelta(seconds=5),
    )
    assert mount.subscriber.routed is by_name
    assert repr(by_name) == "<Subscriber on_placed by name 'orders.placed'>"
    startup.check(
        f"subscription {queue.name!r}", b, mount.subscriber, max_attempts=None, dead_letter=None
    )


def test_a_subscription_by_name_needs_its_route_first() -> None:
    by_name = subscriber(RoutedQueue("orders.placed"))(on_placed)
    with pytest.raises(
        NoRoute,
        match=re.escape(
            "app.include(broker, <Subscriber on_placed by name 'orders.placed'>): no route leads "
            "the name 'orders.placed' to a table (routed: none); add .route(Row, 'orders.placed')"
        ),
    ):
        App().include(broker(), by_name)


def test_a_subscription_by_name_needs_a_group_field() -> None:
    b = broker()
    b.route(Audit, "audit.*")
    with refused(
        "a subscription by name serves the rows of its name, found the name 'audit.x' routed "
        "into audit_jobs (Audit), which has no Group field to tell them from the rows of "
        "other names; subscribe with InboxQueue(Audit, 'audit.x') to serve the whole table, or "
        "route the name into a table with a Group field"
    ):
        App().include(b, subscriber(RoutedQueue("audit.x"))(on_placed))


def test_a_subscription_by_name_has_no_dead_letters() -> None:
    b = broker()
    b.route(Order, "orders.*")
    mount = App().include(b, subscriber(RoutedQueue("orders.placed"))(on_placed))
    rule = (
        "<Subscriber on_placed by name 'orders.placed'>: a subscription by name has no dead "
        "letter destination, found {} on its mount; subscribe with InboxQueue(Row, "
        "'orders.placed') to cap its attempts and move spent rows"
    )
    with refused(rule.format(".max_attempts(3)")):
        mount.max_attempts(3)
    with refused(rule.format(".dead_letter('orders.dead')")):
        mount.dead_letter("orders.dead")


def test_a_subscription_by_name_is_never_transactional() -> None:
    with refused(
        "a subscription by name is never transactional, found "
        "RoutedQueue('orders.placed').transactional(); subscribe with "
        "InboxQueue(Row, 'orders.placed').transactional() instead"
    ):
        RoutedQueue("orders.placed").transactional()  # type: ignore[call-arg]


async def on_placed_in_tx(placed: Placed, tx: keys.Tx) -> None:
    pass


async def on_row(ticket: Order) -> None:
    pass


def test_a_handler_by_name_is_checked_against_the_routed_table_at_startup() -> None:
    b = broker()
    b.route(Order, "orders.*")
    app = App()
    for handler, rule in [
        (on_placed_in_tx, "keys.Tx, the delivery's transaction, is lent only in transactional"),
        (on_row, "orders (Order) has a Payload field, so its handler takes the decoded"),
    ]:
        mount = app.include(b, subscriber(RoutedQueue("orders.placed"))(handler))  # type: ignore[call-overload]
        with refused(rule):
            startup.check("here", b, mount.subscriber, max_attempts=None, dead_letter=None)


def test_a_subscription_by_name_names_one_message() -> None:
    with refused(
        "a subscription by name (RoutedQueue) names one message; its name is a message name, "
        "a non-empty str without '*', found 'orders.*'"
    ):
        RoutedQueue("orders.*")


def test_a_lease_on_a_routed_table_without_one_is_refused_at_the_mount() -> None:
    b = SqlBroker.postgres("postgresql://localhost/never")
    b.route(Locked, "locked.*")
    with refused("only a lease table takes .lease(..)"):
        App().include(b, subscriber(RoutedQueue("locked.x").lease(30))(on_placed))


# -- replies ------------------------------------------------------------------------------------


def test_replies_go_with_the_ack_only() -> None:
    outcome = HandlerOutcome.ack().reply("orders.packed", Placed(1)).reply("audit.x", b"raw")
    assert [(r.name, r.message) for r in outcome.replies] == [
        ("orders.packed", Placed(1)),
        ("audit.x", b"raw"),
    ]
    assert HandlerOutcome.ack() == HandlerOutcome("ack")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "follow-up messages are written with the ack, found retry()"
            ".reply('orders.packed', ..); reply from HandlerOutcome.ack()"
        ),
    ):
        HandlerOutcome.retry().reply("orders.packed", Placed(1))
    with pytest.raises(ValueError, match="follow-up messages are written with the ack"):
        HandlerOutcome("drop", None, outcome.replies)
    with refused("a reply's name is a message name, a non-empty str without '*', found 'a*'"):
        HandlerOutcome.ack().reply("a*", Placed(1))


def test_out_slots_refuse_an_unrouted_name_at_the_call_and_close_at_settlement() -> None:
    routes = Routes()
    routes.add(make_route(Order, "orders.*", object, where="route"))
    out = Out(routes)
    out.reply("orders.packed", Placed(1), delay=None, attempt=2)
    unrouted = re.escape("keys.Out.reply: no route leads the name 'users.x'")
    with pytest.raises(NoRoute, match=unrouted):
        out.reply("users.x", Placed(2))
    [reply] = out.take()
    assert (reply.name, reply.message, dict(reply.columns)) == (
        "orders.packed",
        Placed(1),
        {"attempt": 2},
    )
    with pytest.raises(TransactionHeld, match=re.escape("keys.Out's reply")):
        out.reply("orders.packed", Placed(3))


async def out_first(placed: Placed, out: keys.Out, attempt: keys.Attempt) -> None:
    pass


async def batch_out(placed: list[Placed], out: keys.Out) -> None:
    pass


def check(sub: object) -> None:
    mounted = cast("Subscriber[Any, Any]", sub)
    startup.check("here", broker(), mounted, max_attempts=None, dead_letter=None)


def test_out_goes_last_and_never_in_a_batch() -> None:
    with refused(
        "here: keys.Out is a handler's last parameter, found attempt: keys.Attempt after it; "
        "move the keys.Out parameter to the end"
    ):
        check(subscriber(InboxQueue(Order, "orders"))(out_first))
    with refused(
        "here: a batch handler replies in no form (its follow-ups would belong to no one row), "
        "found keys.Out; publish them with broker.publish_named (keys.Pool's work, committed "
        "on its own), or drop .batch(..)"
    ):
        check(subscriber(InboxQueue(Order, "orders").batch(5))(batch_out))
