"""Limits per key and for the whole queue (``InboxQueue.limit``) in the row lock form: each
claimed row holds a slot of its key (and of the queue), a transaction lock of its claim, taken
with try-locks (trinbox._dialects._slots). PostgreSQL has them; MariaDB's GET_LOCK is a session
lock, so its row lock form refuses a limit; SQLite has no row lock form.

A key at its limit is skipped while other keys' rows fill the same claim; a slot ends with its
claim's transaction (the last settlement's commit, a rollback, a closed connection), so a dead
owner frees it at once. The claims here are the form's own, on a clock the test moves by hand."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
import trio

from trinbox import InboxQueue, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._declare._limits import ClaimLimits
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.rowlock import RowLockForm
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, Delivery, FormContext
from trinbox.errors import UnsupportedForm
from trinbox.testing import idle

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, HOUR, insert_rows
from .schema import RowLockedEmail, RowLockedPlain
from .test_lease import ManualClock, broker_on

PG_ROW_LOCK = pytest.mark.parametrize(
    "case", [("postgres", "row_lock")], ids=["postgres-row_lock"], indirect=True
)


@asynccontextmanager
async def limited_form(
    case: Case, limits: ClaimLimits, row: type = RowLockedEmail
) -> AsyncIterator[RowLockForm]:
    """The row lock form of a subscription to group "emails" (or the whole table of a row
    without groups) under ``limits``, as ``Subscription.open`` builds it."""
    async with asyncio_loop(True):
        broker = broker_on(case.stand, ManualClock())
        await broker.open()
        try:
            spec = spec_of(row)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=build_plan(broker.dialect, spec, limits=limits),
                pool=broker.pool,
                clock=broker.clock,
                group="emails" if spec.group is not None else None,
            )
            form = make_form(ctx)
            assert isinstance(form, RowLockForm)
            yield form
        finally:
            await broker.aclose()


def limits_of(queue: InboxQueue[Any, Any, Any]) -> ClaimLimits:
    assert queue.limits is not None
    return queue.limits


def per_key(limit: int) -> ClaimLimits:
    return limits_of(InboxQueue(RowLockedEmail, "emails").limit(key="customer", concurrency=limit))


def emails(case: Case, customers: Sequence[str | None], group: str = "emails") -> None:
    insert_rows(
        case.stand,
        "email_jobs",
        [
            {
                "name": group,
                "customer": c,
                "retry_after": DUE,
                "payload": json.dumps({"to": c}).encode(),
            }
            for c in customers
        ],
    )


def keys_of(taken: Sequence[Delivery]) -> Counter[Any]:
    return Counter(d.values["customer"] for d in taken)


async def claim_each(form: RowLockForm, count: int) -> list[Delivery]:
    """``count`` claims of one row each (each its own transaction, its own slots)."""
    found: list[Delivery] = []
    for _ in range(count):
        found += await form.claim(1)
    return found


@PG_ROW_LOCK
async def test_a_key_at_its_limit_is_skipped_and_the_others_fill_the_claim(case: Case) -> None:
    # In claim order (id): five rows of a, then two of b, one of c.
    emails(case, ["a"] * 5 + ["b"] * 2 + ["c"])
    async with limited_form(case, per_key(3)) as form:
        first = await form.claim(4)
        # a's fourth row waits for a free slot; b's first row is claimed beside a's three.
        assert keys_of(first) == {"a": 3, "b": 1}
        second = await form.claim(10)
        assert keys_of(second) == {"b": 1, "c": 1}
        assert list(await form.claim(10)) == []
        # The first claim's transaction commits with its last settlement: its slots end
        # together, and a's two rows left are claimed.
        for delivery in first:
            await form.settle(delivery, Ack())
        assert keys_of(await form.claim(10)) == {"a": 2}
        assert list(await form.claim(10)) == []


@PG_ROW_LOCK
async def test_one_row_claims_each_take_a_slot_and_an_ack_frees_one(case: Case) -> None:
    emails(case, ["a"] * 5)
    async with limited_form(case, per_key(3)) as form:
        taken = await claim_each(form, 5)
        assert len(taken) == 3
        await form.settle(taken[0], Ack())
        # One slot free: one row more, not two.
        assert len(await claim_each(form, 3)) == 1


@PG_ROW_LOCK
async def test_a_dead_connection_frees_its_slots_at_once(case: Case) -> None:
    emails(case, ["a"] * 4)
    async with limited_form(case, per_key(2)) as form:
        taken = await claim_each(form, 4)
        assert len(taken) == 2
        # The owner's connection is closed (a crash, a kill): the server rolls its
        # transaction back, with its row lock and its slot. Its row and one more come back.
        form.abandon(taken[0])
        with trio.fail_after(10):
            # No event tells when the server has ended the closed session: poll it.
            while not (again := await form.claim(10)):  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert keys_of(again) == {"a": 1}
        assert list(await form.claim(10)) == []


@PG_ROW_LOCK
async def test_a_dropped_delivery_rolls_back_and_frees_its_slot(case: Case) -> None:
    emails(case, ["a"] * 3)
    async with limited_form(case, per_key(1)) as form:
        (taken,) = await form.claim(10)
        assert list(await form.claim(10)) == []
        await form.release(taken)
        assert keys_of(await form.claim(10)) == {"a": 1}


@PG_ROW_LOCK
async def test_a_null_key_is_one_key_of_its_own(case: Case) -> None:
    emails(case, [None, None, None, "a", "NULL"])
    async with limited_form(case, per_key(2)) as form:
        assert keys_of(await form.claim(10)) == {None: 2, "a": 1, "NULL": 1}
        assert list(await form.claim(10)) == []


@PG_ROW_LOCK
async def test_the_whole_queue_cap_bounds_every_key_together(case: Case) -> None:
    emails(case, ["a", "b", "c", "d", "e", "f"])
    whole = limits_of(InboxQueue(RowLockedEmail, "emails").limit(concurrency=4))
    async with limited_form(case, whole) as form:
        first = await claim_each(form, 3)
        assert len(first) == 3
        assert len(await form.claim(10)) == 1
        assert list(await form.claim(10)) == []
        await form.settle(first[0], Ack())
        assert len(await form.claim(10)) == 1


@PG_ROW_LOCK
async def test_a_per_key_limit_and_a_whole_queue_cap_together(case: Case) -> None:
    emails(case, ["a"] * 4 + ["b"] * 4 + ["c"] * 4)
    both = limits_of(
        InboxQueue(RowLockedEmail, "emails")
        .limit(key="customer", concurrency=2)
        .limit(concurrency=5)
    )
    async with limited_form(case, both) as form:
        taken = await form.claim(10)
        # In claim order a, a, b, b, c (c's second row would pass the cap, not its key's limit).
        assert keys_of(taken) == {"a": 2, "b": 2, "c": 1}
        assert list(await form.claim(10)) == []


@PG_ROW_LOCK
async def test_another_group_s_rows_in_work_count_for_nothing(case: Case) -> None:
    emails(case, ["a"], group="other")
    emails(case, ["a"])
    async with limited_form(case, per_key(1)) as form:
        # The other group's row is in work (its own subscription's slot of key a) ...
        theirs = make_form(replace(form._ctx, group="other"))
        assert isinstance(theirs, RowLockForm)
        assert keys_of(await theirs.claim(10)) == {"a": 1}
        # ... and this group's row of key a is claimed all the same.
        assert keys_of(await form.claim(10)) == {"a": 1}


@PG_ROW_LOCK
async def test_a_table_without_groups_is_limited_whole(case: Case) -> None:
    insert_rows(
        case.stand,
        "plain_jobs",
        [{"tenant": t, "payload": b"p"} for t in ["x", "x", "y", "x"]],
    )
    limits = limits_of(InboxQueue(RowLockedPlain, "plain").limit(key="tenant", concurrency=1))
    async with limited_form(case, limits, row=RowLockedPlain) as form:
        taken = await form.claim(10)
        assert Counter(d.values["tenant"] for d in taken) == {"x": 1, "y": 1}


@pytest.mark.parametrize("case", [("mariadb", "row_lock")], ids=["mariadb-row_lock"], indirect=True)
async def test_mariadb_s_row_lock_form_refuses_a_limit(case: Case) -> None:
    async with asyncio_loop(True):
        broker = broker_on(case.stand, ManualClock())
        with pytest.raises(UnsupportedForm) as found:
            build_plan(broker.dialect, spec_of(RowLockedEmail), limits=per_key(3))
    assert str(found.value) == (
        "email_jobs (RowLockedEmail): .limit() on an Inbox[RowLock] table takes a slot per "
        "row as a transaction lock, which MySQL does not have (GET_LOCK is a session lock, "
        "kept past the commit), found .limit(key='customer', concurrency=3); declare the "
        "table Inbox[Lease] (limits count live leases there) or serve it from PostgreSQL"
    )


# -- served: workers of one subscription ----------------------------------------------------


@dataclass
class Email:
    to: str


@PG_ROW_LOCK
async def test_served_a_key_never_has_more_than_n_in_work_and_other_keys_flow(
    case: Case,
) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    in_work: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []
    changed = trio.Event()
    release: dict[str, trio.Event] = {"a": trio.Event(), "b": trio.Event()}

    queue = InboxQueue(RowLockedEmail, "emails").workers(6).limit(key="customer", concurrency=2)

    @subscriber(queue)
    async def send(email: Email) -> None:
        customer = email.to
        in_work[customer] += 1
        most[customer] = max(most[customer], in_work[customer])
        changed.set()
        await release[customer].wait()
        in_work[customer] -= 1
        done.append(customer)
        changed.set()

    async def until(check: Callable[[], bool]) -> None:
        nonlocal changed
        with trio.fail_after(10):
            while not check():
                changed = trio.Event()
                await changed.wait()

    emails(case, ["a"] * 5 + ["b"] * 2)
    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await until(lambda: in_work == {"a": 2, "b": 2})
        await idle(app, send)
        assert in_work == {"a": 2, "b": 2}
        release["b"].set()
        await until(lambda: done.count("b") == 2)
        await idle(app, send)
        assert +in_work == {"a": 2}
        release["a"].set()
        await until(lambda: done.count("a") == 5)
    assert most == {"a": 2, "b": 2}
    assert case.stand.rows("SELECT job_id FROM email_jobs") == []


def slots_held(case: Case) -> int:
    """The advisory locks held on the database (the slots; nothing else takes them here)."""
    ((count,),) = case.stand.rows(
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    return int(count)


@PG_ROW_LOCK
async def test_a_claim_takes_no_slot_it_cannot_fill(case: Case) -> None:
    # a's only row is in work, a slot of a held by its claim; b's rows behind it.
    emails(case, ["a", "b", "b"])
    async with limited_form(case, per_key(3)) as form:
        assert keys_of(await form.claim(1)) == {"a": 1}
        assert slots_held(case) == 1
        # a still has two free slots but no row to lock: the next claims of one row each take
        # b's rows, not a slot of a (the slots others hold tell how many of a's rows are free).
        assert keys_of(await form.claim(1)) == {"b": 1}
        assert keys_of(await form.claim(1)) == {"b": 1}
        assert slots_held(case) == 3
        assert list(await form.claim(10)) == []
        assert slots_held(case) == 3
