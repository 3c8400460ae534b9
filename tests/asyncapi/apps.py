"""Apps whose AsyncAPI documents the tests render: one handler per kind of message type, on
brokers of all three databases (nothing connects: a document needs no database).

``app`` is also the target of the ``trinbox asyncapi`` subprocess tests
(``tests.asyncapi.apps:app``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypedDict

import msgspec
import pydantic

from trinbox import (
    Advisory,
    App,
    AppInfo,
    Attempt,
    Generated,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    RawCodec,
    RetryAfter,
    RoutedQueue,
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.outbox import Outbox, Record, relay

# Credentials that must never reach the document: a user, an escaped password holding an @
# and a colon, a password in the query, and the database's name.
PG_URL = (
    "postgresql://ledger_admin:p%40ss%3Aw0rd-PG@pg.internal.example:6543/ledger_db"
    "?sslpassword=tls-secret-PG&application_name=shop"
)
MYSQL_URL = "mysql://shop_owner:hunter2-MY@[2001:db8::7]:3307/shop_db?password=query-secret-MY"
SQLITE_URL = "sqlite:////var/lib/private-dir/secret-jobs.db"
SECRETS = (
    "ledger_admin",
    "p%40ss",
    "p@ss",
    "w0rd-PG",
    "tls-secret-PG",
    "ledger_db",
    "shop_owner",
    "hunter2-MY",
    "query-secret-MY",
    "shop_db",
    "private-dir",
    "secret-jobs",
    "/var/lib",
)


class Job(Inbox[Lease], table="jobs", schema="work"):
    """A row of work.jobs: the group column ``queue`` is the queue."""

    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked_jobs"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group(fifo=True)]
    dead_from: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class Signup(Inbox[Advisory], table="signups", advisory_lock="signup-{email}"):
    """A sign-up, handled as a row (no Payload field)."""

    id: Annotated[int, Id(generated=True)]
    email: str
    plan: str | None
    created: Annotated[datetime, Generated()]
    attempt: Annotated[int, Attempt(generated=True)]


# -- message types, one of each kind ----------------------------------------------------------


class Line(msgspec.Struct):
    """One line of an order."""

    sku: str
    quantity: int = 1


class Order(msgspec.Struct):
    """An order (msgspec)."""

    lines: list[Line]
    note: str | None = None


class Invoice(pydantic.BaseModel):
    """An invoice (pydantic)."""

    number: str
    total_cents: int


@dataclass
class Parcel:
    """A parcel (dataclass)."""

    weight_grams: int
    to: str


class Refund(TypedDict):
    order: str
    cents: int


@subscriber(InboxQueue(Job, "orders").workers(3).poll_interval(0.25))
async def take_order(order: Order, attempt: keys.Attempt) -> HandlerOutcome:
    """Take one order."""
    return HandlerOutcome.ack()


@subscriber(InboxQueue(Job, "invoices"))
async def send_invoice(invoice: Invoice) -> None:
    """Send an invoice."""


@subscriber(InboxQueue(Job, "parcels").batch(10).lease(60))
async def ship_parcels(parcels: list[Parcel]) -> None:
    """Ship parcels, ten at a time."""


@subscriber(InboxQueue(Locked, "refunds").transactional())
async def refund(refund: Refund, tx: keys.Tx) -> None:
    pass


@subscriber(InboxQueue(Locked, "blobs").codec(RawCodec()))
async def store_blob(blob: bytes) -> None:
    pass


@subscriber(InboxQueue(Signup, "signups"))
async def welcome(signup: Signup) -> None:
    """Welcome a new user."""


def brokers() -> tuple[SqlBroker[Any], SqlBroker[Any], SqlBroker[Any]]:
    return (
        SqlBroker.postgres(PG_URL, listen_notify=True),
        SqlBroker.mysql(MYSQL_URL),
        SqlBroker.sqlite(SQLITE_URL),
    )


def app() -> App:
    """Every kind of handler: payload handlers on PostgreSQL, row lock and row mode handlers
    on MySQL, a lease table on SQLite too."""
    pg, my, lite = brokers()
    shop = App(AppInfo("shop", "2.1.0", "Orders, invoices, parcels and refunds."))
    shop.include(pg, take_order).max_attempts(5).dead_letter("orders.dead")
    shop.include(pg, send_invoice)
    shop.include(pg, ship_parcels)
    shop.include(my, refund).max_attempts(3).dead_letter("refunds.dead")
    shop.include(my, store_blob)
    shop.include(my, welcome)
    shop.include(lite, take_order)
    return shop


class OrderEvents(Outbox, table="order_events"):
    """What the shop announces outside its database."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@relay(InboxQueue(OrderEvents, "webhook"), names=["orders.*", "payments.refunded"])
async def to_webhook(record: Record) -> None:
    """Send the shop's order events to its webhook."""


def relayed() -> App:
    """A relay of an outbox record table, on PostgreSQL."""
    shop = App(AppInfo("relayed"))
    shop.include(SqlBroker.postgres(PG_URL), to_webhook)
    return shop


@subscriber(RoutedQueue("orders.placed"))
async def place(order: Order, out: keys.Out) -> HandlerOutcome:
    """Place an order, and hand it on by name."""
    return HandlerOutcome.ack().reply("orders.packed", order)


def routed() -> App:
    """Routes by name: a subscription by name on the group its route leads it to, and a
    subscription of a table without groups that names route into."""
    pg, _, lite = brokers()
    pg.route(Job, "orders.*")
    pg.route(Job, "orders.invoiced")
    lite.route(Job, "audit.*")
    shop = App(AppInfo("routed"))
    shop.include(pg, place)
    shop.include(pg, send_invoice)  # group "invoices": no route leads a name there
    return shop
