"""A tracked subscription (``InboxQueue(...).tracked(Tracker(...))``) on every stand and form,
plain and transactional: a record relayed twice runs its handler once, and its duplicate is
acked without it; a delivery without a record id runs untracked; a failed handling leaves the
record unseen, so its retry runs the handler; a duplicate handled at the same moment on a
transactional mount waits for the first and is acked without the handler; each consumer keeps
its own marks; and the startup refuses what a tracker cannot serve."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    App,
    Attempt,
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
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.errors import DeclarationError, SchemaError
from trinbox.outbox import ID_HEADER, Tracker
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells

TABLE = "tracked_jobs"
SEEN = Tracker("seen_records")
NAME = "orders.placed"
FAST = Backoff.constant(0.05)


def _str_dict() -> dict[str, str]:
    return {}


class TrackedLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


class TrackedLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


class TrackedKeyed(Inbox[Advisory], table=TABLE, advisory_lock="tracked-{id}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


class Untracked(Inbox[Lease], table="untracked_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]


TRACKED: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": TrackedLock,
    "lease": TrackedLease,
    "advisory": TrackedKeyed,
}


@dataclass
class Order:
    order: int


def _order(n: int) -> bytes:
    return json.dumps({"order": n}).encode()


async def _ready(broker: SqlBroker[Any], row: type[Inbox[Any, Any]], app: App) -> None:
    broker.route(row, "orders.*")

    @app.on_startup
    async def create_tables() -> None:
        await broker.create_tables(row)
        await broker.create_tables(SEEN)


def _queue(case: Case, transactional: bool, **options: Any) -> InboxQueue[Any, Any, Any]:
    queue: InboxQueue[Any, Any, Any] = InboxQueue(TRACKED[case.form], NAME).tracked(SEEN)
    queue = queue.backoff(FAST)
    if options.get("workers"):
        queue = queue.workers(options["workers"])
    return queue.transactional() if transactional else queue


def _seen(case: Case) -> list[tuple[str, str]]:
    return [
        (str(c), str(r))
        for c, r in case.stand.rows(
            "SELECT consumer, record_id FROM seen_records ORDER BY consumer, record_id"
        )
    ]


MODES = pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])


@cells()
@MODES
async def test_a_record_relayed_twice_runs_its_handler_once(
    case: Case, transactional: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "trinbox.delivery")
    ran: list[tuple[int, str | None]] = []

    @subscriber(_queue(case, transactional))
    async def handle(order: Order, headers: keys.Headers) -> None:
        ran.append((order.order, headers.get(ID_HEADER)))

    broker = case.stand.broker()
    app = make_app()
    await _ready(broker, TRACKED[case.form], app)
    app.include(broker, handle)
    async with serving(app):
        # As a relay into this broker writes them: record 7 twice (sent, then sent again by a
        # relay that died before its mark), record 8 once, and a row of no record, twice.
        for record, n in (("7", 1), ("7", 1), ("8", 2)):
            await broker.forward(NAME, _order(n), {ID_HEADER: record})
        for _ in range(2):
            await broker.publish_named(NAME, Order(3))
        with trio.fail_after(20):
            await settled(app, handle, 5)
        stats = app.statistics(handle)
    assert sorted(ran, key=str) == sorted([(1, "7"), (2, "8"), (3, None), (3, None)], key=str)
    said = [r.getMessage() for r in caplog.records if r.name == "trinbox.delivery"]
    assert [line.split(" [")[0] for line in said] == [
        "outbox record '7' was handled before; acked without the handler"
    ]
    assert f"[subscription={NAME} table={TABLE} row_id=" in said[0]
    assert stats.acked == 5
    assert _seen(case) == [(f"{TABLE}:{NAME}", "7"), (f"{TABLE}:{NAME}", "8")]
    assert case.stand.value(f"SELECT count(*) FROM {TABLE}") == 0


@cells()
@MODES
async def test_a_failed_handling_leaves_the_record_unseen(case: Case, transactional: bool) -> None:
    ran: Counter[int] = Counter()

    @subscriber(_queue(case, transactional))
    async def handle(order: Order) -> None:
        ran[order.order] += 1
        if ran[order.order] == 1:
            raise RuntimeError("the first handling fails")

    broker = case.stand.broker()
    app = make_app()
    await _ready(broker, TRACKED[case.form], app)
    app.include(broker, handle)
    async with serving(app):
        await broker.forward(NAME, _order(9), {ID_HEADER: "9"})
        with trio.fail_after(20):
            await settled(app, handle, 2)  # the failure, then the retry that acked
        await broker.forward(NAME, _order(9), {ID_HEADER: "9"})  # sent again after
        with trio.fail_after(20):
            await settled(app, handle, 3)
        stats = app.statistics(handle)
    assert ran == {9: 2}
    assert (stats.acked, stats.retried_after or stats.retried) == (2, 1)
    assert _seen(case) == [(f"{TABLE}:{NAME}", "9")]


@cells()
async def test_duplicates_handled_at_once_run_the_handler_once(case: Case) -> None:
    """Transactional: the second delivery's mark waits on the first's key, then finds it."""
    ran: list[int] = []

    @subscriber(_queue(case, True, workers=2))
    async def handle(order: Order) -> None:
        ran.append(order.order)

    broker = case.stand.broker()
    app = make_app()
    await _ready(broker, TRACKED[case.form], app)
    app.include(broker, handle)
    async with serving(app):
        for _ in range(4):
            await broker.forward(NAME, _order(5), {ID_HEADER: "5"})
        with trio.fail_after(20):
            await settled(app, handle, 4)
        stats = app.statistics(handle)
    assert ran == [5]
    assert stats.acked == 4
    assert _seen(case) == [(f"{TABLE}:{NAME}", "5")]


@cells(forms=["lease"])
async def test_each_consumer_keeps_its_own_marks(case: Case) -> None:
    ran: list[str] = []
    queue = InboxQueue(TrackedLease, NAME)

    @subscriber(queue.tracked(Tracker("seen_records", consumer="billing")))
    async def billing(order: Order) -> None:
        ran.append(f"billing {order.order}")

    broker = case.stand.broker()
    app = make_app()
    await _ready(broker, TrackedLease, app)
    app.include(broker, billing)
    async with serving(app):
        # Another consumer handled record 4 already; billing has not.
        case.stand.execute(
            "INSERT INTO seen_records VALUES ('shipping', '4', '2030-01-01 00:00:00')"
        )
        await broker.forward(NAME, _order(4), {ID_HEADER: "4"})
        with trio.fail_after(20):
            await settled(app, billing, 1)
    assert ran == ["billing 4"]
    assert _seen(case) == [("billing", "4"), ("shipping", "4")]


@cells(forms=["lease"])
async def test_startup_refuses_what_a_tracker_cannot_serve(case: Case) -> None:
    async def handler(payload: bytes) -> None:
        raise AssertionError("never runs")

    broker = case.stand.broker()
    no_headers = subscriber(InboxQueue(Untracked, "jobs").tracked(SEEN))(handler)
    batch = subscriber(InboxQueue(TrackedLease, NAME).tracked(SEEN).batch(5))
    rule = (
        r": a tracked subscription reads each record's id from the row's Headers field, found "
        r"\.tracked\(Tracker\('seen_records'\)\) on untracked_jobs \(Untracked\) without one; "
        r"add headers: Annotated\[dict\[str, str\], Headers\(\)\]$"
    )
    with pytest.raises(DeclarationError, match=rule):
        make_app().include(broker, no_headers)

    async def batched(payloads: list[bytes]) -> None:
        raise AssertionError("never runs")

    with pytest.raises(DeclarationError, match=r"one record at a time, found \.tracked.*batch"):
        make_app().include(broker, batch(batched))

    # The seen-records table missing: every statement prepares at startup.
    plain = subscriber(InboxQueue(TrackedLease, NAME).tracked(SEEN))(handler)
    app = make_app()

    @app.on_startup
    async def create_tables() -> None:
        await broker.create_tables(TrackedLease)

    app.include(broker, plain)
    with pytest.RaisesGroup(
        pytest.RaisesExc(SchemaError, match="found seen failing on"), flatten_subgroups=True
    ):
        async with serving(app):
            pass


def test_a_tracker_names_its_table() -> None:
    with pytest.raises(DeclarationError, match="named by a non-empty str, found ''"):
        Tracker("")
    with pytest.raises(DeclarationError, match="consumer is named by a non-empty str"):
        Tracker("seen", consumer="")
    with pytest.raises(TypeError, match=r"takes a trinbox.outbox.Tracker, found str"):
        InboxQueue(TrackedLease, NAME).tracked("seen")  # type: ignore[arg-type]
