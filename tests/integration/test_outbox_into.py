"""A relay into another trinbox broker (``trinbox.outbox.into``), on every stand, the records'
queue in a second database of the stand: each committed record is written by its name where
that broker's routes lead it, its payload's bytes as they are and its id in its headers; a
send that took but whose mark did not (the relay tried again) writes the record twice, and a
tracked subscription there runs its handler once; a name no route leads is tried again after
the backoff, and nothing is lost once it is routed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated

import pytest
import trio

from trinbox import (
    Backoff,
    Group,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    keys,
    subscriber,
)
from trinbox.errors import HeaderRefused, NoRoute
from trinbox.outbox import ID_HEADER, Record, Tracker, into, relay
from trinbox.testing import settled

from .outbox_kit import OrderEvents, OrderPlaced, records
from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

FAST = Backoff.constant(0.05)
SEEN = Tracker("billing_seen")


def _str_dict() -> dict[str, str]:
    return {}


class Billing(Inbox[Lease], table="billing_jobs"):
    """The receiving service's queue: records arrive by name into its group."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


@dataclass
class Stands:
    source: Stand
    target: Stand


@pytest.fixture(params=STANDS)
def stands(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stands]:
    name: StandName = request.param
    (tmp_path / "target").mkdir()
    with fresh_stand(name, tmp_path) as source, fresh_stand(name, tmp_path / "target") as target:
        yield Stands(source, target)


async def test_records_relayed_twice_are_handled_once_in_the_other_database(
    stands: Stands,
) -> None:
    source, target = stands.source.broker(), stands.target.broker()
    target.route(Billing, "orders.*")
    sent: list[object] = []

    async def send_then_fail_once(record: Record) -> None:
        # The send takes, then the relay fails before its mark, as a relay killed between
        # the two would: the record is sent again.
        await into(target)(record)
        sent.append(record.id)
        if sent.count(record.id) == 1:
            raise RuntimeError("died after the send")

    to_billing = relay(InboxQueue(OrderEvents, "billing").backoff(FAST))(send_then_fail_once)
    handled: list[tuple[int, str]] = []

    @subscriber(InboxQueue(Billing, "orders.placed").tracked(SEEN))
    async def bill(order: OrderPlaced, headers: keys.Headers) -> None:
        handled.append((order.order, headers[ID_HEADER]))

    app = make_app()
    app.include(source, to_billing)
    app.include(target, bill)

    @app.on_startup
    async def create_tables() -> None:
        await source.create_tables(OrderEvents)
        await target.create_tables(Billing)
        await target.create_tables(SEEN)

    async with serving(app):
        for order in (1, 2):
            async with source.transaction() as tx:
                await tx.publish(
                    OrderEvents, OrderPlaced(order, f"sku-{order}"), name="orders.placed"
                )
        with trio.fail_after(20):
            await settled(app, to_billing, 4)  # two sends that failed after, two that took
            await settled(app, bill, 4)  # each record twice
        stats = app.statistics(bill)
    ids = [row[0] for row in records(stands.source)]
    assert records(stands.source) == [(i, "orders.placed", True) for i in ids]
    assert sorted(handled) == [(1, str(ids[0])), (2, str(ids[1]))]
    assert stats.acked == 4
    assert stands.target.value("SELECT count(*) FROM billing_jobs") == 0
    assert sorted(r for (r,) in stands.target.rows("SELECT record_id FROM billing_seen")) == sorted(
        str(i) for i in ids
    )


async def test_an_unrouted_name_waits_for_its_route_and_is_not_lost(stands: Stands) -> None:
    source, target = stands.source.broker(), stands.target.broker()
    target.route(Billing, "orders.*")
    failures: list[BaseException] = []
    send = into(target)

    async def sink(record: Record) -> None:
        try:
            await send(record)
        except NoRoute as exc:
            failures.append(exc)
            target.route(Billing, "refunds.*")  # the fix, made while the relay retries
            raise

    to_billing = relay(InboxQueue(OrderEvents, "billing").backoff(FAST))(sink)
    app = make_app()
    app.include(source, to_billing)
    app.add_broker(target)  # served by the app, with no subscription of its own here

    @app.on_startup
    async def create_tables() -> None:
        await source.create_tables(OrderEvents)
        await target.create_tables(Billing)

    async with serving(app):
        async with source.transaction() as tx:
            await tx.publish(OrderEvents, OrderPlaced(3, "sku-3"), name="refunds.issued")
        with trio.fail_after(20):
            await settled(app, to_billing, 2)
    assert len(failures) == 1
    assert "add .route(Row, 'refunds.issued') to the broker" in str(failures[0])
    ((name, headers),) = stands.target.rows("SELECT name, headers FROM billing_jobs")
    record_id = records(stands.source)[0][0]
    assert name == "refunds.issued"
    assert (json.loads(headers) if isinstance(headers, str) else headers) == {
        ID_HEADER: str(record_id)
    }
    assert records(stands.source)[0][2]  # marked processed once it was routed


async def test_a_receiving_table_without_headers_refuses_the_record(stands: Stands) -> None:
    class Bare(Inbox[Lease], table="bare_jobs"):
        id: Annotated[int, Id(generated=True)]
        name: Annotated[str, Group()]
        retry_after: Annotated[datetime, RetryAfter(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()] = None
        payload: Annotated[bytes, Payload()]

    target = stands.target.broker()
    target.route(Bare, "orders.*")
    record = Record(id=1, name="orders.placed", payload=b"{}", headers={ID_HEADER: "1"}, attempt=1)
    app = make_app()
    app.add_broker(target)

    @app.on_startup
    async def create_tables() -> None:
        await target.create_tables(Bare)

    async with serving(app):
        with pytest.raises(HeaderRefused, match="trinbox-outbox-id"):
            await into(target)(record)
    assert stands.target.value("SELECT count(*) FROM bare_jobs") == 0
