"""Limits beside FIFO groups (``InboxQueue.limit`` on a ``Group(fifo=True)`` table): an
account's rows run one at a time in order, and ``.limit(key="tenant", concurrency=N)`` caps
how many of a tenant's accounts are in work at once. A group whose head's key is at its limit
is passed over (its head is never passed by the row behind it) while the other groups keep
flowing; what is in work is counted over every group of the table, so a subscription to one
group waits for its tenant's other groups. The lease form on every stand (live leases, under
the table's limit lock), the row lock form on PostgreSQL (slots of the head's key, named for
the table).

The claims here are the form's own, on a clock the test moves by hand (no sleeps); then a
served queue over every group, four processes (limit_fifo_process.py), and a holder killed
with SIGKILL."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import pairwise
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    RowLock,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._declare._limits import ClaimLimits
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.lease import LeaseForm
from trinbox._forms.rowlock import RowLockForm
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, Delivery, FormContext, whole_seconds
from trinbox.errors import UnsupportedForm
from trinbox.schema import ddl
from trinbox.testing import idle

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, cells, insert_rows
from .test_lease import ManualClock, broker_on
from .test_limit_processes import holder, kill_once_holding, most_at_once
from .test_processes import run_workers

TABLE = "bookings"
LIMIT = 3  # the tenant limit of the tests across processes (limit_fifo_process.py)

lease_cells = cells(forms=["lease"])


class Booking(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    tenant: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class BookingLocked(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    tenant: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    payload: Annotated[bytes, Payload()]


# The row lock form beside FIFO groups: PostgreSQL's slots (MariaDB's row lock form refuses a
# limit, SQLite has none).
BOOKING: dict[str, type[Inbox[Any, Any]]] = {"lease": Booking, "row_lock": BookingLocked}
served_cells = cells(forms=["lease", "row_lock"], leave_out=[("mariadb", "row_lock")])


@dataclass
class Posting:
    n: int


def create(case: Case) -> None:
    dialect = "mysql" if case.name == "mariadb" else case.name
    case.stand.script(";\n".join(ddl(BOOKING[case.form], dialect)))


def book(case: Case, rows: Sequence[tuple[str, str | None]]) -> None:
    """The table, and one row per (account, tenant) in this order (the ids' order); payload
    n is its place."""
    create(case)
    insert_rows(
        case.stand,
        TABLE,
        [
            {
                "account": account,
                "tenant": tenant,
                "retry_after": DUE,
                "payload": b'{"n": %d}' % n,
            }
            for n, (account, tenant) in enumerate(rows)
        ],
    )


def limits_of(queue: InboxQueue[Any, Any, Any]) -> ClaimLimits:
    assert queue.limits is not None
    return queue.limits


def per_tenant(limit: int) -> ClaimLimits:
    return limits_of(InboxQueue(Booking, "q").limit(key="tenant", concurrency=limit))


@asynccontextmanager
async def fifo_forms(
    case: Case,
    clock: ManualClock,
    limits: ClaimLimits,
    *groups: str | None,
    stale: bool = False,
) -> AsyncIterator[list[Any]]:
    """One form of the case's (lease; row lock: each claim holds its transaction, with the
    group's guard and its slots, until the delivery settles) per group named (``None``: over
    every group) under ``limits``, as ``Subscription.open`` builds them, on one broker;
    ``stale``: over every group, its heads read is the unlimited one (every group whose head
    is due), as a read gone stale may name groups whose key has filled since."""
    async with asyncio_loop(case.name != "sqlite"):
        broker = broker_on(case.stand, clock)
        await broker.open()
        try:
            spec = spec_of(BOOKING[case.form])
            forms = []
            for group in groups:
                plan = build_plan(broker.dialect, spec, every_group=group is None, limits=limits)
                if stale:
                    plan = replace(plan, heads=broker.dialect.every_group_heads(spec, None))
                ctx = FormContext(
                    spec=spec,
                    dialect=broker.dialect,
                    statements=plan,
                    pool=broker.pool,
                    clock=broker.clock,
                    group=group,
                    lease=whole_seconds(broker.lease),
                    limited=True,
                )
                form = make_form(ctx)
                assert isinstance(form, LeaseForm | RowLockForm)
                forms.append(form)
            yield forms
        finally:
            await broker.aclose()


def accounts(taken: Sequence[Delivery]) -> list[str]:
    return sorted(str(d.values["account"]) for d in taken)


def tenants(taken: Sequence[Delivery]) -> Counter[Any]:
    return Counter(d.values["tenant"] for d in taken)


@lease_cells
async def test_a_tenant_at_its_limit_is_passed_over_and_the_other_groups_flow(
    case: Case,
) -> None:
    # Three accounts of tenant t and one of u, two postings each, the first postings first.
    book(case, [("a1", "t"), ("a2", "t"), ("a3", "t"), ("b1", "u")] * 2)
    async with fifo_forms(case, ManualClock(), per_tenant(2), None) as (form,):
        first = await form.claim(10)
        # One head per account: t's first two accounts (a3 passed over, its key at its
        # limit), and u's beside them; no second posting while its account's head is in work.
        assert accounts(first) == ["a1", "a2", "b1"]
        assert [d.values["payload"] for d in first if d.values["account"] == "a1"] == [b'{"n": 0}']
        assert list(await form.claim(10)) == []
        # a1's head is done: one slot of t is free. a3's head (posting 2) comes before a1's
        # second posting (4) in the heads' order, so it takes the slot.
        (a1,) = [d for d in first if d.values["account"] == "a1"]
        await form.settle(a1, Ack())
        second = await form.claim(10)
        assert [(d.values["account"], d.values["payload"]) for d in second] == [("a3", b'{"n": 2}')]
        assert list(await form.claim(10)) == []
        for done in [d for d in first if d.values["account"] != "a1"]:
            await form.settle(done, Ack())
        # a2's and b1's heads are done: t has one slot beside a3's, which a1's second posting
        # (4) takes before a2's (5); b1's beside it.
        third = await form.claim(10)
        assert accounts(third) == ["a1", "b1"]
        assert tenants(third) == {"t": 1, "u": 1}
        assert list(await form.claim(10)) == []


@cells(forms=["lease"], stands=["postgres", "mariadb"])
async def test_the_head_s_claim_decides_whatever_the_heads_read_named(case: Case) -> None:
    # The heads read names every account (as a stale one may): the claim of each head counts
    # the live leases again, the heads this claim took before it among them (MySQL stamps
    # each before the next group's claim), so t still gets two accounts, not three.
    book(case, [("a1", "t"), ("a2", "t"), ("a3", "t"), ("b1", "u")])
    async with fifo_forms(case, ManualClock(), per_tenant(2), None, stale=True) as (form,):
        assert accounts(await form.claim(10)) == ["a1", "a2", "b1"]
        assert list(await form.claim(10)) == []


@lease_cells
async def test_the_head_s_key_counts_and_the_row_behind_never_passes_it(case: Case) -> None:
    # a1's head is of tenant t, the posting behind it of u; a2's head, of t, is taken first.
    book(case, [("a2", "t"), ("a1", "t"), ("a1", "u"), ("b1", "u")])
    async with fifo_forms(case, ManualClock(), per_tenant(1), None) as (form,):
        first = await form.claim(10)
        assert accounts(first) == ["a2", "b1"]
        # t is at its limit: a1 waits at its head, and its u posting behind the head waits
        # with it although u has room (u's slot is b1's; with room it would still wait).
        assert list(await form.claim(10)) == []
        (b1,) = [d for d in first if d.values["account"] == "b1"]
        await form.settle(b1, Ack())
        assert list(await form.claim(10)) == []
        (a2,) = [d for d in first if d.values["account"] == "a2"]
        await form.settle(a2, Ack())
        head = await form.claim(10)
        assert [(d.values["account"], d.values["tenant"]) for d in head] == [("a1", "t")]
        # Each row in work counts for its own key: a1's head holds t, and its u posting waits
        # for the head (its group), not for u.
        assert list(await form.claim(10)) == []
        await form.settle(head[0], Ack())
        behind = await form.claim(10)
        assert [(d.values["account"], d.values["tenant"]) for d in behind] == [("a1", "u")]


@lease_cells
async def test_a_subscription_to_one_group_counts_its_tenant_s_other_groups(case: Case) -> None:
    book(case, [("a1", "t"), ("a2", "t"), ("b1", "u")])
    clock = ManualClock()
    async with fifo_forms(case, clock, per_tenant(1), "a1", "a2", "b1") as (a1, a2, b1):
        taken = await a1.claim(4)
        assert accounts(taken) == ["a1"]
        # a2's head is due and its group free, but t's one slot is a1's, in another group.
        assert list(await a2.claim(4)) == []
        assert accounts(await b1.claim(4)) == ["b1"]
        await a1.settle(taken[0], Ack())
        assert accounts(await a2.claim(4)) == ["a2"]


@lease_cells
async def test_the_whole_cap_counts_the_groups_in_work(case: Case) -> None:
    book(case, [(f"a{i}", f"t{i}") for i in range(5)] + [("a0", "t0")])
    whole = limits_of(InboxQueue(Booking, "q").limit(concurrency=3))
    async with fifo_forms(case, ManualClock(), whole, None) as (form,):
        first = await form.claim(10)
        assert accounts(first) == ["a0", "a1", "a2"]
        assert list(await form.claim(10)) == []
        await form.settle(first[0], Ack())
        # One group's slot: a3's head comes before a0's second posting.
        assert accounts(await form.claim(10)) == ["a3"]
        assert list(await form.claim(10)) == []


@cells(forms=["row_lock"], stands=["postgres"])
async def test_in_the_row_lock_form_a_head_takes_a_slot_of_its_key_across_groups(
    case: Case,
) -> None:
    book(case, [("a1", "t"), ("a2", "t"), ("a3", "t"), ("b1", "u"), ("a1", "t")])
    limits = limits_of(
        InboxQueue(BookingLocked, "q").limit(key="tenant", concurrency=2).limit(concurrency=3)
    )
    async with fifo_forms(case, ManualClock(), limits, None, "a3") as (every, a3):
        # One head a claim: a1, a2 (t's two slots), then a3 passed over for b1's.
        taken = [*(await every.claim(1)), *(await every.claim(1)), *(await every.claim(1))]
        assert [d.values["account"] for d in taken] == ["a1", "a2", "b1"]
        # The queue's cap is reached, and t is at its limit: nothing, over every group nor
        # from a subscription to a3 alone (its head's slots are held in other groups).
        assert list(await every.claim(1)) == []
        assert list(await a3.claim(1)) == []
        await every.settle(taken[2], Ack())  # b1: a slot of the queue, not of t
        assert list(await a3.claim(1)) == []
        await every.settle(taken[0], Ack())  # a1's head: one of t's slots
        # a3's head (2) comes before a1's second posting (4) in the heads' order.
        (head,) = await every.claim(1)
        assert (head.values["account"], head.values["payload"]) == ("a3", b'{"n": 2}')
        assert list(await every.claim(1)) == []
        await every.settle(head, Ack())
        (behind,) = await every.claim(1)
        assert (behind.values["account"], behind.values["payload"]) == ("a1", b'{"n": 4}')
        await every.settle(behind, Ack())
        await every.settle(taken[1], Ack())


@cells(forms=["row_lock"], stands=["mariadb"])
async def test_mariadb_s_row_lock_form_refuses_a_limit_beside_fifo_groups(case: Case) -> None:
    # Whatever its row lock form does without FIFO groups, a head's slot after the guard is
    # PostgreSQL's only: the plan refuses it rather than claim past the head.
    async with asyncio_loop(True):
        broker = broker_on(case.stand, ManualClock())
        for every_group in (False, True):
            with pytest.raises(UnsupportedForm) as found:
                build_plan(
                    broker.dialect,
                    spec_of(BookingLocked),
                    every_group=every_group,
                    limits=per_tenant(2),
                )
            assert str(found.value) == (
                "bookings (BookingLocked): .limit() beside Group(fifo=True) on an "
                "Inbox[RowLock] table takes a slot of the head's key as a transaction lock "
                "after the group's guard, which MySQL does not do for now, found "
                ".limit(key='tenant', concurrency=2); declare the table Inbox[Lease] (limits "
                "count live leases there, beside FIFO groups too) or serve it from PostgreSQL"
            )


@dataclass
class Seen:
    """What the handlers saw: per account the postings in the order they started, and the
    most accounts of one tenant (and rows of one account) in work at once."""

    started: dict[str, list[int]]
    tenants: Counter[str]
    accounts: Counter[str]
    most_tenant: Counter[str]
    most_account: Counter[str]


@served_cells
async def test_every_group_served_keeps_each_group_s_order_under_the_tenant_limit(
    case: Case,
) -> None:
    # Six accounts of tenant t (the hot one), two of u, four postings each, interleaved.
    owners = {f"t{i}": "t" for i in range(6)} | {f"u{i}": "u" for i in range(2)}
    postings = 4
    rows = [(account, tenant) for _ in range(postings) for account, tenant in owners.items()]
    book(case, rows)
    seen = Seen({}, Counter(), Counter(), Counter(), Counter())
    done = trio.Event()
    count = 0

    @subscriber(
        InboxQueue(BOOKING[case.form], "every")
        .every_group()
        .workers(8)
        .limit(key="tenant", concurrency=2)
        .poll_interval(0.05)
    )
    async def handle(posting: Posting) -> None:
        nonlocal count
        account, tenant = rows[posting.n]
        seen.started.setdefault(account, []).append(posting.n)
        seen.tenants[tenant] += 1
        seen.accounts[account] += 1
        seen.most_tenant[tenant] = max(seen.most_tenant[tenant], seen.tenants[tenant])
        seen.most_account[account] = max(seen.most_account[account], seen.accounts[account])
        await trio.sleep(0.02)
        seen.tenants[tenant] -= 1
        seen.accounts[account] -= 1
        count += 1
        if count == len(rows):
            done.set()

    app = make_app()
    app.include(case.stand.broker(poll_interval=0.05), handle)
    async with serving(app):
        with trio.fail_after(60):
            await done.wait()
    for account in owners:
        assert seen.started[account] == [n for n, (a, _) in enumerate(rows) if a == account]
    assert set(seen.most_account.values()) == {1}
    # t's limit held it at two accounts in work (reached), while u's ran beside them.
    assert seen.most_tenant["t"] == 2
    assert seen.most_tenant["u"] <= 2
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


# -- across processes ------------------------------------------------------------------------


def every_group(row: type[Inbox[Any, Any]]) -> InboxQueue[Any, Any, Any]:
    """The queue of the tests across processes: every group, four workers, a tenant limit."""
    return InboxQueue(row, "every").every_group().workers(4).limit(key="tenant", concurrency=LIMIT)


# The kill -9 tests' rows: six accounts of one tenant, two postings each; the holder, with four
# workers, takes three heads and no fourth.
HELD = [(f"h{i}", "hot") for i in range(6)] * 2


def hot_and_others() -> list[tuple[str, str]]:
    """Eight accounts of the hot tenant with four postings each, four of two other tenants
    with two, interleaved (every account's first posting first)."""
    hot = [(f"h{i}", "hot") for i in range(8)]
    others = [(f"o{i}", f"t{i % 2}") for i in range(4)]
    return [*hot, *others] * 2 + hot * 2


@served_cells
async def test_a_tenant_limit_of_three_held_by_four_processes_is_never_four(case: Case) -> None:
    rows = hot_and_others()
    book(case, rows)
    results = await run_workers(
        case, len(rows), "tests.integration.matrix.limit_fifo_process", processes=4, deadline=120
    )
    spans = [(int(n), start, end) for result in results for n, start, end in result.intervals]
    assert sorted(n for n, _, _ in spans) == list(range(len(rows)))
    by_tenant: dict[str, list[tuple[float, float]]] = {}
    by_account: dict[str, list[tuple[float, float, int]]] = {}
    for n, start, end in spans:
        account, tenant = rows[n]
        by_tenant.setdefault(tenant, []).append((start, end))
        by_account.setdefault(account, []).append((start, end, n))
    for tenant, found in by_tenant.items():
        assert most_at_once(found) <= LIMIT, f"more than {LIMIT} accounts of {tenant} in work"
    # The limit, not chance, held the hot tenant at three; the others ran beside it.
    assert most_at_once(by_tenant["hot"]) == LIMIT
    assert most_at_once([s for found in by_tenant.values() for s in found]) > LIMIT
    for account, postings in by_account.items():
        ordered = sorted(postings)
        assert [n for _, _, n in ordered] == [n for n, (a, _) in enumerate(rows) if a == account]
        for (_, end, n), (start, _, _) in pairwise(ordered):
            assert end <= start, f"posting {n} of {account} was in work when the next began"
    assert sum(1 for result in results if result.ids) > 1, "one process handled every row"
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


@lease_cells
async def test_a_killed_holder_s_groups_come_back_when_its_leases_end(case: Case) -> None:
    rows = HELD
    book(case, rows)
    await kill_once_holding(
        "tests.integration.matrix.limit_fifo_process", "hold", case.name, case.stand.url
    )
    # Four workers, three slots: three heads leased, and their leases outlive the holder.
    held = case.stand.rows(f"SELECT id FROM {TABLE} WHERE locked_until IS NOT NULL")
    assert len(held) == LIMIT

    spans: list[tuple[float, float, int]] = []
    done = trio.Event()

    @subscriber(every_group(Booking).poll_interval(0.05))
    async def handle(posting: Posting) -> None:
        start = time.monotonic()
        await trio.sleep(0.05)
        spans.append((start, time.monotonic(), posting.n))
        if len(spans) == len(rows):
            done.set()

    app = make_app()
    app.include(case.stand.broker(poll_interval=0.05, lease=2), handle)
    async with serving(app):
        # The killed process's leases end within their two seconds; then its heads come back
        # and every posting is handled, three accounts at once at most, each in order.
        with trio.fail_after(30):
            await done.wait()
    assert sorted(n for _, _, n in spans) == list(range(len(rows)))
    assert most_at_once([(start, end) for start, end, _ in spans]) <= LIMIT
    for account in {a for a, _ in rows}:
        mine = [n for start, _, n in sorted(spans) if rows[n][0] == account]
        assert mine == [n for n, (a, _) in enumerate(rows) if a == account]
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []


@cells(forms=["row_lock"], stands=["postgres"])
async def test_a_killed_row_lock_holder_s_groups_come_back_at_once(case: Case) -> None:
    rows = HELD
    book(case, rows)
    started: list[int] = []
    in_work = most = 0
    changed = trio.Event()

    @subscriber(every_group(BookingLocked).poll_interval(0.05))
    async def handle(posting: Posting) -> None:
        nonlocal changed, in_work, most
        started.append(posting.n)
        in_work += 1
        most = max(most, in_work)
        await trio.sleep(0.05)
        in_work -= 1
        changed.set()
        changed = trio.Event()

    module = "tests.integration.matrix.limit_fifo_process"
    async with holder(module, "hold", case.name, case.stand.url, "row_lock") as kill:
        app = make_app()
        app.include(case.stand.broker(poll_interval=0.05), handle)
        with trio.fail_after(60):
            async with serving(app):
                # The holder's three heads hold the tenant's three slots: three accounts are
                # free, and still nothing is claimed here.
                await idle(app, handle)
                assert started == []
                await kill()
                # Its sessions end with it, their slots, guards and row locks: every posting
                # is handled, each account in order.
                while len(started) < len(rows):
                    await changed.wait()
    assert sorted(started) == list(range(len(rows)))
    assert most == LIMIT
    for account in {a for a, _ in rows}:
        mine = [n for n in started if rows[n][0] == account]
        assert mine == [n for n, (a, _) in enumerate(rows) if a == account]
    assert case.stand.rows(f"SELECT * FROM {TABLE}") == []
