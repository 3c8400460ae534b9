"""Periodic schedules with no leader: every serving process runs the scheduler, and each tick
publishes one row, written in one transaction with the tick's mark in a tick table keyed by
(schedule, tick).

    TICKS = Ticks("app_ticks")
    app.schedule(
        broker,
        "nightly-report",
        Cron("0 2 * * *", tz="Europe/Oslo"),           # pip install "trinbox[cron]"
        Publish(Report, lambda tick: ReportRequest(day=tick.at.date())),
        ticks=TICKS,
        missed=Missed.latest(within=timedelta(minutes=10)),
    )

``broker.create_tables(TICKS)`` and ``trinbox schema MODULE:TICKS`` make the tick table.
"""

from __future__ import annotations

from ._api.schedule import Missed as Missed
from ._api.schedule import Publish as Publish
from ._api.schedule import ScheduleStatistics as ScheduleStatistics
from ._api.schedule import Tick as Tick
from ._api.when import Cron as Cron
from ._api.when import Every as Every
from ._declare._ticks import Ticks as Ticks
from ._engine.schedules import Schedule as Schedule

__all__ = [
    "Cron",
    "Every",
    "Missed",
    "Publish",
    "Schedule",
    "ScheduleStatistics",
    "Tick",
    "Ticks",
]
