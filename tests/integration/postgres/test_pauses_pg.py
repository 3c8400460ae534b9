"""Pauses on PostgreSQL: with ``listen_notify`` a pause written by another broker reaches a
serving one at once (its NOTIFY on the pause table's channel), not at its next poll; through
PgBouncer's transaction pooling (no LISTEN) the watcher's poll alone carries pauses.

Real clock: a notification arrives on a socket while every task waits, which a virtual clock
would skip past.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trio
import trio.testing

from trinbox import InboxQueue, Pauses, SqlBroker, subscriber
from trinbox.schema import ddl_script
from trinbox.testing import TrioClock, settled

from ..matrix.schema import EMAIL, EMAIL_JOBS
from ..serving import make_app, serving
from ..stands import PostgresStand, _unreachable, fresh_stand

PGBOUNCER_DSN = os.environ.get(
    "TRINBOX_PGBOUNCER_DSN", "postgresql://postgres@127.0.0.1:54349/postgres"
)
PAUSES = Pauses("app_pauses")
HOUR = 3600.0
ROW = EMAIL["lease"]


@dataclass
class Email:
    to: str


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as found:
        assert isinstance(found, PostgresStand)
        found.script(EMAIL_JOBS["postgres"] + ";\n" + ddl_script(PAUSES, "postgres"))
        yield found


def pg_broker(url: str, **options: Any) -> SqlBroker[Any]:
    return SqlBroker.postgres(url, pool_size=4, clock=TrioClock(), pauses=PAUSES, **options)


async def test_a_pause_of_another_broker_arrives_by_notify(stand: PostgresStand) -> None:
    serving_broker = pg_broker(stand.url, poll_interval=HOUR, listen_notify=True)
    other = pg_broker(stand.url, poll_interval=HOUR, listen_notify=True)
    handled: list[str] = []

    @subscriber(InboxQueue(ROW, "emails"))
    async def send(email: Email) -> None:
        handled.append(email.to)

    app = make_app()
    app.include(serving_broker, send)
    publisher = make_app()
    publisher.add_broker(other)  # another process's broker: it serves nothing
    async with serving(app), serving(publisher):
        board = serving_broker.pause_board
        with trio.fail_after(5):  # an hour's poll away without the NOTIFY
            async with trio.open_nursery() as nursery:
                nursery.start_soon(board.wait_read)
                await trio.testing.wait_all_tasks_blocked()
                await other.pause(ROW)
        assert app.statistics(send).paused
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(board.wait_read)
                await trio.testing.wait_all_tasks_blocked()
                await other.resume(ROW)
            await other.publish(ROW, Email("a@example.com"), name="emails", customer="c")
            await settled(app, send, 1)
        assert handled == ["a@example.com"]
        assert not app.statistics(send).paused


@pytest.fixture
def bounced_url(stand: PostgresStand) -> str:
    database = urlsplit(stand.url).path
    url = urlunsplit(urlsplit(PGBOUNCER_DSN)._replace(path=database))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unreachable(f"PgBouncer at {PGBOUNCER_DSN} (scripts/start-pgbouncer)", exc)
    return url


async def test_pauses_through_pgbouncer_arrive_by_poll(
    stand: PostgresStand, bounced_url: str
) -> None:
    broker = pg_broker(bounced_url, poll_interval=0.05, pgbouncer="transaction")
    handled: list[str] = []

    @subscriber(InboxQueue(ROW, "emails"))
    async def send(email: Email) -> None:
        handled.append(email.to)

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        # Another process's pause: a row written directly, read at the watcher's next poll.
        stand.execute("INSERT INTO app_pauses VALUES ('email_jobs', '', now())")
        with trio.fail_after(5):
            await broker.pause_board.wait_read()
            await broker.pause_board.wait_read()  # one read begun after the insert
        assert app.statistics(send).paused
        await broker.publish(ROW, Email("b@example.com"), name="emails", customer="c")
        await trio.sleep(0.3)  # six polls: nothing is claimed
        assert handled == []
        await broker.resume(ROW)
        assert stand.rows("SELECT tbl FROM app_pauses") == []
        with trio.fail_after(5):
            await settled(app, send, 1)
        assert handled == ["b@example.com"]
