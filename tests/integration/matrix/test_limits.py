"""Limits per key and for the whole queue (``InboxQueue.limit``) in the lease form, on every
stand: a claim takes a row only while its key has fewer than N live leases (and the queue fewer
than its cap), skips a key at its limit while other keys' rows fill the same claim, and counts
nothing but live leases, so a lease that ends (settled, or its owner gone) frees its slot.

The claims here are the form's own, on a clock the test moves by hand: no sleeps."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest
import trio

from trinbox import InboxQueue, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._declare._limits import ClaimLimits
from trinbox._dialects._limited import CANDIDATES
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.lease import LeaseForm
from trinbox._holders._base import Ack, Delivery, FormContext, whole_seconds
from trinbox.errors import DatabaseError
from trinbox.testing import idle

from ..serving import make_app, serving
from ..stands import STANDS
from .conftest import Case
from .kit import DUE, HOUR, insert_rows, lease_form
from .schema import LeasedEmail, LeasedPlain
from .test_lease import ManualClock, broker_on

LEASE_CELLS = pytest.mark.parametrize(
    "case",
    [(stand, "lease") for stand in STANDS],
    ids=[f"{stand}-lease" for stand in STANDS],
    indirect=True,
)


@asynccontextmanager
async def limited_form(
    case: Case, clock: ManualClock, limits: ClaimLimits, row: type = LeasedEmail
) -> AsyncIterator[LeaseForm]:
    """The lease form of a subscription to group "emails" (or the whole table of a row
    without groups) under ``limits``, as ``Subscription.open`` builds it."""
    async with asyncio_loop(case.name != "sqlite"):
        broker = broker_on(case.stand, clock)
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
                lease=whole_seconds(broker.lease),
                limited=True,
            )
            yield lease_form(ctx)
        finally:
            await broker.aclose()


def limits_of(queue: InboxQueue[Any, Any, Any]) -> ClaimLimits:
    assert queue.limits is not None
    return queue.limits


def per_key(limit: int) -> ClaimLimits:
    return limits_of(InboxQueue(LeasedEmail, "emails").limit(key="customer", concurrency=limit))


def emails(case: Case, customers: Sequence[str | None]) -> None:
    insert_rows(
        case.stand,
        "email_jobs",
        [
            {
                "name": "emails",
                "customer": c,
                "retry_after": DUE,
                "payload": json.dumps({"to": c}).encode(),
            }
            for c in customers
        ],
    )


def keys_of(taken: Sequence[Delivery]) -> Counter[Any]:
    return Counter(d.values["customer"] for d in taken)


@LEASE_CELLS
async def test_a_key_at_its_limit_is_skipped_and_the_others_fill_the_claim(case: Case) -> None:
    # In claim order (id): five rows of a, then two of b, one of c.
    emails(case, ["a"] * 5 + ["b"] * 2 + ["c"])
    async with limited_form(case, ManualClock(), per_key(3)) as form:
        first = await form.claim(4)
        # a's fourth row waits for a free slot; b's first row is claimed beside a's three.
        assert keys_of(first) == {"a": 3, "b": 1}
        second = await form.claim(10)
        assert keys_of(second) == {"b": 1, "c": 1}
        assert list(await form.claim(10)) == []
        # An ack ends one of a's leases: one more of a's rows, not two.
        await form.settle(first[0], Ack())
        third = await form.claim(10)
        assert keys_of(third) == {"a": 1}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_claim_ranks_a_bounded_window_and_a_partial_claim_is_not_exhausted(
    case: Case,
) -> None:
    # A run of a's rows longer than the window, then b and c: the first claim ranks only a's
    # rows (one fits), and says so by not calling itself exhausted; the next skips a, at its
    # limit, and reaches b and c.
    emails(case, ["a"] * (CANDIDATES + 10) + ["b", "c"])
    async with limited_form(case, ManualClock(), per_key(1)) as form:
        first = await form.claim(4)
        assert keys_of(first) == {"a": 1}
        assert not first.exhausted
        second = await form.claim(3)
        assert keys_of(second) == {"b": 1, "c": 1}
        assert not second.exhausted
        third = await form.claim(1)
        assert list(third) == []
        assert third.exhausted


@LEASE_CELLS
async def test_a_lease_that_ends_frees_its_slot_and_nothing_else_counts(case: Case) -> None:
    emails(case, ["a"] * 6)
    clock = ManualClock()
    async with limited_form(case, clock, per_key(2)) as form:
        assert keys_of(await form.claim(10)) == {"a": 2}
        assert list(await form.claim(10)) == []
        # Their owner is gone (nothing settles them): the leases end, and so do their slots.
        # The two rows come back, and are claimed again within the limit.
        clock.now += form._ctx.lease + timedelta(seconds=1)
        again = await form.claim(10)
        assert keys_of(again) == {"a": 2}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_null_key_is_one_key_of_its_own(case: Case) -> None:
    emails(case, [None, None, None, "a"])
    async with limited_form(case, ManualClock(), per_key(2)) as form:
        assert keys_of(await form.claim(10)) == {None: 2, "a": 1}
        assert list(await form.claim(10)) == []

    # A NULL key's live leases count against its own rows as any key's do.
    case.stand.execute("DELETE FROM email_jobs")
    emails(case, [None] * 4)
    async with limited_form(case, ManualClock(), per_key(2)) as form:
        assert keys_of(await form.claim(1)) == {None: 1}
        assert keys_of(await form.claim(10)) == {None: 1}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_saturated_null_key_is_skipped_by_the_window(case: Case) -> None:
    # The window passes over the rows of saturated keys, a NULL key's too (a NOT IN of the
    # saturated keys never matches NULL, so the NULL key is checked apart).
    emails(case, [None] * (CANDIDATES + 10) + ["b"])
    async with limited_form(case, ManualClock(), per_key(1)) as form:
        assert keys_of(await form.claim(4)) == {None: 1}
        assert keys_of(await form.claim(4)) == {"b": 1}
        assert list(await form.claim(4)) == []


@LEASE_CELLS
async def test_the_whole_queue_cap_bounds_every_key_together(case: Case) -> None:
    emails(case, ["a", "b", "c", "d", "e", "f"])
    whole = limits_of(InboxQueue(LeasedEmail, "emails").limit(concurrency=4))
    async with limited_form(case, ManualClock(), whole) as form:
        first = await form.claim(3)
        assert len(first) == 3
        assert len(await form.claim(10)) == 1
        assert list(await form.claim(10)) == []
        await form.settle(first[0], Ack())
        assert len(await form.claim(10)) == 1


@LEASE_CELLS
async def test_a_per_key_limit_and_a_whole_queue_cap_together(case: Case) -> None:
    emails(case, ["a"] * 4 + ["b"] * 4 + ["c"] * 4)
    both = limits_of(
        InboxQueue(LeasedEmail, "emails").limit(key="customer", concurrency=2).limit(concurrency=5)
    )
    async with limited_form(case, ManualClock(), both) as form:
        taken = await form.claim(10)
        # In claim order a, a, b, b, c (c's second row would pass its key's limit, not the cap).
        assert keys_of(taken) == {"a": 2, "b": 2, "c": 1}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_another_group_s_leases_count_for_nothing(case: Case) -> None:
    insert_rows(
        case.stand,
        "email_jobs",
        [
            {"name": "other", "customer": "a", "retry_after": DUE, "payload": b"o"},
            {"name": "emails", "customer": "a", "retry_after": DUE, "payload": b"e"},
        ],
    )
    # The other group's row is leased, far into the future.
    case.stand.execute(
        "UPDATE email_jobs SET locked_until = ? WHERE name = 'other'",
        DUE.replace(year=2100),
    )
    async with limited_form(case, ManualClock(), per_key(1)) as form:
        assert keys_of(await form.claim(10)) == {"a": 1}


@LEASE_CELLS
async def test_a_table_without_groups_is_limited_whole(case: Case) -> None:
    insert_rows(
        case.stand,
        "plain_jobs",
        [{"tenant": t, "payload": b"p"} for t in ["x", "x", "y", "x"]],
    )
    limits = limits_of(InboxQueue(LeasedPlain, "plain").limit(key="tenant", concurrency=1))
    async with limited_form(case, ManualClock(), limits, row=LeasedPlain) as form:
        taken = await form.claim(10)
        assert Counter(d.values["tenant"] for d in taken) == {"x": 1, "y": 1}


# -- served: workers of one subscription ----------------------------------------------------


@dataclass
class Email:
    to: str


@LEASE_CELLS
async def test_served_a_key_never_has_more_than_n_in_work_and_other_keys_flow(
    case: Case,
) -> None:
    # A poll of an hour: every claim after the first is one a settling worker asks for.
    broker = case.stand.broker(poll_interval=HOUR, lease=30)
    in_work: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []
    changed = trio.Event()
    release: dict[str, trio.Event] = {"a": trio.Event(), "b": trio.Event()}

    queue = InboxQueue(LeasedEmail, "emails").workers(6).limit(key="customer", concurrency=2)

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
        # Six free workers, five rows of a first in claim order: two of a, and both of b.
        await until(lambda: in_work == {"a": 2, "b": 2})
        await idle(app, send)
        assert in_work == {"a": 2, "b": 2}
        # b's rows finish; a stays at its limit with three rows waiting, and no more of a
        # start although four workers are free.
        release["b"].set()
        await until(lambda: done.count("b") == 2)
        await idle(app, send)
        assert +in_work == {"a": 2}
        release["a"].set()
        await until(lambda: done.count("a") == 5)
    assert most == {"a": 2, "b": 2}
    assert case.stand.rows("SELECT job_id FROM email_jobs") == []


# -- MySQL's session lock never stays with a pooled connection -------------------------------


async def lock_is_free(case: Case) -> bool:
    """Whether another session gets the table's limit lock within five seconds (a session
    ended by an abandoned socket frees it as the server notices). On a thread: the socket's
    close runs on this thread's event loop meanwhile."""
    from trinbox._dialects.mysql import MySqlDialect

    name = MySqlDialect().limit_name(spec_of(LeasedEmail))
    found = await trio.to_thread.run_sync(case.stand.rows, f"SELECT GET_LOCK({name}, 5)")
    ((got,),) = found
    return bool(got == 1)


@pytest.mark.parametrize("case", [("mariadb", "lease")], ids=["mariadb-lease"], indirect=True)
@pytest.mark.parametrize("fails", ["claim", "release"])
async def test_a_failed_mysql_limited_claim_leaves_the_lock_free(
    case: Case, fails: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trinbox._forms import lease_claims

    emails(case, ["a", "b"])

    async def failing_claim(*args: object) -> list[Any]:
        raise DatabaseError("the select failed")

    async with limited_form(case, ManualClock(), per_key(1)) as form:
        ctx = form._ctx
        if fails == "claim":
            monkeypatch.setattr(lease_claims, "select_and_stamp", failing_claim)
        else:
            unlock = ctx.statements.limit_unlock
            assert unlock is not None
            # The release's statement fails: the connection is abandoned, not given back.
            bad = replace(ctx.statements, limit_unlock=replace(unlock, sql="SELECT nope()"))
            form._ctx = replace(ctx, statements=bad)
        if fails == "claim":
            # The select failed: nothing is claimed, and the release went through.
            with pytest.raises(DatabaseError):
                await form.claim(10)
            assert await lock_is_free(case)
            monkeypatch.undo()
            assert keys_of(await form.claim(10)) == {"a": 1, "b": 1}
        else:
            # The stamps committed: the claim stands; its connection is closed, not pooled,
            # and the server frees the lock with its session.
            assert keys_of(await form.claim(10)) == {"a": 1, "b": 1}
            assert await lock_is_free(case)
            form._ctx = ctx
