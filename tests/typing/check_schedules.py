"""Schedules: ``app.schedule`` returns a ``Schedule`` whose statistics are typed; its
``Publish`` keeps the row class, so a row the broker's dialect cannot serve (a row lock table
on SQLite) is refused as a publish of it is; ``Cron``, ``Every`` and ``Missed`` are what
``when`` and ``missed`` take."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, assert_type

from trinbox import App, Id, Inbox, Lease, LockedUntil, Payload, RowLock, SqlBroker
from trinbox.schedules import (
    Cron,
    Every,
    Missed,
    Publish,
    Schedule,
    ScheduleStatistics,
    Tick,
    Ticks,
)
from trinbox.testing import fire
from trinbox.typing import Postgres, Sqlite

TICKS = Ticks("app_ticks")


@dataclass
class Request:
    day: str


class Report(Inbox[Lease], table="reports"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


def request(tick: Tick) -> Request:
    assert_type(tick.at, datetime)
    return Request(tick.at.date().isoformat())


def check_schedule(app: App, sqlite: SqlBroker[Sqlite], pg: SqlBroker[Postgres]) -> None:
    publish = Publish(Report, request)
    assert_type(publish, Publish[Report])
    nightly = app.schedule(
        sqlite, "nightly", Cron("0 2 * * *", tz="Europe/Oslo"), publish, ticks=TICKS
    )
    assert_type(nightly, Schedule)
    stats = nightly.statistics()
    assert_type(stats, ScheduleStatistics)
    assert_type(stats.last_tick, datetime | None)
    app.schedule(
        pg,
        "locked",
        Every(timedelta(minutes=5)),
        Publish(Locked, lambda tick: Request(tick.schedule), channel="c1"),
        ticks=TICKS,
        missed=Missed.all(within=timedelta(minutes=30)),
    )


def check_refusals(app: App, sqlite: SqlBroker[Sqlite]) -> None:
    every = Every(timedelta(minutes=5))
    # Argument 1 to "Publish" has incompatible type "type[Locked]"; expected
    # "type[RowOf[Lease | Advisory, Any]]"
    app.schedule(sqlite, "locked", every, Publish(Locked), ticks=TICKS)  # type: ignore[arg-type]  # pyright: ignore[reportCallIssue, reportArgumentType]
    app.schedule(sqlite, "x", "0 2 * * *", Publish(Report), ticks=TICKS)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    app.schedule(sqlite, "x", every, Publish(Report), ticks="app_ticks")  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    Publish(Report, Request("constant"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def check_fire(app: App) -> None:
    outcome = await fire(app, "nightly", at=datetime(2030, 1, 1))
    assert outcome == "published"
