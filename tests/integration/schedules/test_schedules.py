"""Schedules in one process, on every stand, in virtual time (``VirtualClock``, the broker on
``TrioClock``): each policy for missed ticks, the tick table's marks and pruning, a tick
fired by ``trinbox.testing.fire``, what startup refuses, statistics and the event hook."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import pytest
import trio
from prometheus_client import CollectorRegistry

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, Unique, subscriber
from trinbox.errors import DeclarationError, SchemaError
from trinbox.events import Events, TickEvent
from trinbox.metrics.prometheus import PrometheusMetrics
from trinbox.schedules import Cron, Every, Missed, Publish
from trinbox.schema import ddl_script
from trinbox.testing import TrioClock, VirtualClock, fire

from ..serving import make_app, serving
from ..stands import STANDS, Stand, StandName, fresh_stand
from .kit import (
    DIALECT,
    REPORT,
    TICKS,
    Report,
    ReportRequest,
    create,
    mark,
    marks,
    published,
)

START = datetime(2030, 1, 1, tzinfo=UTC)  # TrioClock's zero
OSLO = ZoneInfo("Europe/Oslo")


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        create(found)
        yield found


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    return at(seconds).isoformat()


class Ticked(Events):
    def __init__(self) -> None:
        self.events: list[TickEvent] = []

    def ticked(self, event: TickEvent) -> None:
        self.events.append(event)


async def test_every_fires_each_tick_once_on_time(stand: Stand, clock: VirtualClock) -> None:
    broker = stand.broker()
    hook = Ticked()
    app = make_app()
    app.add_events(hook)
    schedule = app.schedule(broker, "reports", Every(timedelta(seconds=10)), REPORT, ticks=TICKS)
    async with serving(app):
        await trio.sleep(35)
    # The tick at 0 falls due as the app starts: on time.
    assert published(stand) == [iso(0), iso(10), iso(20), iso(30)]
    assert marks(stand, "reports") == [(at(t), "published") for t in (0, 10, 20, 30)]
    stats = schedule.statistics()
    assert (stats.published, stats.taken, stats.missed, stats.failed) == (4, 0, 0, 0)
    assert stats.last_tick == at(30)
    assert stats.next_tick == at(40)
    assert [(e.tick, e.outcome) for e in hook.events] == [
        (at(t), "published") for t in (0, 10, 20, 30)
    ]
    assert {e.system for e in hook.events} == {broker.backend.system}


MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("missed", "fired", "let_go"),
    [
        # Down since the tick at -300: the ticks at -240 ... -60 came due unfired.
        (Missed.skip(), [0], 4),
        (Missed.latest(within=timedelta(minutes=10)), [0], 4),
        (Missed.latest(within=timedelta(seconds=90)), [0], 4),
        (Missed.all(within=timedelta(minutes=10)), [-240, -180, -120, -60, 0], 0),
        (Missed.all(within=timedelta(seconds=150)), [-120, -60, 0], 2),
    ],
    ids=["skip", "latest-10m", "latest-90s", "all-10m", "all-150s"],
)
async def test_missed_ticks_by_policy(
    stand: Stand, clock: VirtualClock, missed: Missed, fired: list[int], let_go: int
) -> None:
    mark(stand, "minutely", at(-300))
    app = make_app()
    schedule = app.schedule(
        stand.broker(), "minutely", Every(MINUTE), REPORT, ticks=TICKS, missed=missed
    )
    async with serving(app):
        await trio.sleep(1)
    assert published(stand) == [iso(t) for t in fired]
    assert marks(stand, "minutely") == [(at(t), "published") for t in [-300, *fired]]
    stats = schedule.statistics()
    assert (stats.published, stats.missed) == (len(fired), let_go)


async def test_latest_fires_the_latest_tick_within_its_window_after_an_outage(
    stand: Stand, clock: VirtualClock
) -> None:
    mark(stand, "minutely", at(-300))
    broker = stand.broker()
    broker.clock = TrioClock(START + timedelta(seconds=30))
    app = make_app()
    schedule = app.schedule(
        broker,
        "minutely",
        Every(MINUTE),
        REPORT,
        ticks=TICKS,
        missed=Missed.latest(within=timedelta(minutes=10)),
    )
    async with serving(app):
        await trio.sleep(1)
    # At 30 s, the latest tick is the one at 0, 30 s late: fired; -240 ... -60 let go.
    assert published(stand) == [iso(0)]
    assert schedule.statistics().missed == 4


async def test_a_process_started_more_than_a_minute_after_a_tick_skips_it(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = stand.broker()
    broker.clock = TrioClock(START + timedelta(seconds=61))
    app = make_app()
    schedule = app.schedule(broker, "hourly", Every(timedelta(hours=1)), REPORT, ticks=TICKS)
    async with serving(app):
        await trio.sleep(1)
    assert published(stand) == []
    # A schedule never fired counts no tick from before its scheduler began as missed.
    stats = schedule.statistics()
    assert (stats.published, stats.missed, stats.next_tick) == (0, 0, at(3600))


async def test_a_tick_another_process_fired_is_taken_not_published(
    stand: Stand, clock: VirtualClock
) -> None:
    app = make_app()
    schedule = app.schedule(
        stand.broker(), "reports", Every(timedelta(seconds=10)), REPORT, ticks=TICKS
    )
    async with serving(app):
        await trio.sleep(5)
        mark(stand, "reports", at(10))  # fired by another process, before this one
        await trio.sleep(10)
    assert published(stand) == [iso(0)]
    stats = schedule.statistics()
    assert (stats.published, stats.taken, stats.last_tick) == (1, 1, at(10))


async def test_fire_fires_one_tick_now(stand: Stand, clock: VirtualClock) -> None:
    app = make_app()
    app.schedule(stand.broker(), "daily", Every(timedelta(days=1)), REPORT, ticks=TICKS)
    on_time = trio.Event()

    class FirstTick(Events):
        def ticked(self, event: TickEvent) -> None:
            on_time.set()

    app.add_events(FirstTick())
    async with serving(app):
        # The scheduler's tick at 0 first: fired before it, tomorrow's would be the latest
        # tick fired, and the one at 0 would no longer be due (seen once in CI under load).
        with trio.fail_after(10):
            await on_time.wait()
        tomorrow = at(86400)
        assert await fire(app, "daily", at=tomorrow) == "published"
        assert await fire(app, "daily", at=tomorrow) == "taken"
        with pytest.raises(ValueError, match=r"^fire\(\.\.\., 'daily', at=\) fires a tick"):
            await fire(app, "daily", at=tomorrow + timedelta(hours=1))
        with pytest.raises(LookupError, match=r"^test has no schedule named 'nightly'"):
            await fire(app, "nightly", at=tomorrow)
    # The tick at 0 (on time as the app started) and the one fired.
    assert published(stand) == [iso(0), iso(86400)]


async def test_old_ticks_are_pruned_and_the_latest_kept(stand: Stand, clock: VirtualClock) -> None:
    old = [at(-8 * 86400 - 60 * n) for n in range(150)]  # older than the week kept
    for tick in old:
        mark(stand, "minutely", tick)
    mark(stand, "yearly", at(-30 * 86400))  # its latest tick, older than a week: kept
    mark(stand, "minutely", at(-86400))  # younger than a week: kept
    app = make_app()
    app.schedule(stand.broker(), "minutely", Every(MINUTE), REPORT, ticks=TICKS)
    app.schedule(stand.broker(), "yearly", Every(timedelta(days=365)), REPORT, ticks=TICKS)
    async with serving(app):
        await trio.sleep(1)
    assert [t for t, _ in marks(stand, "minutely")] == [at(-86400), at(0)]
    assert [t for t, _ in marks(stand, "yearly")] == [at(-30 * 86400)]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # Oslo's spring-forward day, 2026-03-29: 02:30 does not exist, and runs at 03:00.
        (
            datetime(2026, 3, 28, 12, tzinfo=OSLO),
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        ),
        # Its fall-back day, 2026-10-25: 02:30 happens twice, and runs at the first.
        (
            datetime(2026, 10, 24, 12, tzinfo=OSLO),
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
    ],
    ids=["spring-forward", "fall-back"],
)
async def test_a_daily_0230_across_daylight_saving_days(
    tmp_path: Path, clock: VirtualClock, start: datetime, expected: list[str]
) -> None:
    with fresh_stand("sqlite", tmp_path) as stand:
        create(stand)
        broker = stand.broker()
        broker.clock = TrioClock(start.astimezone(UTC))
        app = make_app()
        app.schedule(broker, "nightly", Cron("30 2 * * *", tz="Europe/Oslo"), REPORT, ticks=TICKS)
        async with serving(app):
            await trio.sleep(2 * 86400)
        # The message is given the tick in the schedule's zone.
        assert published(stand) == expected


@pytest.mark.parametrize("missing", ["ticks", "jobs"])
async def test_startup_refuses_a_missing_table(
    tmp_path: Path, clock: VirtualClock, name: StandName, missing: str
) -> None:
    with fresh_stand(name, tmp_path) as stand:
        dialect = DIALECT[stand.name]
        stand.script(ddl_script(TICKS if missing == "jobs" else Report, dialect))
        app = make_app()
        app.schedule(stand.broker(), "reports", Every(MINUTE), REPORT, ticks=TICKS)
        with pytest.raises(SchemaError) as caught:
            await app.serve()
    if missing == "ticks":
        assert str(caught.value).startswith(
            "app.schedule('reports'): a schedule records its ticks in its tick table, found "
            "tick failing on app_ticks: "
        )
        assert str(caught.value).endswith(
            "; create it with broker.create_tables(ticks) in an on_startup hook, or from "
            "trinbox schema MODULE:TICKS in your migrations"
        )
    else:
        assert str(caught.value).startswith(
            "app.schedule('reports'): a schedule's row is written by its tick, found the "
            "insert failing on report_jobs (Report): "
        )
        assert str(caught.value).endswith(
            "; create the table (trinbox schema MODULE:Report in your migrations, or "
            "broker.create_tables(Report) in an on_startup hook)"
        )


@pytest.fixture(params=STANDS)
def name(request: pytest.FixtureRequest) -> StandName:
    found: StandName = request.param
    return found


async def test_a_schedule_never_fired_catches_up_nothing(stand: Stand, clock: VirtualClock) -> None:
    broker = stand.broker()
    broker.clock = TrioClock(START + timedelta(seconds=20))
    app = make_app()
    schedule = app.schedule(
        broker,
        "minutely",
        Every(MINUTE),
        REPORT,
        ticks=TICKS,
        missed=Missed.all(within=timedelta(minutes=10)),
    )
    async with serving(app):
        await trio.sleep(50)
    # The tick at 0, 20 s late, is on time; the ten before it are from before the schedule.
    assert published(stand) == [iso(0), iso(60)]
    assert schedule.statistics().missed == 0


class KeyedReport(Inbox[Lease], table="keyed_reports"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    dedup: Annotated[str | None, Unique()] = None
    payload: Annotated[bytes, Payload()]


async def test_overlap_skip_skips_a_tick_while_an_earlier_ticks_row_is_unfinished(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = stand.broker()
    handled: list[str] = []

    @subscriber(InboxQueue(KeyedReport, "reports").workers(2))
    async def report(request: ReportRequest) -> None:
        await trio.sleep(25)  # longer than the schedule's interval
        handled.append(request.tick)

    app = make_app()
    app.on_startup(lambda: broker.create_tables(KeyedReport))
    app.include(broker, report)
    every = Every(timedelta(seconds=10))
    made = Publish(KeyedReport, lambda tick: ReportRequest(tick.at.isoformat()))
    schedule = app.schedule(broker, "reports", every, made, ticks=TICKS, overlap="skip")
    async with serving(app):
        await trio.sleep(35)
    # The row of tick 0 is in work until 25: ticks 10 and 20 skip; tick 30 publishes.
    assert marks(stand, "reports") == [
        (at(0), "published"),
        (at(10), "skipped"),
        (at(20), "skipped"),
        (at(30), "published"),
    ]
    assert handled == [iso(0)]
    stats = schedule.statistics()
    assert (stats.published, stats.skipped) == (2, 2)


def test_overlap_skip_needs_a_unique_field(stand: Stand) -> None:
    rule = (
        r"^app.schedule\('reports'\): overlap='skip' publishes each tick's row with the "
        r"schedule's key in the row's Unique\(\) field \(an unfinished earlier row holds it\), "
        r"found report_jobs \(Report\) without one; add one, like dedup: "
        r"Annotated\[str \| None, Unique\(\)\] = None$"
    )
    with pytest.raises(DeclarationError, match=rule):
        make_app().schedule(
            stand.broker(),
            "reports",
            Every(timedelta(seconds=10)),
            REPORT,
            ticks=TICKS,
            overlap="skip",
        )


@pytest.mark.parametrize("stand", ["sqlite"], indirect=True)
async def test_prometheus_counts_each_schedules_ticks_by_result(
    stand: Stand, clock: VirtualClock
) -> None:
    mark(stand, "minutely", at(-300))  # down since: four ticks came due unfired
    registry = CollectorRegistry()
    app = make_app()
    PrometheusMetrics(app, registry=registry)
    app.schedule(stand.broker(), "minutely", Every(MINUTE), REPORT, ticks=TICKS)
    app.schedule(stand.broker(), "reports", Every(MINUTE), REPORT, ticks=TICKS)

    def ticks(schedule: str) -> dict[str, float | None]:
        return {
            result: registry.get_sample_value(
                "trinbox_schedule_ticks_total", {"schedule": schedule, "result": result}
            )
            for result in ("published", "skipped", "taken", "missed", "failed")
        }

    async with serving(app):
        await trio.sleep(30)
        mark(stand, "reports", at(60))  # fired by another process, before this one
        await trio.sleep(60)
        # Published for other threads each second while serving.
        assert ticks("reports")["taken"] == 1
    assert ticks("minutely") == {
        "published": 2.0,
        "skipped": 0.0,
        "taken": 0.0,
        "missed": 4.0,
        "failed": 0.0,
    }
    assert ticks("reports") == {
        "published": 1.0,
        "skipped": 0.0,
        "taken": 1.0,
        "missed": 0.0,
        "failed": 0.0,
    }
