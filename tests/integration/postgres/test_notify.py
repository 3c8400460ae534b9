"""PostgreSQL LISTEN/NOTIFY (docs/reference.md#listen-and-notify, docs/reference.md#scenarios-wake):
publishes of another process wake this one's subscriptions at once instead of at the next poll.

These tests run on Trio's real clock: a notification arrives on a socket while every task
waits, which a virtual clock would skip past.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest
import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    subscriber,
)
from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import DatabaseError, DeclarationError
from trinbox.testing import idle
from trinbox.typing import Subscriber

from ..stands import PostgresStand, fresh_stand

HOUR = 3600.0

JOBS = """
CREATE TABLE email_jobs (
    job_id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL,
    retry_after TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempt INT NOT NULL DEFAULT 1,
    locked_until TIMESTAMPTZ,
    payload BYTEA
)
"""


class Email(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Note:
    text: str


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        stand.script(JOBS)
        yield stand


class Inboxes:
    """Subscriptions of one consumer process: each group's deliveries land in an event."""

    def __init__(self, stand: PostgresStand, groups: list[str]) -> None:
        self.stand = stand
        self.broker = SqlBroker.postgres(stand.url, poll_interval=HOUR, listen_notify=True)
        self.app = App(AppInfo("consumer"))
        self.got: dict[str, list[str]] = {group: [] for group in groups}
        self.arrived: dict[str, trio.Event] = {group: trio.Event() for group in groups}
        self.subscribers: dict[str, Subscriber[Any, Any]] = {}
        for group in groups:
            self.app.include(self.broker, self._subscriber(group))

    async def past_first_claims(self) -> None:
        """Deliver one note per group and wait until every claim loop waits its hour-long
        poll; then forget those notes."""
        # Past the first claim (run at start, before any notification could be heard)...
        for handler in self.subscribers.values():
            await idle(self.app, handler)
        # ...rows written and announced by hand: exactly one wake per group, none left.
        for group in self.got:
            self.stand.execute(
                "INSERT INTO email_jobs (name, payload) VALUES (?, ?)",
                group,
                b'{"text": "warm-up"}',
            )
            self.stand.execute("SELECT pg_notify('email_jobs', ?)", group)
        with trio.fail_after(10):
            for group, arrived in self.arrived.items():
                await arrived.wait()
                self.arrived[group] = trio.Event()
                assert self.got[group] == ["warm-up"]
                self.got[group].clear()
            for handler in self.subscribers.values():
                await idle(self.app, handler)

    @staticmethod
    def app_listening(stand: PostgresStand) -> bool:
        """Whether a session of the stand's database listens."""
        found = stand.value(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%email_jobs%'"
        )
        return bool(found)

    def _subscriber(self, group: str) -> Subscriber[Any, Any]:
        @subscriber(InboxQueue(Email, group))
        async def handle(note: Note) -> None:
            self.got[group].append(note.text)
            self.arrived[group].set()

        self.subscribers[group] = handle
        return handle


@asynccontextmanager
async def serving(*apps: App) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        for app in apps:
            await nursery.start(app.serve)
        try:
            yield
        finally:
            for app in apps:
                app.shutdown()


def publisher(stand: PostgresStand) -> tuple[App, SqlBroker[Any]]:
    """Another process's broker: its publishes wake nobody here except through NOTIFY."""
    broker = SqlBroker.postgres(stand.url, listen_notify=True)
    app = App(AppInfo("publisher"))
    app.add_broker(broker)
    return app, broker


async def test_a_notification_wakes_its_groups_subscription_only(pg: PostgresStand) -> None:
    inboxes = Inboxes(pg, ["a", "b"])
    producer, broker = publisher(pg)
    async with serving(inboxes.app, producer):
        await inboxes.past_first_claims()
        await broker.publish(Email, Note("for a"), name="a")
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
        # b's subscription was not woken: its row waits for the hour-long poll.
        pg.execute("INSERT INTO email_jobs (name, payload) VALUES ('b', ?)", b'{"text": "for b"}')
        await broker.publish(Email, Note("again a"), name="a")
        with trio.fail_after(10):
            while len(inboxes.got["a"]) < 2:
                inboxes.arrived["a"] = trio.Event()
                await inboxes.arrived["a"].wait()
        assert inboxes.got == {"a": ["for a", "again a"], "b": []}


async def test_an_unannounced_row_waits_for_the_poll_interval(pg: PostgresStand) -> None:
    inboxes = Inboxes(pg, ["a"])
    async with serving(inboxes.app):
        await inboxes.past_first_claims()
        pg.execute("INSERT INTO email_jobs (name, payload) VALUES ('a', ?)", b'{"text": "quiet"}')
        with trio.move_on_after(1.0):
            await inboxes.arrived["a"].wait()
        assert inboxes.got["a"] == []
        # Announced by the writer itself (as a trigger would): claimed at once.
        pg.execute("SELECT pg_notify('email_jobs', 'a')")
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
    assert inboxes.got["a"] == ["quiet"]


async def test_an_empty_payload_wakes_every_subscription_of_the_table(pg: PostgresStand) -> None:
    inboxes = Inboxes(pg, ["a", "b"])
    async with serving(inboxes.app):
        await inboxes.past_first_claims()
        for group in ("a", "b"):
            pg.execute(
                "INSERT INTO email_jobs (name, payload) VALUES (?, ?)",
                group,
                b'{"text": "' + group.encode() + b'"}',
            )
        pg.execute("SELECT pg_notify('email_jobs', '')")
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
            await inboxes.arrived["b"].wait()
    assert inboxes.got == {"a": ["a"], "b": ["b"]}


async def test_a_publish_announces_its_row_on_the_tables_channel(pg: PostgresStand) -> None:
    listener = psycopg.connect(pg.url, autocommit=True)
    try:
        listener.execute("LISTEN email_jobs")
        producer, broker = publisher(pg)
        async with serving(producer):
            await broker.publish(Email, Note("hello"), name="emails")
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
    finally:
        listener.close()
    assert heard == [("email_jobs", "emails")]


async def test_a_lost_listening_connection_listens_again_and_wakes_everyone(
    pg: PostgresStand,
) -> None:
    inboxes = Inboxes(pg, ["a", "b"])
    producer, broker = publisher(pg)
    async with serving(inboxes.app, producer):
        await inboxes.past_first_claims()
        killed = pg.value(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%email_jobs%'"
        )
        assert killed == 1
        # Rows written while nobody listened: the reconnect wakes every subscription once.
        for group in ("a", "b"):
            pg.execute(
                "INSERT INTO email_jobs (name, payload) VALUES (?, ?)",
                group,
                b'{"text": "' + group.encode() + b'"}',
            )
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
            await inboxes.arrived["b"].wait()
        # And it listens again: the next publish is announced and claimed at once.
        inboxes.arrived["a"] = trio.Event()
        await broker.publish(Email, Note("after"), name="a")
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
    assert inboxes.got == {"a": ["a", "after"], "b": ["b"]}


async def test_a_reconnect_failing_with_any_exception_is_logged_and_tried_again(
    pg: PostgresStand, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Only the first reconnect fails, with an error that is not a DatabaseError (the driver
    # raising what it did not translate); monkeypatched, as no real part fails so on demand.
    caplog.set_level(logging.WARNING, logger="trinbox")
    inboxes = Inboxes(pg, ["a"])
    producer, broker = publisher(pg)
    open_side_pool = inboxes.broker.open_side_pool
    failed: list[bool] = []

    async def failing_once() -> Any:
        if not failed:
            failed.append(True)
            raise OSError("the driver's own error")
        return await open_side_pool()

    async with serving(inboxes.app, producer):
        await inboxes.past_first_claims()
        monkeypatch.setattr(inboxes.broker, "open_side_pool", failing_once)
        killed = pg.value(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%email_jobs%'"
        )
        assert killed == 1
        with trio.fail_after(10):
            # A poll: the listener's reconnect signals nothing a test could await.
            while not inboxes.app_listening(pg):  # noqa: ASYNC110
                await trio.sleep(0.05)
        await broker.publish(Email, Note("after"), name="a")
        with trio.fail_after(10):
            await inboxes.arrived["a"].wait()
    assert failed == [True]
    assert inboxes.got == {"a": ["after"]}
    (logged,) = [r for r in caplog.records if "the listening connection failed" in r.getMessage()]
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], OSError)


async def test_shutdown_leaves_no_session_listening(pg: PostgresStand) -> None:
    inboxes = Inboxes(pg, ["a"])
    async with serving(inboxes.app):
        listening = pg.value(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        )
        assert listening == 1
    sessions = pg.value(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    assert sessions == 0


def test_a_channel_over_63_bytes_stops_the_subscription_at_startup(pg: PostgresStand) -> None:
    class LongName(Inbox[Lease], table="t" * 40, schema="s" * 30):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]
        payload: Annotated[bytes, Payload()]

    broker = SqlBroker.postgres(pg.url, listen_notify=True)

    @subscriber(InboxQueue(LongName, "long"))
    async def handle(note: Note) -> None:
        pass

    app = App(AppInfo("consumer"))
    app.include(broker, handle)
    channel = f"{'s' * 30}.{'t' * 40}"
    with pytest.raises(DeclarationError) as caught:
        trio.run(app.serve)
    assert str(caught.value) == (
        f"subscription 'long' ({handle!r}): a NOTIFY channel is the table's qualified name, "
        f"at most 63 bytes, found {channel!r} (71 bytes); use a shorter table or schema "
        f"name, or drop listen_notify"
    )


# pg_notify refuses a payload of 8000 bytes or more: a group that long fails the NOTIFY.
UNANNOUNCEABLE = "g" * 9000


async def test_a_notify_failing_inside_tx_publish_fails_the_publish_and_says_so(
    pg: PostgresStand, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.publish")
    _, broker = publisher(pg)
    reached: list[str] = []
    async with asyncio_loop(True):
        await broker.open()
        try:
            with pytest.raises(DatabaseError) as caught:
                async with broker.transaction() as tx:
                    await tx.execute(
                        "INSERT INTO email_jobs (name, payload) VALUES ('business', '')"
                    )
                    await tx.publish(Email, Note("lost"), name=UNANNOUNCEABLE)
                    reached.append("after the publish")
            # The broker still publishes.
            await broker.publish(Email, Note("next"), name="emails")
        finally:
            await broker.aclose()
    # The error reached the publisher at its publish, not later at the commit.
    assert reached == []
    says = (
        "publish into email_jobs (Email): the NOTIFY announcing the row failed inside the "
        "transaction (InvalidParameterValueError: payload string too long"
    )
    assert str(caught.value).startswith(says)
    assert "the database aborted the transaction: the publish failed, and nothing of the " in (
        str(caught.value)
    )
    assert caught.value.code == "22023"  # the server's own code, kept
    # The log says the same, and nothing of the transaction was kept.
    (logged,) = [r.getMessage() for r in caplog.records]
    assert logged == str(caught.value)
    assert "other processes" not in logged
    assert pg.rows("SELECT name FROM email_jobs") == [("emails",)]


async def test_a_notify_failing_after_a_pooled_publish_loses_only_the_wake_up(
    pg: PostgresStand, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.publish")
    _, broker = publisher(pg)
    async with asyncio_loop(True):
        await broker.open()
        try:
            await broker.publish(Email, Note("kept"), name=UNANNOUNCEABLE)
        finally:
            await broker.aclose()
    (record,) = caplog.records
    assert record.getMessage() == (
        "NOTIFY for email_jobs (Email) failed; the row is written, and other processes see it "
        "at their next poll"
    )
    assert record.exc_info is not None
    assert pg.rows("SELECT length(name), payload FROM email_jobs") == [(9000, b'{"text":"kept"}')]


class Posting(Inbox[Lease], table="postings"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def test_a_notification_of_any_group_wakes_a_subscription_over_every_group(
    pg: PostgresStand,
) -> None:
    """Another process publishes into an account that did not exist: its notification names
    the account, and the subscription over every account of the table claims at once."""
    broker = SqlBroker.postgres(pg.url, poll_interval=HOUR, listen_notify=True)
    got: list[str] = []
    arrived = trio.Event()

    @subscriber(InboxQueue(Posting, "ledger").every_group())
    async def post(note: Note) -> None:
        got.append(note.text)
        arrived.set()

    consumer = App(AppInfo("consumer"))
    consumer.include(broker, post)
    consumer.on_startup(lambda: broker.create_tables(Posting))
    producer, other = publisher(pg)
    async with serving(consumer, producer):
        await idle(consumer, post)  # past the first claim: only a wake claims again
        await other.publish(Posting, Note("opened later"), account="acct-new")
        with trio.fail_after(10):
            await arrived.wait()
    assert got == ["opened later"]
