"""The outbox as type checkers check it: a record class (``Outbox``) is a lease row class its
service writes like any other (``tx.publish``, ``insert_statement``); ``relay(queue)(sink)``
takes a plain, single queue of a record class and an async sink taking a ``Record``, and makes
a subscriber every dialect mounts.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py.
pytest never collects this file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, assert_type

from trinbox import (
    App,
    Default,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    keys,
)
from trinbox._api.handles import Tx
from trinbox._api.queue import Needs
from trinbox.outbox import (
    CustomRelay,
    Outbox,
    Record,
    RelayFactory,
    Sink,
    Tracker,
    custom_relay,
    into,
    relay,
)
from trinbox.typing import Mount, Plain, Single, Subscriber, Transactional


class Events(Outbox, table="events"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Jobs(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Placed:
    order: int


async def send(record: Record) -> None:
    assert_type(record.id, object)
    assert_type(record.name, str)
    assert_type(record.payload, bytes)
    assert_type(record.headers, Mapping[str, str])
    assert_type(record.attempt, int)


async def send_later(record: Record) -> HandlerOutcome:
    return HandlerOutcome.ack()


def send_now(record: Record) -> None: ...


async def send_text(text: str) -> None: ...


class Producer:
    async def __call__(self, record: Record) -> None: ...


queue = InboxQueue(Events, "webhook")
assert_type(relay(queue), RelayFactory[Events])
assert_type(relay(queue, names=["orders.*", "payments.refunded"]), RelayFactory[Events])
webhook = relay(queue)(send)
assert_type(
    webhook,
    Subscriber[
        Events,
        Plain,
        Callable[[Events], Awaitable[HandlerOutcome | None]],
        Needs[Events, Lease, Default, Plain] | None,
    ],
)
later = relay(queue.workers(4).lease(60))(send_later)
produced = relay(queue)(Producer())


@relay(InboxQueue(Events, "decorated"), names=["orders.*"])
async def decorated(record: Record) -> None: ...


def check_mounts(app: App) -> None:
    sqlite = SqlBroker.sqlite("sqlite:///x.db")
    pg = SqlBroker.postgres("postgresql://db/x")
    my = SqlBroker.mysql("mysql://db/x")
    anywhere = SqlBroker.from_url("sqlite:///x.db")
    assert_type(app.include(sqlite, webhook), Mount)
    assert_type(app.include(pg, later).max_attempts(5).dead_letter("dead"), Mount)
    assert_type(app.include(my, produced), Mount)
    assert_type(app.include(anywhere, decorated), Mount)


async def check_writes(broker: SqlBroker[Any], tx: Tx[Any]) -> None:
    await tx.publish(Events, Placed(1), name="orders.placed")
    await broker.publish(Events, Placed(1), name="orders.placed")
    _, params = broker.insert_statement(Events, Placed(1), name="orders.placed")
    assert_type(params, tuple[object, ...])


# Value of type variable "OB" of "relay" cannot be "Jobs": a relay serves an Outbox table
relay(InboxQueue(Jobs, "jobs"))  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
# a relay takes a plain queue of single records
relay(queue.transactional())  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
relay(queue.batch(10))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
# a sink is async and takes a Record
relay(queue)(send_now)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
relay(queue)(send_text)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def check_into(source: SqlBroker[Any], target: SqlBroker[Any]) -> None:
    to_target = relay(queue)(into(target))
    assert_type(into(target), Sink)
    assert_type(Tracker("seen", consumer="billing"), Tracker)
    tracked = InboxQueue(Jobs, "jobs").tracked(Tracker("seen"))
    assert_type(tracked, InboxQueue[Jobs, Plain, Single])
    assert_type(
        tracked.transactional().tracked(Tracker("seen")), InboxQueue[Jobs, Transactional, Single]
    )
    del to_target


# into takes a broker, a Tracker names its table
into("broker")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
InboxQueue(Jobs, "jobs").tracked("seen")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


class Legacy:
    async def fetch(self, tx: keys.Tx, limit: int) -> list[Record]:
        return []

    async def ack(self, tx: keys.Tx, record: Record) -> None: ...

    async def retry(self, tx: keys.Tx, record: Record, delay: timedelta) -> None: ...

    async def discard(self, tx: keys.Tx, record: Record) -> None: ...

    async def recover(self, tx: keys.Tx) -> int:
        return 0


class Half:
    async def fetch(self, tx: keys.Tx, limit: int) -> list[Record]:
        return []


def check_custom_relay(broker: SqlBroker[Any], app: App) -> None:
    made = custom_relay(broker, Legacy(), send_later, workers=2, max_attempts=5)
    assert_type(made, CustomRelay)
    assert_type(app.background(made), CustomRelay)
    assert_type(made.statistics.sent, int)
    # custom events have all five methods
    custom_relay(broker, Half(), send_later)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
