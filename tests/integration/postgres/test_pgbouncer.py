"""PgBouncer in transaction pooling in front of PostgreSQL (scripts/start-pgbouncer,
``TRINBOX_PGBOUNCER_DSN``): the row lock and lease forms serve through it with
``pgbouncer="transaction"`` (a limited lease or row lock claim, and a rated one, too); the
advisory form and
``listen_notify`` are refused at startup.

Each test makes a fresh database on the PostgreSQL server (through ``TRINBOX_PG_DSN``) and
reaches it through PgBouncer, whose wildcard ``[databases]`` entry forwards every database
name. Assertions read the database directly, never through PgBouncer.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trio

from trinbox import HandlerOutcome, Inbox, InboxQueue, Rate, Rates, SqlBroker, keys, subscriber
from trinbox.errors import DatabaseError, StartupError
from trinbox.schema import ddl
from trinbox.testing import TrioClock, VirtualClock, idle, settled

from ..matrix.kit import DUE, insert_rows
from ..matrix.schema import EMAIL, EMAIL_JOBS
from ..matrix.test_retention import Job, LeasedJob
from ..serving import make_app, serving
from ..stands import PostgresStand, _unreachable, fresh_stand
from .settle_process import Ask, Quote, QuoteJob

PGBOUNCER_DSN = os.environ.get(
    "TRINBOX_PGBOUNCER_DSN", "postgresql://postgres@127.0.0.1:54349/postgres"
)


@dataclass
class Bounced:
    """A fresh database: ``stand`` reads it directly, ``url`` reaches it through PgBouncer."""

    stand: PostgresStand
    url: str

    def broker(self, **options: Any) -> SqlBroker[Any]:
        options.setdefault("pgbouncer", "transaction")
        return SqlBroker.postgres(
            self.url, poll_interval=0.05, pool_size=8, clock=TrioClock(), **options
        )


@pytest.fixture
def bounced(tmp_path: Path) -> Iterator[Bounced]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        stand.script(EMAIL_JOBS["postgres"])
        database = urlsplit(stand.url).path
        url = urlunsplit(urlsplit(PGBOUNCER_DSN)._replace(path=database))
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            _unreachable(f"PgBouncer at {PGBOUNCER_DSN} (scripts/start-pgbouncer)", exc)
        yield Bounced(stand, url)


@dataclass
class Email:
    to: str


MESSAGES = 30
PUBLISHERS = 6


@pytest.mark.parametrize("form", ["row_lock", "lease"])
async def test_row_lock_and_lease_serve_through_transaction_pooling(
    bounced: Bounced, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Several publishers and workers at once: each transaction gets whichever server session
    # PgBouncer has free, so a statement a client prepared on one session is missing on the
    # next (asyncpg's statement cache) unless pgbouncer="transaction" keeps none.
    broker = bounced.broker()
    row: type[Inbox[Any, Any]] = EMAIL[form]
    seen: dict[str, list[int]] = {}

    @subscriber(InboxQueue(row, "emails").workers(4))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        seen.setdefault(email.to, []).append(attempt)
        await trio.sleep(0.01)  # hold the row (and, row lock, its transaction) a moment
        return HandlerOutcome.retry() if attempt == 1 else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send)

    async def publish(first: int) -> None:
        for n in range(first, MESSAGES, PUBLISHERS):
            await broker.publish(row, Email(f"{n}@example.com"), name="emails", customer="c")

    async with serving(app):
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for first in range(PUBLISHERS):
                    nursery.start_soon(publish, first)
            await settled(app, send, 2 * MESSAGES)
        failures = app.statistics(send).settle_failures
    assert seen == {f"{n}@example.com": [1, 2] for n in range(MESSAGES)}
    assert bounced.stand.rows("SELECT job_id FROM email_jobs") == []
    assert failures == 0
    # No failed claim, settlement or clean-up was logged either.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_advisory_form_is_refused_at_startup(bounced: Bounced) -> None:
    broker = bounced.broker()

    @subscriber(InboxQueue(EMAIL["advisory"], "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, send)
    expected = (
        f"subscription 'emails' ({send!r}): the advisory form holds each row's lock in the "
        "database session from its claim to its settlement, across transactions, and "
        "PgBouncer's transaction pooling hands the session to other clients between "
        "transactions (the lock would guard nothing, and the unlock would run on another "
        "session); found email_jobs (LockedEmail) in the advisory form on a broker with "
        "pgbouncer='transaction'. Use the row lock or lease form for this table, or put "
        "PgBouncer in session pooling (pool_mode = session) for this database, or give the "
        "broker a URL straight to PostgreSQL"
    )
    with trio.fail_after(10), pytest.raises(StartupError, match=f"^{re.escape(expected)}$"):
        await app.serve()


async def test_the_count_at_claim_is_refused_at_startup(bounced: Bounced) -> None:
    broker = bounced.broker()

    @subscriber(InboxQueue(EMAIL["row_lock"], "emails").count_attempt_at_claim())
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, send)
    expected = (
        f"subscription 'emails' ({send!r}): .count_attempt_at_claim() holds a session lock "
        "from each claim's select to its relock, across the count's commit, and PgBouncer's "
        "transaction pooling hands the session to other clients between transactions (the "
        "lock would guard nothing); found email_jobs (RowLockedEmail) with "
        ".count_attempt_at_claim() on a broker with pgbouncer='transaction'. Drop "
        ".count_attempt_at_claim(), or put PgBouncer in session pooling (pool_mode = session) "
        "for this database, or give the broker a URL straight to PostgreSQL"
    )
    with trio.fail_after(10), pytest.raises(StartupError, match=f"^{re.escape(expected)}$"):
        await app.serve()


async def test_listen_notify_is_refused_at_startup(bounced: Bounced) -> None:
    broker = bounced.broker(listen_notify=True)

    @subscriber(InboxQueue(EMAIL["lease"], "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, send)
    expected = (
        f"a broker on {broker.url_label}: "
        "listen_notify keeps one database session listening for as long as the app serves, "
        "and PgBouncer's transaction pooling hands a session to other clients after each "
        "transaction, so notifications would be lost; found listen_notify=True with "
        "pgbouncer='transaction'. Drop listen_notify (subscriptions then poll), or put "
        "PgBouncer in session pooling (pool_mode = session) for this database, or give the "
        "broker a URL straight to PostgreSQL"
    )
    with trio.fail_after(10), pytest.raises(StartupError, match=f"^{re.escape(expected)}$"):
        await app.serve()


def test_the_setting_names_a_pool_mode() -> None:
    with pytest.raises(ValueError, match="found 'statement'; statement pooling allows no"):
        SqlBroker.postgres(PGBOUNCER_DSN, pgbouncer="statement")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="found 'transactions'"):
        SqlBroker.postgres(PGBOUNCER_DSN, pgbouncer="transactions")  # type: ignore[arg-type]
    assert SqlBroker.postgres(PGBOUNCER_DSN, pgbouncer="session").pgbouncer == "session"


async def test_without_the_setting_the_statement_cache_fails_with_a_hint(
    bounced: Bounced,
) -> None:
    # What the setting is for: asyncpg's named statements through transaction pooling. The
    # error says what to set.
    broker = bounced.broker(pgbouncer=None)
    row = EMAIL["lease"]

    async def publish(n: int) -> None:
        await broker.publish(row, Email(f"{n}@example.com"), name="emails", customer="c")

    app = make_app()
    app.add_broker(broker)
    with pytest.raises(BaseException) as caught:
        async with serving(app):
            for _ in range(20):
                async with trio.open_nursery() as nursery:
                    for n in range(PUBLISHERS):
                        nursery.start_soon(publish, n)
    found = [e for e in _leaves(caught.value) if isinstance(e, DatabaseError)]
    assert found, caught.value
    assert "pgbouncer='transaction'" in str(found[0])


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


async def test_a_wait_through_transaction_pooling_reads_by_polling(bounced: Bounced) -> None:
    # No LISTEN behind PgBouncer: a row settled by another process's broker (a direct one
    # here, whose settlements this broker never hears of) is read at the wait's next poll.
    direct = SqlBroker.postgres(bounced.stand.url, poll_interval=0.05, clock=TrioClock())

    @subscriber(InboxQueue(QuoteJob, "quotes"))
    async def price(ask: Ask) -> HandlerOutcome:
        return HandlerOutcome.ack(Quote(ask.n * 2))

    settler = make_app()
    settler.on_startup(lambda: direct.create_tables(QuoteJob))
    settler.include(direct, price)
    waiter = make_app()
    bounced_broker = bounced.broker()
    waiter.add_broker(bounced_broker)
    async with serving(settler), serving(waiter):
        await bounced_broker.publish(QuoteJob, Ask(4), id=4)
        with trio.fail_after(30):
            found = await bounced_broker.wait(QuoteJob, 4)
    assert (found.outcome, found.result) == ("ack", Quote(8))


async def test_retention_runs_through_transaction_pooling(
    bounced: Bounced, clock: VirtualClock
) -> None:
    """Retention's passes (a prepared delete a batch, its own transaction) serve through
    PgBouncer's transaction pooling, with no LISTEN: the acked rows go after their age."""
    broker = SqlBroker.postgres(
        bounced.url, pgbouncer="transaction", poll_interval=3600, clock=TrioClock()
    )

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def work(job: Job) -> None:
        return None

    app = make_app()
    app.on_startup(lambda: broker.create_tables(LeasedJob))
    app.include(broker, work).retain(processed=timedelta(hours=1), every=timedelta(minutes=10))
    async with serving(app):
        for n in (1, 2, 3):
            await broker.publish(LeasedJob, Job(n), id=n, queue="jobs")
        with trio.fail_after(3600):
            await settled(app, work, 3)
        await trio.sleep(1200)
        assert bounced.stand.value("SELECT count(*) FROM kept_jobs") == 3
        await trio.sleep(3600)
        assert bounced.stand.value("SELECT count(*) FROM kept_jobs") == 0
        assert app.statistics(work).pruned_processed == 3


@pytest.mark.parametrize("form", ["lease", "row_lock"])
async def test_a_limited_lease_claim_serves_through_transaction_pooling(
    bounced: Bounced, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    # The limit's lock is the claim transaction's own (pg_advisory_xact_lock), so it holds
    # through whichever server session PgBouncer lends that transaction; in the row lock form
    # the slots are that transaction's try-locks, held with the rows until they settle.
    broker = bounced.broker()
    in_work: dict[str, int] = {}
    most: dict[str, int] = {}

    queue = InboxQueue(EMAIL[form], "emails").workers(6).limit(key="customer", concurrency=2)

    full = trio.Event()  # every customer at its limit: 2 each of 3, all 6 workers busy

    @subscriber(queue)
    async def send(email: Email) -> None:
        in_work[email.to] = in_work.get(email.to, 0) + 1
        most[email.to] = max(most.get(email.to, 0), in_work[email.to])
        if sum(in_work.values()) == 6:
            full.set()
        await full.wait()  # held until the limit is reached on every key, never past it
        await trio.sleep(0.01)
        in_work[email.to] -= 1

    # Written before serving: the first claim finds every row, and takes two of each customer.
    insert_rows(
        bounced.stand,
        "email_jobs",
        [
            {
                "name": "emails",
                "customer": f"c{n % 3}",
                "retry_after": DUE,
                "payload": json.dumps({"to": f"c{n % 3}"}).encode(),
            }
            for n in range(MESSAGES)
        ],
    )
    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, send, MESSAGES)
    assert most == {"c0": 2, "c1": 2, "c2": 2}
    assert bounced.stand.rows("SELECT job_id FROM email_jobs") == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_rated_claim_serves_through_transaction_pooling(bounced: Bounced) -> None:
    # The rates' upserts run in the claim's transaction, behind its pg_advisory_xact_lock, so
    # the starts a claim spends are written by whichever server session PgBouncer lends it.
    rates = Rates("bounced_rates")
    for statement in ddl(rates, "postgres"):
        bounced.stand.execute(statement)
    broker = bounced.broker()
    queue = (
        InboxQueue(EMAIL["lease"], "emails")
        .workers(6)
        .limit(key="customer", rate=Rate(2, per=timedelta(hours=1)), rates=rates)
    )
    started: list[str] = []

    @subscriber(queue)
    async def send(email: Email) -> None:
        started.append(email.to)

    insert_rows(
        bounced.stand,
        "email_jobs",
        [
            {
                "name": "emails",
                "customer": f"c{n % 3}",
                "retry_after": DUE,
                "payload": json.dumps({"to": f"c{n % 3}"}).encode(),
            }
            for n in range(12)
        ],
    )
    app = make_app()
    app.include(broker, send)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, send, 6)
            await idle(app, send)  # a claim after the last of them found nothing to start
        assert app.statistics(send).claimed == 6
    # Each customer's burst of two, no more: an hour passes before the next start.
    assert sorted(started) == ["c0", "c0", "c1", "c1", "c2", "c2"]
    assert bounced.stand.value("SELECT count(*) FROM email_jobs") == 6
    assert sorted(r[0] for r in bounced.stand.rows("SELECT rate_key FROM bounced_rates")) == [
        "vc0",
        "vc1",
        "vc2",
    ]
