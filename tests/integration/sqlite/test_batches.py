"""Batches on SQLite, lease and advisory forms (REFERENCE.md §6.3, §10.2 batches.rs)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from trinbox import (
    HandlerOutcome,
    Inbox,
    InboxQueue,
    IntegrityError,
    Lease,
    Subscriber,
    subscriber,
)

from .harness import Db, make_app, serving
from .tables2 import (
    JOB_FORMS,
    JOBS,
    MAIL_FORMS,
    MAIL_JOBS,
    LeasedMail,
    LockedMail,
    insert_jobs,
)


@dataclass
class Job:
    n: int


def payloads(*ns: int) -> list[bytes]:
    return [json.dumps({"n": n}).encode() for n in ns]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_one_claim_is_one_batch(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(JOBS)
    insert_jobs(db, payloads(1, 2, 3, 4, 5, 6))
    broker = db.broker(poll_interval=3600)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(row, "jobs").batch(4))
    async def handle(jobs: list[Job]) -> None:
        batches.append(sorted(job.n for job in jobs))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(6)
    assert [len(b) for b in batches] == [4, 2]
    assert sorted(n for b in batches for n in b) == [1, 2, 3, 4, 5, 6]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_each_delivery_of_a_batch_settles_on_its_own(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, payloads(1, 2, 3))
    broker = db.broker(poll_interval=3600)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(row, "jobs").batch(4))
    async def handle(jobs: list[Job]) -> list[HandlerOutcome]:
        batches.append([job.n for job in jobs])
        return [HandlerOutcome.retry() if job.n == 2 else HandlerOutcome.ack() for job in jobs]

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(3)
    assert [sorted(b) for b in batches] == [[1, 2, 3]]
    # Only the retried row is left, released at once with its attempt counted.
    assert db.rows("SELECT id, attempt, locked_until FROM jobs") == [(2, 2, None)]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_failed_settlement_leaves_the_others_of_its_batch(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(JOBS)
    insert_jobs(db, payloads(1, 2, 3))
    db.script("INSERT INTO refs (job_id) VALUES (2);")  # deleting job 2 now fails
    broker = db.broker(poll_interval=3600)

    @subscriber(InboxQueue(row, "jobs").batch(4))
    async def handle(jobs: list[Job]) -> HandlerOutcome:
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        sub = app.subscription(handle)
        with trio.fail_after(10):
            await sub.wait_finished(3)
        errors = list(sub.settle_errors)
    assert db.rows("SELECT id, attempt FROM jobs") == [(2, 2)]
    if row.__inbox_spec__.form is Lease:
        # The failed ack leaves the row leased until its lease runs out (like a crash).
        assert db.value("SELECT locked_until FROM jobs") is not None
        ack = "DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?"
    else:
        ack = "DELETE FROM `jobs` WHERE `id` = ?"
    assert len(errors) == 1
    assert isinstance(errors[0], IntegrityError)
    assert re.fullmatch(
        re.escape(f"FOREIGN KEY constraint failed (while running: {ack})"), str(errors[0])
    )


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_undecodable_rows_leave_their_batch_alone(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(JOBS)
    insert_jobs(db, [*payloads(1, 2), b"not json", *payloads(4)])
    broker = db.broker(poll_interval=3600)
    batches: list[list[int]] = []

    @subscriber(InboxQueue(row, "jobs").batch(4))
    async def handle(jobs: list[Job]) -> None:
        batches.append(sorted(job.n for job in jobs))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(4)
    # The undecodable row was dropped by the default decode policy (finished, deleted).
    assert batches == [[1, 2, 4]]
    assert db.rows("SELECT * FROM jobs") == []


@pytest.mark.parametrize("row", MAIL_FORMS)
async def test_row_mode_batch_takes_a_list_of_rows(db: Db, row: type[Inbox[Any, Any]]) -> None:
    db.script(MAIL_JOBS)
    for i in range(6):
        db.script(f"INSERT INTO mail_jobs (recipient) VALUES ('r{i}@example.com');")
    broker = db.broker(poll_interval=3600)
    batches: list[list[LeasedMail | LockedMail]] = []

    @subscriber(InboxQueue(LeasedMail, "mail").batch(4))
    async def leased(mails: list[LeasedMail]) -> None:
        batches.append(list(mails))

    @subscriber(InboxQueue(LockedMail, "mail").batch(4))
    async def locked(mails: list[LockedMail]) -> None:
        batches.append(list(mails))

    handle: Subscriber[Any, Any] = leased if row is LeasedMail else locked
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(10):
            await app.subscription(handle).wait_finished(6)
    assert [len(b) for b in batches] == [4, 2]
    assert all(type(mail) is row for b in batches for mail in b)
    recipients = sorted(mail.recipient for b in batches for mail in b)
    assert recipients == [f"r{i}@example.com" for i in range(6)]
    assert db.rows("SELECT * FROM mail_jobs") == []
