"""Failed claims, failing handlers and settlements that find their row gone, on every stand and form
(docs/reference.md#claim-loop, docs/reference.md#handler-outcomes,
docs/reference.md#scenarios-failures, docs/reference.md#scenarios-databases)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import (
    DatabaseError,
    FailurePolicy,
    HandlerFailed,
    HandlerOutcome,
    InboxQueue,
    LeaseLost,
    OnFailure,
    keys,
    subscriber,
)
from trinbox._dialects.plans import build_plan
from trinbox._drivers.mysql import MySqlConnection
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import Stand
from .conftest import Case
from .kit import HOUR, ClaimWatch, cells, insert_emails, insert_rows, where
from .schema import LeasedPlain

FAIL_FAST = OnFailure(handler=FailurePolicy.FAIL_FAST)


@dataclass
class Job:
    n: int


def rename(stand: Stand, old: str, new: str) -> None:
    stand.script(f"ALTER TABLE {old} RENAME TO {new}")


def returned(case: Case, deliveries: int) -> int:
    """The attempt column after ``deliveries`` deliveries that were dropped unsettled: the row
    lock form's rollback counts nothing; the lease and advisory forms counted each claim."""
    return 1 if case.form == "row_lock" else 1 + deliveries


def missing_table(case: Case) -> str:
    """How each stand says that email_jobs does not exist."""
    database = case.stand.url.rsplit("/", 1)[1]
    return {
        "sqlite": "no such table: email_jobs",
        "postgres": 'UndefinedTableError: relation "email_jobs" does not exist',
        "mariadb": f"ProgrammingError: Table '{database}.email_jobs' doesn't exist",
    }[case.name]


async def test_failed_claim_waits_one_second_not_the_poll_interval(
    case: Case,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stand = case.stand
    insert_emails(stand, [b'{"n": 1}'])
    watch = ClaimWatch(monkeypatch)

    async def move_the_table(n: int) -> None:
        # After the startup checks: the first claim finds no table, the second finds it back.
        if n == 1:
            rename(stand, "email_jobs", "email_jobs_gone")
        elif n == 2:
            rename(stand, "email_jobs_gone", "email_jobs")

    watch.before = move_the_table
    broker = stand.broker(poll_interval=HOUR, lease=8 * HOUR)
    handled: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        handled.append(trio.current_time())

    app = make_app()
    app.include(broker, handle)
    with caplog.at_level(logging.WARNING, logger="trinbox"):
        async with serving(app):
            with trio.fail_after(HOUR / 2):
                await settled(app, handle, 1)
    claim = build_plan(broker.dialect, case.email.__inbox_spec__).claim[0].sql
    assert [type(e) for e in watch.failed] == [DatabaseError]
    assert str(watch.failed[0]) == f"{missing_table(case)} (while running: {claim})"
    gap = watch.times[1] - watch.times[0]
    assert 1.0 <= gap < 1.5
    assert len(handled) == 1
    assert handled[0] < 1.5
    failures = [r for r in caplog.records if "claim failed" in r.getMessage()]
    assert [r.getMessage() for r in failures] == [
        "a claim failed; next claim in 1 s [subscription=emails table=email_jobs]"
    ]
    assert [(r.name, r.subscription, r.table) for r in failures] == [  # type: ignore[attr-defined]
        ("trinbox.claim", "emails", "email_jobs")
    ]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_handler_exception_under_fail_fast_stops_serve_and_returns_the_row(
    case: Case,
) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    boom = RuntimeError("boom")

    @subscriber(InboxQueue(case.email, "emails").on_failure(FAIL_FAST))
    async def handle(job: Job) -> None:
        raise boom

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        with pytest.raises(
            HandlerFailed,
            match=r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$",
        ) as failed:
            await app.serve()
    assert failed.value.__cause__ is boom
    # The delivery was dropped: the row is back at once.
    assert case.stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs") == [
        (1, returned(case, 1), None)
    ]


async def test_a_result_that_is_not_an_outcome_is_a_handler_failure(case: Case) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    results: Sequence[object] = ["ack", [HandlerOutcome.ack()], 0]
    for served, result in enumerate(results, start=1):
        broker = case.stand.broker(poll_interval=HOUR)

        @subscriber(InboxQueue(case.email, "emails").on_failure(FAIL_FAST))
        async def handle(job: Job) -> Any:
            return result  # noqa: B023 - each handler serves once, in its own loop turn

        app = make_app()
        app.include(broker, handle)
        with trio.fail_after(10):
            with pytest.raises(HandlerFailed) as failed:
                await app.serve()
        cause = failed.value.__cause__
        assert isinstance(cause, TypeError)
        found = type(result).__name__
        assert str(cause) == (
            f"{where(handle)}: a handler returns a HandlerOutcome or None, found {found}"
        )
        assert case.stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs") == [
            (1, returned(case, served), None)
        ]


async def test_a_result_that_is_not_an_outcome_follows_the_failure_policy(
    case: Case,
    clock: VirtualClock,  # the backoff between attempts passes in virtual time
) -> None:
    insert_emails(case.stand, [b'{"n": 1}'])
    broker = case.stand.broker(poll_interval=HOUR)
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails"))  # the default policy retries
    async def handle(job: Job, attempt: keys.Attempt) -> Any:
        attempts.append(attempt)
        return "ack" if attempt == 1 else None

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 2)
    assert attempts == [1, 2]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_a_batch_result_of_the_wrong_length_is_a_handler_failure(case: Case) -> None:
    insert_emails(case.stand, [b'{"n": 1}', b'{"n": 2}'])
    broker = case.stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails").batch(4).on_failure(FAIL_FAST))
    async def handle(jobs: list[Job]) -> list[HandlerOutcome]:
        return [HandlerOutcome.ack()]

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10):
        with pytest.raises(HandlerFailed) as failed:
            await app.serve()
    cause = failed.value.__cause__
    assert isinstance(cause, TypeError)
    assert re.fullmatch(
        re.escape(
            f"{where(handle)}: a batch handler returns one outcome per row, found 1 for 2 rows"
        ),
        str(cause),
    )
    # Neither row was settled: both are back.
    attempt = returned(case, 1)
    assert case.stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs ORDER BY 1") == [
        (1, attempt, None),
        (2, attempt, None),
    ]


@cells(forms=["lease"], stands=["mariadb"])
async def test_a_dead_letter_move_whose_delete_finds_no_row_moves_nothing(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL moves a row into its dead letter table with two statements, copy then delete, in
    one transaction. When another claim takes the row between them (its lease ran out), the
    delete finds no row under the delivery's lease: the copy is undone and the settlement
    reports LeaseLost."""
    stand = case.stand
    insert_rows(stand, "plain_jobs", [{"payload": b'{"n": 1}'}])
    stolen = "2031-01-01 00:00:00"
    execute = MySqlConnection.execute

    async def steal_after_the_copy(
        conn: MySqlConnection, sql: str, params: Sequence[object] = ()
    ) -> int:
        changed = await execute(conn, sql, params)
        if sql.startswith("INSERT INTO `plain_jobs_dead`"):
            # Another claim leases the row (at READ COMMITTED the copy read it unlocked).
            stand.execute("UPDATE plain_jobs SET locked_until = ?", stolen)
        return changed

    monkeypatch.setattr(MySqlConnection, "execute", steal_after_the_copy)
    broker = stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(LeasedPlain, "plain"))
    async def handle(job: Job) -> HandlerOutcome:
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, handle).max_attempts(1).dead_letter("plain_jobs_dead")
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 1)
        errors = list(app.statistics(handle).settle_errors)
    assert [type(e) for e in errors] == [LeaseLost]
    assert str(errors[0]) == (
        "plain_jobs (LeasedPlain): a settlement holds only while its lease does, found the "
        "lease of row 1 ran out and another claim took it; the settlement had no effect (keep "
        "handlers within the lease, or lengthen it)"
    )
    assert isinstance(errors[0], LeaseLost)
    assert errors[0].id == 1
    # Nothing moved: the row stays under the other claim's lease, the dead table is empty.
    assert stand.rows("SELECT id, attempt, CAST(locked_until AS CHAR) FROM plain_jobs") == [
        (1, 2, stolen)
    ]
    assert stand.rows("SELECT * FROM plain_jobs_dead") == []
