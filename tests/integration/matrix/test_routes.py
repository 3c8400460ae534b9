"""Routes, subscriptions by name and replies on every stand and form
(docs/reference.md#routes): a publish by name lands in the group of its name and wakes the
subscription by name reading it; a pipeline of two queues hands each message on by reply; a
transactional reply commits with the ack and never without it, a plain one is written before
the ack (at least once); every outcome but ack discards the follow-ups.

Every subscription waits an hour between polls, on virtual time; the first test pins that the
wake of a publish by name brings its row at once. (Where two subscriptions of one table claim
at the same moment on MariaDB, one may pass over a row of the other's group until its next
poll, as tests/integration/matrix/test_wake.py says: the tests of two queues wait out such a
poll in virtual time.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, cast

import pytest
import trio

from trinbox import (
    FailurePolicy,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OnFailure,
    Payload,
    RoutedQueue,
    keys,
    subscriber,
)
from trinbox.errors import DatabaseError
from trinbox.testing import VirtualClock, settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import HOUR, insert_emails
from .schema import EMAIL_REFS


@dataclass
class Placed:
    order: int


@dataclass
class Packed:
    order: int


def mounted(
    queue: InboxQueue[Any, Any], handler: Callable[..., Awaitable[object]], *, transactional: bool
) -> Subscriber[Any, Any]:
    """The subscriber of ``handler`` on ``queue``, made transactional or not."""
    if transactional:
        return cast("Subscriber[Any, Any]", subscriber(queue.transactional())(handler))
    return cast("Subscriber[Any, Any]", subscriber(queue)(handler))


def names_and_payloads(stand: Stand) -> list[tuple[str, object]]:
    """The email_jobs rows as (group, decoded payload), in id order."""
    rows = stand.rows("SELECT name, payload FROM email_jobs ORDER BY job_id")
    return [(name, json.loads(bytes(payload))) for name, payload in rows]


async def test_a_publish_by_name_wakes_the_subscription_by_name_of_its_group(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    placed = broker.route(case.email, "orders.placed", Placed)
    broker.route(case.email, "orders.*")
    seen: list[tuple[Placed, float]] = []

    @subscriber(RoutedQueue("orders.placed"))
    async def on_placed(message: Placed) -> None:
        seen.append((message, trio.current_time()))

    app = make_app()
    app.include(broker, on_placed)
    async with serving(app):
        await broker.publish_named(placed, Placed(1), customer="c1")  # the exact route
        await broker.publish_named("orders.paid", {"order": 2}, customer="c2")  # the prefix's
        async with broker.transaction() as tx:
            await tx.publish_named("orders.placed", Placed(3), customer="c3")
        with trio.fail_after(HOUR / 2):
            await settled(app, on_placed, 2)
    # Woken, not polled: claimed with the virtual clock still near zero.
    assert sorted(m.order for m, _ in seen) == [1, 3]
    assert all(at < 1.0 for _, at in seen)
    # The prefix route's name is its own group, which nothing here reads.
    assert names_and_payloads(case.stand) == [("orders.paid", {"order": 2})]


async def test_a_pipeline_of_two_queues_hands_each_message_on_by_reply(
    case: Case, clock: VirtualClock
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    broker.route(case.email, "orders.*")
    packed = broker.route(case.email, "orders.packed", Packed)
    shipped: list[Packed] = []

    @subscriber(RoutedQueue("orders.placed").workers(2))
    async def pack(placed: Placed) -> HandlerOutcome:
        return HandlerOutcome.ack().reply(packed, Packed(placed.order * 10), customer="p")

    @subscriber(RoutedQueue("orders.packed"))
    async def ship(message: Packed) -> None:
        shipped.append(message)

    app = make_app()
    app.include(broker, pack)
    app.include(broker, ship)
    async with serving(app):
        for order in (1, 2, 3):
            await broker.publish_named("orders.placed", Placed(order), customer=f"c{order}")
        with trio.fail_after(3 * HOUR):
            await settled(app, ship, 3)
    assert sorted(m.order for m in shipped) == [10, 20, 30]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
async def test_out_slots_send_several_follow_ups_with_the_ack(
    case: Case, transactional: bool
) -> None:
    insert_emails(case.stand, [b'{"order": 1}'], name="orders.placed")
    broker = case.stand.broker(poll_interval=HOUR)
    broker.route(case.email, "orders.*")
    queue = InboxQueue(case.email, "orders.placed")

    async def split(placed: Placed, attempt: keys.Attempt, out: keys.Out) -> HandlerOutcome:
        out.reply("orders.packed", Packed(placed.order), customer="a")
        out.reply("orders.audit", {"order": placed.order, "attempt": attempt}, customer="b")
        return HandlerOutcome.ack().reply("orders.audit", {"order": -1}, customer="c")

    handle = mounted(queue, split, transactional=transactional)
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
    # In order: the out slots', then the outcome's.
    assert names_and_payloads(case.stand) == [
        ("orders.packed", {"order": 1}),
        ("orders.audit", {"order": 1, "attempt": 1}),
        ("orders.audit", {"order": -1}),
    ]


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
async def test_every_outcome_but_ack_discards_the_follow_ups(
    case: Case, transactional: bool, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [b'{"order": 1}', b'{"order": 2}'], name="orders.placed")
    broker = case.stand.broker(poll_interval=HOUR)
    broker.route(case.email, "orders.*")
    queue = InboxQueue(case.email, "orders.placed")
    outcomes = {1: [HandlerOutcome.retry(), HandlerOutcome.drop()]}

    async def handle(placed: Placed, out: keys.Out) -> HandlerOutcome:
        out.reply("orders.packed", Packed(placed.order), customer="x")
        if placed.order == 2:
            raise RuntimeError("boom")  # the default policy retries it later
        return outcomes[1].pop(0)

    sub = mounted(queue, handle, transactional=transactional)
    app = make_app()
    app.include(broker, sub)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, sub, 3)
    assert [name for name, _ in names_and_payloads(case.stand)] == ["orders.placed"]


@pytest.mark.parametrize(
    ("transactional", "written"), [(False, 2), (True, 1)], ids=["plain", "transactional"]
)
async def test_a_follow_up_commits_with_the_ack_on_a_transactional_mount_only(
    case: Case, transactional: bool, written: int, clock: VirtualClock
) -> None:
    stand = case.stand
    insert_emails(stand, [b'{"order": 1}'], name="orders.placed")
    stand.script(EMAIL_REFS[case.name])
    stand.execute("INSERT INTO email_refs (job_id) VALUES (1)")  # the first ack's DELETE fails
    broker = stand.broker(poll_interval=1, lease=2)
    broker.route(case.email, "orders.*")
    queue = InboxQueue(case.email, "orders.placed")
    packed_before: list[object] = []
    count = "SELECT count(*) FROM email_jobs WHERE name = 'orders.packed'"

    deliveries: list[int] = []

    async def handle(placed: Placed, pool: keys.Pool) -> HandlerOutcome:
        deliveries.append(placed.order)
        if len(deliveries) > 1:
            # What the first delivery's failed ack left; this one's ack will not fail.
            packed_before.append(await pool.fetchval(count))
            await pool.execute("DELETE FROM email_refs")
        return HandlerOutcome.ack().reply("orders.packed", Packed(placed.order), customer="p")

    sub = mounted(queue, handle, transactional=transactional)
    app = make_app()
    app.include(broker, sub)
    async with serving(app):
        with trio.fail_after(60):
            await settled(app, sub, 2)
        errors = [type(e).__name__ for e in app.statistics(sub).settle_errors]
    assert errors == ["IntegrityError"]
    # The failed ack rolled its follow-up back with it where it was written in the delivery's
    # transaction; written on its own before the ack, the follow-up stayed, and the next
    # delivery wrote it again.
    assert [int(str(n)) for n in packed_before] == [written - 1]
    assert int(stand.value(count)) == written
    assert stand.rows("SELECT * FROM email_jobs WHERE name = 'orders.placed'") == []


async def test_a_name_routed_into_a_table_without_groups_picks_the_table(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    broker.route(case.plain, "audit.*")
    seen: list[object] = []

    @subscriber(InboxQueue(case.plain, "audit"))
    async def audit(message: dict[str, int]) -> None:
        seen.append(message)

    app = make_app()
    app.include(broker, audit)
    async with serving(app):
        await broker.publish_named("audit.placed", {"order": 1}, tenant="t1")
        await broker.publish_named("audit.paid", {"order": 2}, tenant="t2")
        with trio.fail_after(10):
            await settled(app, audit, 2)
    assert sorted(seen, key=str) == [{"order": 1}, {"order": 2}]


class Lost(Inbox[Lease], table="lost_jobs"):
    """A table nobody created: a follow-up routed here fails to write."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
async def test_a_follow_up_that_fails_to_write_fails_the_delivery_by_its_policy(
    case: Case, transactional: bool, caplog: pytest.LogCaptureFixture
) -> None:
    insert_emails(case.stand, [b'{"order": 1}'], name="orders.placed")
    broker = case.stand.broker(poll_interval=HOUR)
    broker.route(case.email, "orders.*")
    broker.route(Lost, "lost.*")
    queue = InboxQueue(case.email, "orders.placed").on_failure(
        OnFailure(handler=FailurePolicy.DROP)
    )

    async def handle(placed: Placed, out: keys.Out) -> None:
        out.reply("orders.packed", Packed(placed.order), customer="a")
        out.reply("lost.parcel", Packed(placed.order))

    sub = mounted(queue, handle, transactional=transactional)
    app = make_app()
    app.include(broker, sub)
    with caplog.at_level(logging.WARNING, "trinbox.delivery"):
        async with serving(app):
            with trio.fail_after(10):
                await settled(app, sub, 1)
    assert app.statistics(sub).dropped == 1
    [record] = [r for r in caplog.records if r.name == "trinbox.delivery"]
    assert "writing the handler's follow-up messages failed; policy drop" in record.getMessage()
    assert isinstance(record.exc_info and record.exc_info[1], DatabaseError)
    # Written in the delivery's transaction, the first follow-up went with the failed one; on
    # its own, it was written before the second failed.
    names = [name for name, _ in names_and_payloads(case.stand)]
    assert names == ([] if transactional else ["orders.packed"])
