"""Pause and resume on every stand, in virtual time (``VirtualClock``): a pause of this
process stops claims at once and its resume claims at once; one written by another process
(a row in the pause table) is obeyed within one poll interval; deliveries in work finish and
their leases keep extending; a group's pause leaves the other groups; what startup and the
calls refuse."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Pauses,
    Payload,
    SqlBroker,
    subscriber,
)
from trinbox.errors import DeclarationError, SchemaError
from trinbox.schema import DialectName, ddl_script
from trinbox.testing import VirtualClock, idle, settled

from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

DIALECT: dict[StandName, DialectName] = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "mariadb": "mysql",
}

PAUSES = Pauses("app_pauses")
POLL = 1.0


class Job(Inbox[Lease], table="pause_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Grouped(Inbox[Lease], table="pause_grouped"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        dialect = DIALECT[found.name]
        found.script(
            ddl_script(Job, dialect) + ddl_script(Grouped, dialect) + ddl_script(PAUSES, dialect)
        )
        yield found


def broker_of(stand: Stand, *, lease: float = 30.0) -> SqlBroker[Any]:
    return stand.broker(poll_interval=POLL, lease=lease, pauses=PAUSES)


def pauses_in(stand: Stand) -> list[tuple[str, str]]:
    return [(str(t), str(g)) for t, g in stand.rows("SELECT tbl, grp FROM app_pauses")]


def write_pause(stand: Stand, table: str, group: str) -> None:
    """A pause as another process writes it: a row in the pause table."""
    now = "2030-01-01 00:00:00"
    sql = "INSERT INTO app_pauses (tbl, grp, paused_at) VALUES (?, ?, ?)"
    stand.execute(sql, table, group, now)


async def test_a_pause_stops_claims_at_once_and_a_resume_claims_at_once(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = broker_of(stand)
    handled: list[str] = []

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(message: str) -> None:
        handled.append(message)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        await broker.publish(Job, "before")
        await settled(app, handle, 1)
        assert handled == ["before"]
        await broker.pause(Job)
        await broker.pause(Job)  # a second pause changes nothing
        await idle(app, handle)  # a claim that was running when the pause came has ended
        assert pauses_in(stand) == [("pause_jobs", "")]
        assert broker.paused(Job)
        stats = app.statistics(handle)
        assert stats.paused
        claims = stats.claims
        await broker.publish(Job, "while paused")
        await trio.sleep(10 * POLL)
        assert handled == ["before"]
        assert app.statistics(handle).claims == claims  # not one claim while paused
        assert stand.value("SELECT count(*) FROM pause_jobs") == 1
        start = trio.current_time()
        await broker.resume(Job)
        assert pauses_in(stand) == []
        await settled(app, handle, 2)
        assert trio.current_time() - start < POLL / 2  # at once, not a poll interval later
        assert handled == ["before", "while paused"]
        assert not app.statistics(handle).paused


async def test_a_pause_written_by_another_process_is_obeyed_within_one_poll(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = broker_of(stand)
    handled: list[str] = []

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(message: str) -> None:
        handled.append(message)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        write_pause(stand, "pause_jobs", "")
        await trio.sleep(POLL * 1.01)  # the watcher's next read
        assert app.statistics(handle).paused
        await broker.publish(Job, "one")
        await trio.sleep(5 * POLL)
        assert handled == []
        stand.execute("DELETE FROM app_pauses")
        await trio.sleep(POLL * 1.01)
        assert not app.statistics(handle).paused
        await settled(app, handle, 1)
        assert handled == ["one"]


async def test_a_pause_read_at_startup_holds_from_the_first_claim(
    stand: Stand, clock: VirtualClock
) -> None:
    """A pause outlives the processes: one written before serve began is obeyed at once."""
    stand.execute(
        "INSERT INTO pause_jobs (attempt, locked_until, payload) VALUES (0, NULL, ?)", b'"old"'
    )
    write_pause(stand, "pause_jobs", "")
    broker = broker_of(stand)
    handled: list[str] = []

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(message: str) -> None:
        handled.append(message)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        assert app.statistics(handle).claims == 0
        await trio.sleep(5 * POLL)
        assert handled == []
        assert app.statistics(handle).claims == 0
        await broker.resume(Job)
        await settled(app, handle, 1)
        assert handled == ["old"]


async def test_deliveries_in_work_finish_and_their_leases_keep_extending(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = broker_of(stand, lease=2)
    started = trio.Event()
    finish = trio.Event()
    handled: list[str] = []

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(message: str) -> None:
        started.set()
        await finish.wait()
        handled.append(message)

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        await broker.publish(Job, "long")
        await started.wait()
        await broker.pause(Job)
        await broker.publish(Job, "next")
        await trio.sleep(5)  # past the lease, twice over
        stats = app.statistics(handle)
        assert stats.in_work == 1
        assert stats.lease_extensions >= 3
        assert stats.leases_lost == 0
        finish.set()
        await settled(app, handle, 1)
        stats = app.statistics(handle)
        assert handled == ["long"]  # it finished; its settlement claimed no next row
        assert (stats.acked, stats.in_work, stats.claimed) == (1, 0, 1)
        await trio.sleep(3 * POLL)
        assert handled == ["long"]
        await broker.resume(Job)
        await settled(app, handle, 2)
        assert handled == ["long", "next"]


async def test_a_groups_pause_leaves_the_other_groups(stand: Stand, clock: VirtualClock) -> None:
    broker = broker_of(stand)
    handled: list[tuple[str, str]] = []

    @subscriber(InboxQueue(Grouped, "a"))
    async def a(message: str) -> None:
        handled.append(("a", message))

    @subscriber(InboxQueue(Grouped, "b"))
    async def b(message: str) -> None:
        handled.append(("b", message))

    app = make_app()
    app.include(broker, a)
    app.include(broker, b)
    async with serving(app):
        await broker.pause(Grouped, group="a")
        await idle(app, a)
        assert pauses_in(stand) == [("pause_grouped", "a")]
        await broker.publish(Grouped, "1", queue="a")
        await broker.publish(Grouped, "2", queue="b")
        await settled(app, b, 1)
        await trio.sleep(3 * POLL)
        assert handled == [("b", "2")]
        assert (app.statistics(a).paused, app.statistics(b).paused) == (True, False)
        await broker.pause(Grouped)  # the whole table: both
        await idle(app, b)
        await broker.resume(Grouped, group="a")  # the table's pause still holds a
        await broker.publish(Grouped, "3", queue="b")
        await trio.sleep(3 * POLL)
        assert handled == [("b", "2")]
        assert (app.statistics(a).paused, app.statistics(b).paused) == (True, True)
        await broker.resume(Grouped)
        await settled(app, a, 1)
        await settled(app, b, 2)
        assert sorted(handled) == [("a", "1"), ("b", "2"), ("b", "3")]


async def test_startup_refuses_a_missing_pause_table(stand: Stand, clock: VirtualClock) -> None:
    broker = stand.broker(pauses=Pauses("no_pauses"))

    @subscriber(InboxQueue(Job, "jobs"))
    async def handle(message: str) -> None:
        del message

    app = make_app()
    app.include(broker, handle)
    with pytest.raises(SchemaError) as caught:
        await app.serve()
    assert "a broker keeps its paused queues in its pause table, found pause failing on " in str(
        caught.value
    )
    assert str(caught.value).endswith(
        "create it with broker.create_tables(pauses) in an on_startup hook, or from trinbox "
        "schema MODULE:PAUSES in your migrations"
    )


async def test_create_tables_makes_the_pause_table(tmp_path: Path, clock: VirtualClock) -> None:
    with fresh_stand("sqlite", tmp_path) as stand:
        stand.script(ddl_script(Job, "sqlite"))
        broker = broker_of(stand)
        app = make_app()

        @app.on_startup
        async def create() -> None:
            await broker.create_tables(PAUSES)
            await broker.create_tables(PAUSES)  # idempotent

        @subscriber(InboxQueue(Job, "jobs"))
        async def handle(message: str) -> None:
            del message

        app.include(broker, handle)
        async with serving(app):
            await broker.pause(Job)
        assert pauses_in(stand) == [("pause_jobs", "")]


def test_the_calls_refuse_what_they_cannot_pause(tmp_path: Path) -> None:
    plain = SqlBroker.sqlite(f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(DeclarationError, match=r"found a broker without one; pass pauses=Pauses"):
        trio.run(plain.pause, Job)
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/x.db", pauses=PAUSES)
    with pytest.raises(DeclarationError) as caught:
        trio.run(lambda: broker.pause(Job, group="a"))
    assert str(caught.value) == (
        "broker.pause(pause_jobs (Job), group='a'): group= pauses one group of a table with a "
        "Group field, found pause_jobs (Job) without one; leave group= out to pause the table"
    )
    with pytest.raises(DeclarationError, match=r"a group is named by a non-empty str, found "):
        trio.run(lambda: broker.resume(Grouped, group=""))
    # trinbox's pause table keeps the group in a key column of 191 characters (MySQL's).
    with pytest.raises(DeclarationError) as caught:
        trio.run(lambda: broker.pause(Grouped, group="g" * 192))
    assert str(caught.value).endswith(
        "a group is named by a non-empty str of at most 191 characters (trinbox's own tables "
        "keep it in a key column), found 'gggggggggggggggggggggggggggggggggggggggg'... (192 "
        "characters); name the group with a shorter str"
    )
    with pytest.raises(DeclarationError, match=r"pause table is a trinbox.Pauses, found pauses="):
        SqlBroker.sqlite(f"sqlite:///{tmp_path}/x.db", pauses="app_pauses")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
