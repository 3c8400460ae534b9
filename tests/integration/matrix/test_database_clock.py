"""The database clock on every stand (the default on PostgreSQL and MariaDB,
``clock=DatabaseClock()`` on SQLite): due times, processed marks and leases are the server's
time, whatever the host's clock says.

Each broker here is given a host clock that is a quarter century wrong (``WRONG``): had any
statement bound the host's "now", its stamps would read 2001. Every stamp is checked against
the server's own now, read in SQL before and after.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pymysql
import pytest
import trio

from trinbox import DatabaseClock, HandlerOutcome, InboxQueue, SqlBroker, subscriber
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._drivers.aio import asyncio_loop
from trinbox._forms.lease import LeaseForm
from trinbox._holders._base import Ack, FormContext, RetryAt, whole_seconds
from trinbox.testing import settled

from ..serving import make_app, serving
from ..stands import STANDS, Stand, drop_mariadb_database
from .conftest import Case
from .kit import cells
from .kit import lease_form as form_over_tokens
from .schema import EMAIL_JOBS, LeasedEmail

WRONG = datetime(2001, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)
# SQLite's 'now' has milliseconds: a stamp may read up to 1 ms before the instant it was made.
SLACK = timedelta(milliseconds=1)

LEASE_CELLS = pytest.mark.parametrize(
    "case",
    [(stand, "lease") for stand in STANDS],
    ids=[f"{stand}-lease" for stand in STANDS],
    indirect=True,
)


@dataclass
class Email:
    to: str


def wrong_host() -> datetime:
    return WRONG


def clock_broker(stand: Stand, host: Any = wrong_host) -> SqlBroker[Any]:
    """A broker on the database clock (the default on the servers, asked for on SQLite)
    whose host clock reads ``host``."""
    if stand.name == "sqlite":
        broker: SqlBroker[Any] = SqlBroker.sqlite(
            stand.url, poll_interval=0.05, clock=DatabaseClock()
        )
    elif stand.name == "postgres":
        broker = SqlBroker.postgres(stand.url, poll_interval=0.05)
    else:
        broker = SqlBroker.mysql(stand.url, poll_interval=0.05)
    assert broker.dialect.database_clock
    broker.clock = host  # what the host believes; no statement may use it
    return broker


def as_utc(value: object) -> datetime:
    """A time read back from any stand (SQLite text, PostgreSQL aware, MariaDB naive UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime), value
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def server_now(stand: Stand) -> datetime:
    """The server's clock, read in SQL by the stand's own driver."""
    sql = {
        "postgres": "SELECT clock_timestamp()",
        "mariadb": "SELECT UTC_TIMESTAMP(6)",
        "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    }[stand.name]
    return as_utc(stand.value(sql))


def within(value: object, low: datetime, high: datetime) -> bool:
    found = as_utc(value)
    return low - SLACK <= found <= high + SLACK


@asynccontextmanager
async def lease_form(
    broker: SqlBroker[Any], lease: float = 30.0
) -> AsyncIterator[tuple[LeaseForm, FormContext]]:
    """An open ``broker`` and a lease form on its ``email_jobs`` group ``emails``."""
    async with asyncio_loop(broker.kind != "sqlite"):
        await broker.open()
        try:
            spec = spec_of(LeasedEmail)
            ctx = FormContext(
                spec=spec,
                dialect=broker.dialect,
                statements=build_plan(broker.dialect, spec, None),
                pool=broker.pool,
                clock=broker.clock,
                group="emails",
                lease=whole_seconds(timedelta(seconds=lease)),
            )
            yield form_over_tokens(ctx), ctx
        finally:
            await broker.aclose()


# -- which clock a broker reads --------------------------------------------------------------


def test_the_servers_clock_is_the_default_on_the_servers_and_an_option_on_sqlite() -> None:
    from trinbox import SystemClock
    from trinbox.testing import TrioClock

    assert SqlBroker.postgres("postgresql://u@h/d").dialect.database_clock
    assert SqlBroker.mysql("mysql://u@h/d").dialect.database_clock
    assert not SqlBroker.sqlite("sqlite:///q.db").dialect.database_clock
    assert SqlBroker.sqlite("sqlite:///q.db", clock=DatabaseClock()).dialect.database_clock
    # A callable given is the host's clock, as before: virtual time in tests keeps working.
    for host in (SystemClock(), TrioClock(), wrong_host):
        pg = SqlBroker.postgres("postgresql://u@h/d", clock=host)
        my = SqlBroker.mysql("mysql://u@h/d", clock=host)
        assert not pg.dialect.database_clock and not my.dialect.database_clock
        assert pg.clock is host
    with pytest.raises(TypeError, match=r"^a broker's clock is DatabaseClock\(\), SystemClock"):
        SqlBroker.postgres("postgresql://u@h/d", clock="db")  # type: ignore[arg-type]


# -- due times and processed marks -------------------------------------------------------------


@LEASE_CELLS
async def test_a_publish_is_due_by_the_servers_clock(case: Case) -> None:
    broker = clock_broker(case.stand)
    async with asyncio_loop(broker.kind != "sqlite"):
        await broker.open()
        try:
            before = server_now(case.stand)
            await broker.publish(LeasedEmail, Email("now"), name="emails", customer="now")
            await broker.publish(
                LeasedEmail,
                Email("later"),
                name="emails",
                customer="later",
                delay=timedelta(hours=1),
            )
            after = server_now(case.stand)
        finally:
            await broker.aclose()
    due = dict(case.stand.rows("SELECT customer, retry_after FROM email_jobs"))
    assert within(due["now"], before, after), (due, before, after)
    hour = timedelta(hours=1)
    assert within(due["later"], before + hour, after + hour), (due, before, after)


@cells()
async def test_a_retry_after_and_an_ack_are_stamped_by_the_servers_clock(case: Case) -> None:
    broker = clock_broker(case.stand)
    seen: list[str] = []

    @subscriber(InboxQueue(case.finished, "emails"))
    async def handle(email: Email) -> HandlerOutcome:
        seen.append(email.to)
        if email.to == "later":
            return HandlerOutcome.retry_after(timedelta(hours=1))
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    before = server_now(case.stand)
    async with serving(app):
        await broker.publish(case.finished, Email("done"), name="emails", customer="done")
        await broker.publish(case.finished, Email("later"), name="emails", customer="later")
        with trio.fail_after(10):
            await settled(app, handle, 2)
    after = server_now(case.stand)
    assert sorted(seen) == ["done", "later"]  # each once: the retried row is due in an hour
    rows = {
        customer: (retry_after, processed_at)
        for customer, retry_after, processed_at in case.stand.rows(
            "SELECT customer, retry_after, processed_at FROM email_jobs"
        )
    }
    assert within(rows["done"][1], before, after), (rows, before, after)
    hour = timedelta(hours=1)
    assert within(rows["later"][0], before + hour, after + hour), (rows, before, after)
    assert rows["later"][1] is None


@cells()
async def test_a_snooze_is_due_by_the_servers_clock_and_spends_no_attempt(case: Case) -> None:
    broker = clock_broker(case.stand)

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(email: Email) -> HandlerOutcome:
        return HandlerOutcome.snooze(timedelta(hours=1))

    app = make_app()
    app.include(broker, handle).max_attempts(1).dead_letter("emails.dead")
    before = server_now(case.stand)
    async with serving(app):
        await broker.publish(case.email, Email("later"), name="emails", customer="later")
        with trio.fail_after(10):
            await settled(app, handle, 1)
    after = server_now(case.stand)
    ((name, attempt, due),) = case.stand.rows("SELECT name, attempt, retry_after FROM email_jobs")
    assert (name, attempt) == ("emails", 1)
    hour = timedelta(hours=1)
    assert within(due, before + hour, after + hour), (due, before, after)


# -- leases ----------------------------------------------------------------------------------------


@LEASE_CELLS
async def test_the_token_is_the_expiry_the_server_wrote_and_it_settles(case: Case) -> None:
    broker = clock_broker(case.stand)
    async with lease_form(broker) as (form, ctx):
        await broker.publish(LeasedEmail, Email("a"), name="emails", customer="a")
        before = server_now(case.stand)
        (delivery,) = await form.claim(5)
        after = server_now(case.stand)
        stored = case.stand.value("SELECT locked_until FROM email_jobs")
        # The token is what the row holds (MariaDB's DATETIME without fractions included),
        # the server's now plus the lease rounded up to the whole second.
        assert as_utc(delivery.token) == as_utc(stored)
        token = as_utc(delivery.token)
        assert token.microsecond == 0
        assert before + ctx.lease - SLACK <= token <= after + ctx.lease + SECOND
        assert delivery.attempt == 1
        # Another host, whose clock is a day ahead, still finds the row held.
        other = clock_broker(case.stand, host=lambda: datetime.now(UTC) + timedelta(days=1))
        async with lease_form(other) as (stranger, _):
            assert await stranger.claim(5) == []
        await form.settle(delivery, Ack())
    assert case.stand.rows("SELECT * FROM email_jobs") == []


@LEASE_CELLS
async def test_an_extension_writes_the_servers_expiry_and_the_token_follows(case: Case) -> None:
    broker = clock_broker(case.stand)
    async with lease_form(broker, lease=5) as (form, ctx):
        await broker.publish(LeasedEmail, Email("a"), name="emails", customer="a")
        (delivery,) = await form.claim(1)
        first = as_utc(delivery.token)
        before = server_now(case.stand)
        await form.extend_all()
        after = server_now(case.stand)
        stored = as_utc(case.stand.value("SELECT locked_until FROM email_jobs"))
        assert as_utc(delivery.token) == stored >= first
        assert before + ctx.lease - SLACK <= stored <= after + ctx.lease + SECOND
        assert not delivery.lease_lost
        # The new token settles: a retry an hour away, by the server's clock.
        await form.settle(delivery, RetryAt(WRONG, delay=timedelta(hours=1)))
        done = server_now(case.stand)
    retry_after, locked_until = case.stand.rows("SELECT retry_after, locked_until FROM email_jobs")[
        0
    ]
    assert locked_until is None
    hour = timedelta(hours=1)
    assert within(retry_after, before + hour, done + hour)


@LEASE_CELLS
async def test_a_batch_claim_gives_each_row_the_token_it_holds(case: Case) -> None:
    broker = clock_broker(case.stand)
    async with lease_form(broker) as (form, _):
        for n in range(3):
            await broker.publish(LeasedEmail, Email(str(n)), name="emails", customer=str(n))
        claimed = await form.claim(3)
        assert len(claimed) == 3
        held = dict(case.stand.rows("SELECT job_id, locked_until FROM email_jobs"))
        assert {d.id: as_utc(d.token) for d in claimed} == {k: as_utc(v) for k, v in held.items()}
        errors = await form.settle_batch([(d, Ack()) for d in claimed])
        assert errors == [None, None, None]
    assert case.stand.rows("SELECT * FROM email_jobs") == []


# -- MySQL: the session's time zone does not matter ------------------------------------------------


MODES_DSN = os.environ.get("TRINBOX_MYSQL_MODES_DSN")


@contextmanager
def modes_database() -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh database on the MariaDB of hostile server settings (its URL and PyMySQL
    arguments), dropped afterwards."""
    if MODES_DSN is None:
        pytest.skip("TRINBOX_MYSQL_MODES_DSN names the MariaDB of hostile settings")
    parts = urlsplit(MODES_DSN)
    args: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": parts.username or "root",
        "password": parts.password or "",
        "autocommit": True,
    }
    database = f"tb_clock_{os.getpid()}"
    conn = pymysql.connect(**args)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}`")
    finally:
        conn.close()
    try:
        yield parts._replace(path=f"/{database}").geturl(), {**args, "database": database}
    finally:
        conn = pymysql.connect(**args)
        try:
            with conn.cursor() as cur:
                drop_mariadb_database(cur, database)
        finally:
            conn.close()


async def test_a_mysql_session_in_another_time_zone_writes_and_reads_utc() -> None:
    with modes_database() as (url, args):
        conn = pymysql.connect(**args)
        try:
            with conn.cursor() as cur:
                for statement in EMAIL_JOBS["mariadb"].split(";"):
                    if statement.strip():
                        cur.execute(statement)
                # The user's own session is five hours and 45 minutes east of UTC.
                cur.execute("SET time_zone = '+05:45'")
                broker = SqlBroker.mysql(url, poll_interval=0.05)
                broker.clock = wrong_host
                sql, params = broker.insert_statement(
                    LeasedEmail, Email("own"), name="emails", customer="own", paramstyle="format"
                )
                assert "UTC_TIMESTAMP(6)" in sql
                cur.execute("SELECT UTC_TIMESTAMP(6)")
                before = as_utc(cur.fetchone()[0])  # type: ignore[index]
                cur.execute(sql, params)
                cur.execute("SELECT UTC_TIMESTAMP(6)")
                after = as_utc(cur.fetchone()[0])  # type: ignore[index]
                cur.execute("SELECT retry_after FROM email_jobs")
                (due,) = cur.fetchone()  # type: ignore[misc]
        finally:
            conn.close()
        assert within(due, before, after), (due, before, after)
        seen: list[str] = []

        @subscriber(InboxQueue(LeasedEmail, "emails"))
        async def handle(email: Email) -> None:
            seen.append(email.to)

        app = make_app()
        app.include(broker, handle)
        async with serving(app):
            await broker.publish(LeasedEmail, Email("broker"), name="emails", customer="b")
            with trio.fail_after(10):
                await settled(app, handle, 2)
        assert sorted(seen) == ["broker", "own"]
