"""A queue's own claim (``InboxQueue.custom_claim``) in the row lock and lease forms, on every
stand: the reference's example, a claim that takes only rows of tenants whose plan allows it.
PostgreSQL reads the claimed rows by id itself; MySQL and SQLite need the queue's fetch."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import DatabaseClock, HandlerOutcome, InboxQueue, SqlBroker, keys, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._engine.custom_claims import custom_claim_for
from trinbox._forms.table import make_form
from trinbox._holders._base import Ack, ClaimForm, FormContext
from trinbox.errors import ClaimFailed, UnsupportedFetch
from trinbox.testing import settled
from trinbox.typing import Held

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import cells

ON_ROW_LOCK_AND_LEASE = cells(forms=("row_lock", "lease"))

TENANTS = {
    "sqlite": "CREATE TABLE tenants (tenant TEXT PRIMARY KEY, plan TEXT NOT NULL)",
    "postgres": "CREATE TABLE tenants (tenant TEXT PRIMARY KEY, plan TEXT NOT NULL)",
    "mariadb": "CREATE TABLE tenants (tenant VARCHAR(191) PRIMARY KEY, plan TEXT NOT NULL)",
}


@dataclass
class Job:
    to: str


def tenants(stand: Stand, **plans: str) -> None:
    stand.script(TENANTS[stand.name])
    for tenant, plan in plans.items():
        stand.execute("INSERT INTO tenants (tenant, plan) VALUES (?, ?)", tenant, plan)


def jobs(stand: Stand, *owners: str) -> None:
    """One due plain_jobs row per tenant named, ids 1, 2, ... in order."""
    for n, tenant in enumerate(owners):
        stand.execute(
            "INSERT INTO plain_jobs (tenant, payload) VALUES (?, ?)",
            tenant,
            f'{{"to":"{n}@x"}}'.encode(),
        )


def slots(case: Case, count: int) -> str:
    """``count`` placeholders in the stand driver's own style."""
    if case.name == "postgres":
        return ", ".join(f"${n + 1}" for n in range(count))
    return ", ".join(["%s" if case.name == "mariadb" else "?"] * count)


def gold_claim(case: Case) -> Any:
    """The ids of rows of tenants on the gold plan, in id order. The row lock claim locks
    them, passing over rows other claims hold; the lease claim passes over rows under a lease
    (the stamps guard its rows: an id whose lease holds is left out). The tenants are read
    first, apart: a locking read locks the rows of every table it reads (MySQL: in its
    subqueries too), and a second claim would pass over the locked tenant's every row."""
    lock = " FOR UPDATE SKIP LOCKED" if case.form == "row_lock" else ""
    free = " AND locked_until IS NULL" if case.form == "lease" else ""

    async def claim(conn: Held, group: str | None, limit: int) -> list[object]:
        assert group is None  # plain_jobs has no group column
        gold = [
            row[0]
            for row in await conn.fetch("SELECT tenant FROM tenants WHERE plan = :p", {"p": "gold"})
        ]
        if not gold:
            return []
        sql = (
            f"SELECT id FROM plain_jobs WHERE tenant IN ({slots(case, len(gold))}){free} "
            f"ORDER BY id LIMIT {int(limit)}{lock}"
        )
        return [row[0] for row in await conn.fetch(sql, *gold)]

    return claim


def fetch_by_hand(case: Case, *, leave_out: Sequence[int] = ()) -> Any:
    """The queue's fetch: the rows of ``ids`` in the row class's column order (``leave_out``:
    ids it reads no row for, as a join might)."""
    columns = ", ".join(col.column for col in spec_of(case.plain).columns)

    async def fetch(conn: Held, ids: list[int]) -> list[tuple[object, ...]]:
        wanted = [i for i in ids if i not in leave_out]
        if not wanted:
            return []
        sql = f"SELECT {columns} FROM plain_jobs WHERE id IN ({slots(case, len(wanted))})"
        return [tuple(row) for row in await conn.fetch(sql, *wanted)]

    return fetch


def queue(case: Case, *, leave_out: Sequence[int] = ()) -> InboxQueue[Any, Any, Any]:
    """A queue of plain_jobs claiming gold tenants' rows; the fetch by hand where the stand
    needs one (and wherever a test leaves a row out)."""
    fetch = fetch_by_hand(case, leave_out=leave_out)
    needs_fetch = case.name != "postgres" or leave_out
    return InboxQueue(case.plain, "jobs").custom_claim(
        gold_claim(case), fetch=fetch if needs_fetch else None
    )


def attempts(stand: Stand) -> list[tuple[int, int, str]]:
    return stand.rows("SELECT id, attempt, tenant FROM plain_jobs ORDER BY id")


@ON_ROW_LOCK_AND_LEASE
async def test_a_custom_claim_serves_only_the_rows_it_takes(case: Case) -> None:
    tenants(case.stand, acme="gold", beta="free")
    jobs(case.stand, "acme", "beta", "acme")
    broker = case.stand.broker()
    seen: list[str] = []

    @subscriber(queue(case))
    async def send(job: Job) -> HandlerOutcome:
        seen.append(job.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(20):
            await settled(app, send, 2)
    assert seen == ["0@x", "2@x"]
    # The free tenant's row was never claimed: its attempt stands, and no lease is on it.
    assert attempts(case.stand) == [(2, 1, "beta")]
    if case.form == "lease":
        assert case.stand.rows("SELECT locked_until FROM plain_jobs") == [(None,)]


@asynccontextmanager
async def custom_form(case: Case, given: InboxQueue[Any, Any, Any]) -> AsyncGenerator[ClaimForm]:
    """The form a subscription to ``given`` runs, on an open broker of ``case``'s stand."""
    async with asyncio_loop(case.name != "sqlite"):
        broker = case.stand.broker()
        await broker.open()
        try:
            spec = spec_of(case.plain)
            yield make_form(
                FormContext(
                    spec=spec,
                    dialect=broker.dialect,
                    statements=build_plan(broker.dialect, spec, custom_claim=True),
                    pool=broker.pool,
                    clock=broker.clock,
                    group=None,
                    custom=custom_claim_for(given.custom, spec, broker.dialect),
                )
            )
        finally:
            await broker.aclose()


@ON_ROW_LOCK_AND_LEASE
async def test_a_second_claim_takes_none_of_the_rows_in_work(case: Case) -> None:
    # Row lock: the claim's SKIP LOCKED passes over the rows the first claim holds. Lease:
    # the claim passes over leased rows.
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme", "acme", "acme")
    async with custom_form(case, queue(case)) as first, custom_form(case, queue(case)) as second:
        taken = await first.claim(2)
        assert [(d.id, d.attempt) for d in taken] == [(1, 1), (2, 1)]
        again = await second.claim(2)
        assert [d.id for d in again] == [3]
        assert again.exhausted  # it took fewer than it asked for: the claim loop waits
        nothing = await second.claim(2)
        assert (list(nothing), nothing.exhausted) == ([], True)
        if case.form == "lease":
            # A claim that ignores leases takes nothing while they hold: its stamps leave
            # out every id, and the claim counts as exhausted (no claim again at once).

            async def careless(conn: Held, group: str | None, limit: int) -> list[object]:
                return [1, 2]

            fetch = None if case.name == "postgres" else fetch_by_hand(case)
            given = InboxQueue(case.plain, "jobs").custom_claim(careless, fetch=fetch)
            async with custom_form(case, given) as third:
                stamped_out = await third.claim(2)
                assert (list(stamped_out), stamped_out.exhausted) == ([], True)
        for delivery in [*taken, *again]:
            await (first if delivery in taken else second).settle(delivery, Ack())
    assert attempts(case.stand) == []


@ON_ROW_LOCK_AND_LEASE
async def test_a_claimed_id_whose_fetch_reads_no_row_settles_by_the_decode_policy(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme", "acme")
    broker = case.stand.broker()
    seen: list[str] = []

    @subscriber(queue(case, leave_out=[1]))
    async def send(job: Job) -> HandlerOutcome:
        seen.append(job.to)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    with caplog.at_level(logging.WARNING):
        async with serving(app):
            with trio.fail_after(20):
                await settled(app, send, 2)
    assert seen == ["1@x"]
    # The decode policy's default drops the row: it is finished, as a row that does not decode.
    assert attempts(case.stand) == []
    assert "a claimed id has no row (the custom claim's fetch read none)" in caplog.text


@ON_ROW_LOCK_AND_LEASE
async def test_a_custom_claim_that_raises_fails_its_claim_and_the_next_one_serves(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme")
    claims = 0
    gold = gold_claim(case)

    async def flaky(conn: Held, group: str | None, limit: int) -> list[object]:
        nonlocal claims
        claims += 1
        if claims == 1:
            raise ValueError("tenants service unreachable")
        ids: list[object] = await gold(conn, group, limit)
        return ids

    fetch = None if case.name == "postgres" else fetch_by_hand(case)
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.plain, "jobs").custom_claim(flaky, fetch=fetch))
    async def send(job: Job) -> HandlerOutcome:
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    with caplog.at_level(logging.WARNING):
        async with serving(app):
            with trio.fail_after(20):
                await settled(app, send, 1)
    assert claims >= 2
    failed = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], ClaimFailed)]
    assert failed, caplog.text
    assert str(failed[0].exc_info[1]) == (  # type: ignore[index]
        f"{spec_of(case.plain).label}: the queue's custom claim raised "
        "ValueError('tenants service unreachable'); the claim rolled back"
    )
    assert attempts(case.stand) == []


@ON_ROW_LOCK_AND_LEASE
async def test_a_custom_claim_returning_more_ids_than_asked_fails_and_takes_nothing(
    case: Case,
) -> None:
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme", "acme")

    async def greedy(conn: Held, group: str | None, limit: int) -> list[int]:
        return [1, 2]

    fetch = None if case.name == "postgres" else fetch_by_hand(case)
    given = InboxQueue(case.plain, "jobs").custom_claim(greedy, fetch=fetch)
    async with custom_form(case, given) as form:
        with pytest.raises(
            ClaimFailed, match=r"returns at most the 1 ids it is asked for, found 2"
        ):
            await form.claim(1)
        assert form.in_work == 0
    # Nothing was stamped or counted: the claim's transaction rolled back.
    assert attempts(case.stand) == [(1, 1, "acme"), (2, 1, "acme")]


@cells(forms=("row_lock", "lease"), stands=("mariadb", "sqlite"))
async def test_without_a_fetch_a_dialect_that_binds_no_list_is_refused_at_include(
    case: Case,
) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.plain, "jobs").custom_claim(gold_claim(case)))
    async def send(job: Job) -> HandlerOutcome:
        return HandlerOutcome.ack()

    rule = (
        r"a custom claim's rows are read by id, and (MySQL|SQLite) has no statement that "
        r"binds a list of ids, found \.custom_claim\(\) without fetch=; pass fetch=, an "
        r"async function reading the rows of the ids it is given$"
    )
    with pytest.raises(UnsupportedFetch, match=rule):
        make_app().include(broker, send)


@cells(forms=("lease",), stands=("sqlite",))
async def test_a_lease_claim_on_sqlites_database_clock_stamps_the_servers_token(
    case: Case,
) -> None:
    # The servers' brokers run on the database clock already; SQLite's asks for it. The
    # stamps write the token read from the server, so the ack, conditioned on it, holds.
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme", "acme")
    broker = SqlBroker.sqlite(case.stand.url, poll_interval=0.05, clock=DatabaseClock())
    leases: list[object] = []

    @subscriber(queue(case))
    async def send(job: Job) -> HandlerOutcome:
        leases.extend(row[0] for row in case.stand.rows("SELECT locked_until FROM plain_jobs"))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(20):
            await settled(app, send, 2)
    assert attempts(case.stand) == []
    assert leases and all(isinstance(lease, str) for lease in leases if lease is not None)


NOTES = "CREATE TABLE notes (body VARCHAR(100) NOT NULL)"


@ON_ROW_LOCK_AND_LEASE
async def test_a_transactional_custom_claim_commits_the_handlers_writes_with_the_ack(
    case: Case,
) -> None:
    tenants(case.stand, acme="gold")
    jobs(case.stand, "acme")
    case.stand.script(NOTES)
    broker = case.stand.broker()
    outcomes = [HandlerOutcome.retry(), HandlerOutcome.ack()]

    @subscriber(queue(case).transactional())
    async def send(job: Job, tx: keys.Tx) -> HandlerOutcome:
        outcome = outcomes.pop(0)
        await tx.execute("INSERT INTO notes (body) VALUES (:body)", {"body": repr(outcome)})
        return outcome

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(20):
            await settled(app, send, 2)
    # The retry discarded its write; the ack committed its own with the settlement.
    assert case.stand.rows("SELECT body FROM notes") == [(repr(HandlerOutcome.ack()),)]
    assert attempts(case.stand) == []
