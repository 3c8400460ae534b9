"""``SqlBroker.from_url``: the database is known only when the program runs, so its broker is
a ``SqlBroker[AnyDatabase]``, which mounts and publishes what every database serves (the lease
and advisory forms at the default isolation level, in either mode) and refuses the rest, as the
constructor of the weakest database would.

A row lock mount reads: Argument 2 to "include" of "App" has incompatible type
"Subscriber[Locked, Plain, ..., Needs[Locked, RowLock, Default, Plain] | None]"; expected
"Subscriber[Any, Any, ..., tuple[RowOf[Lease | Advisory, Default], Plain | Transactional] |
None]"  [arg-type].
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, assert_type

from trinbox import (
    Advisory,
    App,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RowLock,
    Serializable,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import AnyDatabase, Mount


class Leased(Inbox[Lease], table="leased"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


class LeasedAtSerializable(Inbox[Lease, Serializable], table="serial"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class LeasedImmediately(Inbox[Lease, Immediate], table="immediate"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def on_bytes(body: bytes) -> None: ...
async def on_bytes_in_tx(body: bytes, tx: keys.Tx) -> None: ...


def check_from_url(app: App, url: str) -> None:
    broker = SqlBroker.from_url(url)
    assert_type(broker, SqlBroker[AnyDatabase])
    assert_type(app.include(broker, subscriber(InboxQueue(Leased, "q"))(on_bytes)), Mount)
    assert_type(app.include(broker, subscriber(InboxQueue(Keyed, "q"))(on_bytes)), Mount)
    in_tx = subscriber(InboxQueue(Leased, "q").transactional())(on_bytes_in_tx)
    assert_type(app.include(broker, in_tx), Mount)
    app.include(broker, subscriber(InboxQueue(Locked, "q"))(on_bytes))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    serial = subscriber(InboxQueue(LeasedAtSerializable, "q"))(on_bytes)
    app.include(broker, serial)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    immediate = subscriber(InboxQueue(LeasedImmediately, "q"))(on_bytes)
    app.include(broker, immediate)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def check_publishing(url: str) -> None:
    broker = SqlBroker.from_url(url)
    await broker.publish(Leased, b"x")
    await broker.publish(Keyed, b"x")
    await broker.publish(Locked, b"x")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    async with broker.transaction() as tx:
        await tx.publish(Leased, b"x")
        await tx.publish(Locked, b"x")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
