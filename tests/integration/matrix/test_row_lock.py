"""The row lock form on the servers (docs/reference.md#row-lock-form,
docs/reference.md#acceptance-scenarios): the claim's transaction holds the row (FOR UPDATE SKIP
LOCKED) for the whole handler; a settlement runs in it and commits, a retry counts the attempt as it
settles, a drop rolls back; the rows of a batch share the transaction and commit all or nothing; the
transaction opens at the table's declared level (READ COMMITTED by default on MariaDB)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Attempt,
    FailurePolicy,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    OnFailure,
    Payload,
    RepeatableRead,
    RetryAfter,
    RowLock,
    Serializable,
    keys,
    subscriber,
)
from trinbox.errors import BatchRolledBack, HandlerFailed, IntegrityError
from trinbox.testing import idle, settled

from ..serving import make_app, serving
from ..stands import SERVER_STANDS, PostgresStand, Stand
from .conftest import Case
from .kit import ClaimWatch
from .schema import EMAIL_REFS, RowLockedEmail

# The row lock form on the servers.
ROW_LOCK = pytest.mark.parametrize(
    "case",
    [(stand, "row_lock") for stand in SERVER_STANDS],
    ids=[f"{stand}-row_lock" for stand in SERVER_STANDS],
    indirect=True,
)
pytestmark = ROW_LOCK


@dataclass
class Email:
    to: str


def open_transactions(stand: Stand) -> int:
    """Sessions of the stand's database with a transaction open, other than the reader's."""
    if isinstance(stand, PostgresStand):
        return int(
            stand.value(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state = 'idle in transaction'"
            )
        )
    # InnoDB refreshes the cache behind INNODB_TRX at most every 0.1 s: let it go stale first.
    time.sleep(0.15)
    return int(
        stand.value(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
            "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
            "WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID()"
        )
    )


def lockable(stand: Stand) -> list[int]:
    """The email_jobs rows another connection can lock without waiting."""
    return [
        int(row[0])
        for row in stand.rows(
            "SELECT job_id FROM email_jobs ORDER BY job_id FOR UPDATE SKIP LOCKED"
        )
    ]


async def take_one(stand: Stand) -> list[int]:
    """Serve ``stand`` with a fresh app whose poll interval is an hour, ack the first row it
    takes (its first claim, at once), and return the attempts the handler saw."""
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []

    @subscriber(InboxQueue(RowLockedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 1)
    return attempts


async def test_the_claim_holds_its_transaction_for_the_whole_handler(case: Case) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    in_work = trio.Event()
    finish = trio.Event()

    @subscriber(InboxQueue(RowLockedEmail, "emails"))
    async def send(email: Email) -> None:
        in_work.set()
        await finish.wait()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(RowLockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await in_work.wait()
        # The claim's transaction is open and holds the row: another connection sees it,
        # uncounted, but cannot lock it.
        assert open_transactions(stand) == 1
        assert stand.rows("SELECT job_id, attempt FROM email_jobs") == [(1, 1)]
        assert lockable(stand) == []
        finish.set()
        with trio.fail_after(10):
            await settled(app, send, 1)
        # The ack deleted the row and committed.
        assert stand.rows("SELECT * FROM email_jobs") == []
        assert open_transactions(stand) == 0


async def test_a_retry_counts_the_attempt_as_it_settles(case: Case) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []
    columns: list[int] = []

    @subscriber(InboxQueue(RowLockedEmail, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        # What another connection reads while the handler runs: the claim counted nothing.
        columns.append(int(stand.value("SELECT attempt FROM email_jobs")))
        return HandlerOutcome.retry() if len(attempts) == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(RowLockedEmail, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 2)
    assert attempts == [1, 2]
    # The retry's count committed with its settlement, before the second delivery.
    assert columns == [1, 2]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_a_dropped_delivery_rolls_back_and_its_row_returns_uncounted(case: Case) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    attempts: list[int] = []
    seen_at_shutdown: list[list[int]] = []
    queue = InboxQueue(RowLockedEmail, "emails").on_failure(
        OnFailure(handler=FailurePolicy.FAIL_FAST)
    )

    @subscriber(queue)
    async def send(email: Email, attempt: keys.Attempt) -> None:
        attempts.append(attempt)
        assert lockable(stand) == []
        raise RuntimeError("boom")

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        await broker.publish(RowLockedEmail, Email("a@x"), name="emails", customer="c1")

    @app.on_shutdown
    async def look() -> None:
        # Before the pool closes: the drop rolled the claim back, so the row is free again.
        seen_at_shutdown.append(lockable(stand))

    failed = r"^test: a handler raised under the fail-fast policy: RuntimeError\('boom'\)$"
    with trio.fail_after(10), pytest.raises(HandlerFailed, match=failed):
        await app.serve()
    assert attempts == [1]
    assert seen_at_shutdown == [[1]]
    assert stand.rows("SELECT attempt FROM email_jobs") == [(1,)]
    # A new broker takes it at once; the rolled back delivery spent no attempt.
    assert await take_one(stand) == [1]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_the_rows_of_a_batch_share_one_transaction(case: Case) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    sizes: list[int] = []
    seen: list[tuple[int, list[int]]] = []

    @subscriber(InboxQueue(RowLockedEmail, "emails").batch(3))
    async def send(emails: list[Email]) -> None:
        sizes.append(len(emails))
        seen.append((open_transactions(stand), lockable(stand)))

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n in range(3):
            await broker.publish(RowLockedEmail, Email(f"{n}@x"), name="emails", customer="c1")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 3)
    # One claim, one transaction holding all three rows.
    assert sizes == [3]
    assert seen == [(1, [])]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_a_failed_settlement_rolls_its_whole_batch_back(case: Case) -> None:
    stand = case.stand
    stand.script(EMAIL_REFS[case.name])
    broker = stand.broker(poll_interval=3600)
    calls: list[list[str]] = []

    @subscriber(InboxQueue(RowLockedEmail, "emails").batch(3))
    async def send(emails: list[Email]) -> list[HandlerOutcome]:
        calls.append([e.to for e in emails])
        # No further claim: the rolled back rows stay in the table to be looked at.
        app.shutdown()
        return [HandlerOutcome.ack()] * len(emails)

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for name in ("a", "b", "c"):
            await broker.publish(RowLockedEmail, Email(f"{name}@x"), name="emails", customer="c1")
        # A reference to b: deleting b, its ack, fails.
        stand.execute("INSERT INTO email_refs (job_id) VALUES (2)")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 3)
    assert calls == [["a@x", "b@x", "c@x"]]
    failed, rolled_back = app.statistics(send).settle_errors
    assert isinstance(failed, IntegrityError)
    expected = (
        "email_jobs (RowLockedEmail): the rows of a row lock batch commit together, found an "
        "earlier settlement of the batch failed; row 3 returns to the queue with the rest of "
        "the batch"
    )
    assert isinstance(rolled_back, BatchRolledBack)
    assert re.match(f"^{re.escape(expected)}$", str(rolled_back))
    # a's ack was undone with the rest: all three rows remain, their attempts untouched.
    assert stand.rows("SELECT job_id, attempt FROM email_jobs ORDER BY job_id") == [
        (1, 1),
        (2, 1),
        (3, 1),
    ]
    assert open_transactions(stand) == 0


class RepeatableEmail(Inbox[RowLock, RepeatableRead], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class SerializableEmail(Inbox[RowLock, Serializable], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


@pytest.mark.parametrize(
    ("row", "level"),
    [
        (RowLockedEmail, "read committed"),
        (RepeatableEmail, "repeatable read"),
        (SerializableEmail, "serializable"),
    ],
    ids=["default", "repeatable_read", "serializable"],
)
async def test_the_claim_transaction_opens_at_the_declared_level(
    case: Case, row: type[Inbox[Any, Any]], level: str
) -> None:
    stand = case.stand
    if not isinstance(stand, PostgresStand):
        # MariaDB's own default is REPEATABLE READ: the claim's READ COMMITTED is trinbox's.
        assert stand.value("SELECT @@global.tx_isolation") == "REPEATABLE-READ"
    broker = stand.broker(poll_interval=3600)
    levels: list[str] = []

    @subscriber(InboxQueue(row, "emails").transactional())
    async def send(email: Email, tx: keys.Tx) -> None:
        # The claim's transaction, lent to the handler.
        if isinstance(stand, PostgresStand):
            levels.append(str(await tx.fetchval("SHOW transaction_isolation")))
            return
        # InnoDB refreshes the cache behind INNODB_TRX at most every 0.1 s.
        await trio.sleep(0.15)
        found = await tx.fetchval(
            "SELECT trx_isolation_level FROM information_schema.INNODB_TRX "
            "WHERE trx_mysql_thread_id = CONNECTION_ID()"
        )
        levels.append(str(found).lower())

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        await broker.publish(row, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert levels == [level]
    assert stand.rows("SELECT * FROM email_jobs") == []


async def test_a_settling_worker_claims_its_next_row_on_the_same_connection(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand = case.stand
    broker = stand.broker(poll_interval=3600)
    watch = ClaimWatch(monkeypatch)
    handled: list[tuple[str, int]] = []

    @subscriber(InboxQueue(RowLockedEmail, "emails"))
    async def send(email: Email) -> None:
        # Each row in work holds the one transaction open on its connection.
        handled.append((email.to, open_transactions(stand)))

    app = make_app()
    app.include(broker, send)

    @app.on_startup
    async def publish() -> None:
        for n in range(5):
            await broker.publish(RowLockedEmail, Email(f"{n}@x"), name="emails", customer="c1")

    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 5)
            await idle(app, send)
    # The claim loop claimed the first row; each settlement claimed the next in the same round
    # trip, until one found the queue empty (then the loop waits its hour).
    assert handled == [(f"{n}@x", 1) for n in range(5)]
    assert watch.count == 1
    assert stand.rows("SELECT * FROM email_jobs") == []
    assert open_transactions(stand) == 0
