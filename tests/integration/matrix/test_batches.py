"""Batches on every stand and form (docs/reference.md#batches, docs/reference.md#scenarios-batches).

The row lock form's all-or-nothing batch (BatchRolledBack) is in test_row_lock.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import (
    HandlerOutcome,
    InboxQueue,
    IntegrityError,
    LeaseLost,
    Subscriber,
    subscriber,
)
from trinbox._dialects.plans import build_plan
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, HOUR, cells, insert_emails, insert_rows
from .schema import EMAIL_REFS, MAIL, MAIL_JOBS, LeasedMail, LockedMail, RowLockedMail


@dataclass
class Job:
    n: int


def payloads(*ns: int) -> list[bytes]:
    return [json.dumps({"n": n}).encode() for n in ns]


async def test_one_claim_is_one_batch(case: Case) -> None:
    insert_emails(case.stand, payloads(1, 2, 3, 4, 5, 6))
    broker = case.stand.broker(poll_interval=HOUR)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job]) -> None:
        batches.append(sorted(job.n for job in jobs))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 6)
    # A full claim triggers the next one at once, whatever the poll interval.
    assert batches == [[1, 2, 3, 4], [5, 6]]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_each_delivery_of_a_batch_settles_on_its_own(case: Case) -> None:
    insert_emails(case.stand, payloads(1, 2, 3))
    broker = case.stand.broker(poll_interval=HOUR)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job]) -> list[HandlerOutcome]:
        batches.append([job.n for job in jobs])
        return [HandlerOutcome.retry() if job.n == 2 else HandlerOutcome.ack() for job in jobs]

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 3)
    # One claim, in claim order.
    assert batches == [[1, 2, 3]]
    # Only the retried row is left, released at once with its attempt counted (every form
    # counts one retried delivery as attempt 2: at the claim, or when the retry settles).
    assert case.stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs") == [(2, 2, None)]


@cells(forms=["lease", "advisory"])
async def test_failed_settlement_leaves_the_others_of_its_batch(case: Case) -> None:
    stand = case.stand
    stand.script(EMAIL_REFS[stand.name])
    insert_emails(stand, payloads(1, 2, 3))
    stand.execute("INSERT INTO email_refs (job_id) VALUES (2)")  # deleting job 2 now fails
    broker = stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job]) -> HandlerOutcome:
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 3)
        errors = list(app.statistics(handle).settle_errors)
    # The acks of rows 1 and 3 stand; row 2 is left, its attempt counted at the claim.
    assert stand.rows("SELECT job_id, attempt FROM email_jobs") == [(2, 2)]
    ack = build_plan(broker.dialect, case.email.__inbox_spec__).ack.sql
    if case.form == "lease":
        # The failed ack leaves the row leased until its lease runs out (like a crash).
        assert stand.value("SELECT locked_until FROM email_jobs") is not None
    else:
        # The advisory form released the key with the failed settlement: the row is back.
        assert stand.value("SELECT locked_until FROM email_jobs") is None
    refused = {
        "sqlite": "FOREIGN KEY constraint failed",
        "postgres": (
            'ForeignKeyViolationError: update or delete on table "email_jobs" violates foreign '
            'key constraint "email_refs_job_id_fkey" on table "email_refs" (Key (job_id)=(2) is '
            'still referenced from table "email_refs".)'
        ),
        "mariadb": (
            "IntegrityError: Cannot delete or update a parent row: a foreign key constraint "
            f"fails (`{stand.url.rsplit('/', 1)[1]}`.`email_refs`, CONSTRAINT `email_refs_job` "
            "FOREIGN KEY (`job_id`) REFERENCES `email_jobs` (`job_id`))"
        ),
    }[stand.name]
    assert [type(e) for e in errors] == [IntegrityError]
    assert re.fullmatch(re.escape(f"{refused} (while running: {ack})"), str(errors[0]))


@cells(forms=["lease"])
async def test_rows_of_a_lease_batch_settle_together_and_a_lost_lease_fails_alone(
    case: Case,
) -> None:
    stand = case.stand
    insert_emails(stand, payloads(1, 2, 3, 4))
    broker = stand.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job]) -> list[HandlerOutcome]:
        # Row 2's lease is gone (as if it ran out and another claim took the row).
        stand.execute("UPDATE email_jobs SET locked_until = retry_after WHERE job_id = 2")
        return [HandlerOutcome.ack()] * 2 + [HandlerOutcome.retry()] * 2

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 4)
        errors = list(app.statistics(handle).settle_errors)
    # The two acks and the two retries each ran as one group: row 1 is gone, rows 3 and 4 are
    # back with their leases cleared; row 2's settlement alone failed and changed nothing.
    assert [(type(e), e.id) for e in errors] == [(LeaseLost, 2)]  # type: ignore[attr-defined]
    remaining = stand.rows("SELECT job_id, attempt, locked_until FROM email_jobs ORDER BY job_id")
    assert [(job, attempt) for job, attempt, _ in remaining] == [(2, 2), (3, 2), (4, 2)]
    assert [locked is None for _, _, locked in remaining] == [False, True, True]


async def test_undecodable_rows_leave_their_batch_alone(case: Case) -> None:
    insert_emails(case.stand, [*payloads(1, 2), b"not json", *payloads(4)])
    broker = case.stand.broker(poll_interval=HOUR)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(case.email, "emails").batch(4))
    async def handle(jobs: list[Job]) -> None:
        batches.append(sorted(job.n for job in jobs))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 4)
    # The undecodable row was dropped by the default decode policy (finished, deleted).
    assert batches == [[1, 2, 4]]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_row_mode_batch_takes_a_list_of_rows(case: Case) -> None:
    stand = case.stand
    stand.script(MAIL_JOBS[stand.name])
    insert_rows(
        stand,
        "mail_jobs",
        [{"recipient": f"r{i}@example.com", "retry_after": DUE} for i in range(6)],
    )
    broker = stand.broker(poll_interval=HOUR)
    row = MAIL[case.form]
    batches: list[list[object]] = []

    @subscriber(InboxQueue(RowLockedMail, "mail").batch(4))
    async def row_locked(mails: list[RowLockedMail]) -> None:
        batches.append(list(mails))

    @subscriber(InboxQueue(LeasedMail, "mail").batch(4))
    async def leased(mails: list[LeasedMail]) -> None:
        batches.append(list(mails))

    @subscriber(InboxQueue(LockedMail, "mail").batch(4))
    async def locked(mails: list[LockedMail]) -> None:
        batches.append(list(mails))

    handlers: dict[str, Subscriber[Any, Any]] = {
        "row_lock": row_locked,
        "lease": leased,
        "advisory": locked,
    }
    handle = handlers[case.form]
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, handle, 6)
    assert [len(b) for b in batches] == [4, 2]
    assert all(type(mail) is row for b in batches for mail in b)
    recipients = sorted(str(getattr(mail, "recipient", "")) for b in batches for mail in b)
    assert recipients == [f"r{i}@example.com" for i in range(6)]
    assert stand.rows("SELECT * FROM mail_jobs") == []
