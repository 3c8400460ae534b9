"""A subscription's claims: they never take the pool's last connection, and they run side by
side only where the dialect allows and only once a claim found rows, in every form, on every
stand (docs/reference.md#workers, docs/reference.md#scenarios-claims)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import pytest
import trio

from trinbox import InboxQueue, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, FormContext, whole_seconds
from trinbox.errors import DatabaseError
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import ClaimWatch, cells, insert_emails

# Rows enough to fill a pool of eight twice over.
ROWS = 16
POOL = 8


@dataclass
class Email:
    to: str


@dataclass
class Job:
    n: int


def expected_in_work(case: Case) -> int:
    """A lease holds no connection, so every row goes into work, and so does every row of
    SQLite's advisory form (the process keeps the keys instead of sessions, each row has a key
    of its own); a delivery of the other forms holds one, and the subscription stops one short
    of the pool."""
    if case.form == "lease" or case.name == "sqlite":
        return ROWS
    return POOL - 1


async def test_a_subscription_leaves_the_pool_its_last_connection(
    case: Case, clock: VirtualClock
) -> None:
    stand = case.stand
    # Written by hand, before the app serves: its first claim sees every row. Each row has a
    # key of its own (the advisory form locks plain_jobs-{tenant}).
    for n in range(ROWS):
        stand.execute(
            "INSERT INTO plain_jobs (tenant, payload) VALUES (?, ?)",
            f"t{n}",
            f'{{"to":"{n}@x"}}'.encode(),
        )
    broker = stand.broker(poll_interval=60, pool_size=POOL)
    released: dict[str, trio.Event] = {f"{n}@x": trio.Event() for n in range(ROWS)}
    started: list[str] = []
    changed = trio.Event()

    @subscriber(InboxQueue(case.plain, "jobs").workers(ROWS))
    async def work(job: Email) -> None:
        nonlocal changed
        started.append(job.to)
        changed.set()
        changed = trio.Event()
        await released[job.to].wait()

    async def started_at_least(count: int) -> None:
        while len(started) < count:
            await changed.wait()

    expected = expected_in_work(case)
    app = make_app(grace=0)
    app.include(broker, work)
    async with serving(app):
        with trio.fail_after(30):
            await started_at_least(expected)
        # Claims go on meanwhile (or wait for a connection); none takes another row.
        await trio.sleep(5)
        assert len(started) == expected
        assert app.statistics(work).in_work == expected
        # The pool still lends a connection to a handler's or the service's own query.
        with trio.fail_after(5):
            assert await broker.database.fetchval("SELECT 1") == 1
        if expected < ROWS:
            # A settlement makes room, and the next claim takes a row.
            released[started[0]].set()
            with trio.fail_after(120):
                await settled(app, work, 1)
                await started_at_least(expected + 1)
            assert app.statistics(work).in_work == expected
        for event in released.values():
            event.set()
        with trio.fail_after(60):
            await settled(app, work, ROWS)
    assert stand.rows("SELECT * FROM plain_jobs") == []


# -- claims side by side (docs/reference.md#workers) ---------------------------------------------

# Where claims of one subscription may run at once: not SQLite (one writer), not the MySQL lease
# claim (a transaction that locks the rows it reads).
SIDE_BY_SIDE = {
    ("postgres", "row_lock"),
    ("postgres", "lease"),
    ("postgres", "advisory"),
    ("mariadb", "row_lock"),
    ("mariadb", "advisory"),
}


async def test_a_free_worker_gets_a_claim_of_its_own_once_rows_were_found(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert_emails(case.stand, [b'{"n": 0}'] * 8)
    # Virtual time: SQLite's advisory claims take nothing while the first rows are in work,
    # and the next claim waits a poll interval (the seed's rule).
    broker = case.stand.broker(poll_interval=1)
    watch = ClaimWatch(monkeypatch)
    most_in_flight = 0
    third_began = trio.Event()
    side_by_side = (case.name, case.form) in SIDE_BY_SIDE

    async def before(n: int) -> None:
        nonlocal most_in_flight
        most_in_flight = max(most_in_flight, watch.count - watch.done)
        if n == 3:
            third_began.set()
        elif n == 2 and side_by_side:
            # The first claim found rows; the second holds on until a third runs beside it.
            with trio.fail_after(10):
                await third_began.wait()

    watch.before = before

    @subscriber(InboxQueue(case.email, "emails").workers(4).batch(2))
    async def handle(jobs: list[Job]) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(60):
            await settled(app, handle, 8)
    if side_by_side:
        assert 2 <= most_in_flight <= 4  # one claim per free worker at most
    else:
        assert most_in_flight == 1
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_claims_that_find_nothing_run_one_at_a_time(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = case.stand.broker(poll_interval=1)
    watch = ClaimWatch(monkeypatch)
    most_in_flight = 0

    async def before(n: int) -> None:
        nonlocal most_in_flight
        most_in_flight = max(most_in_flight, watch.count - watch.done)

    watch.before = before

    @subscriber(InboxQueue(case.email, "emails").workers(4))
    async def handle(job: Job) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(60):
            await watch.wait_done(5)
        # Each empty claim waited its poll interval before the next one.
        gaps = [b - a for a, b in itertools.pairwise(watch.times)]
    assert most_in_flight == 1
    assert all(gap >= 1 for gap in gaps[:4]), gaps


# Where a settlement claims its worker's next row in the same round trip.
CHAINING = cells(leave_out=[("mariadb", "lease")])


@CHAINING
async def test_a_chained_claim_that_fails_leaves_its_settlement_standing(case: Case) -> None:
    stand = case.stand
    insert_emails(stand, [b'{"n": 1}', b'{"n": 2}'])
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            spec = spec_of(case.email)
            statements = build_plan(broker.dialect, spec)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=statements,
                pool=broker.pool,
                clock=broker.clock,
                group="emails",
                lease=whole_seconds(broker.lease),
            )
            form = make_form(ctx)
            (delivery,) = await form.claim(1)
            # From now on every claim fails: its select reads a column that is not there.
            claim = statements.claim[0]
            broken = replace(claim, sql=claim.sql.replace("customer", "no_such_column"))
            ctx.statements = replace(statements, claim=(broken, *statements.claim[1:]))
            chained = await form.settle_and_claim(delivery, Ack(), 1)
            assert chained.error is None
            assert isinstance(chained.claim_error, DatabaseError)
            assert chained.claimed is None
            assert form.in_work == 0
        finally:
            await broker.aclose()
    # Row 1's ack took effect; row 2 waits for the next claim.
    assert stand.rows("SELECT job_id FROM email_jobs") == [(2,)]
