"""What the schedule tests share: the job table a tick publishes into, the tick table, and
reads of both through the stand (never through trinbox)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from trinbox import Attempt, Id, Inbox, Lease, LockedUntil, Payload
from trinbox.schedules import Publish, Tick, Ticks
from trinbox.schema import DialectName, ddl_script

from ..stands import Stand, StandName

DIALECT: dict[StandName, DialectName] = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "mariadb": "mysql",
}

TICKS = Ticks("app_ticks")


class Report(Inbox[Lease], table="report_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    kind: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class ReportRequest:
    tick: str


def request(tick: Tick) -> ReportRequest:
    """The tick's message: its time, in the schedule's zone."""
    return ReportRequest(tick.at.isoformat())


REPORT = Publish(Report, request, kind="report")


def create(stand: Stand) -> None:
    dialect = DIALECT[stand.name]
    stand.script(ddl_script(Report, dialect) + ddl_script(TICKS, dialect))


def utc(value: Any) -> datetime:
    """A time as the stand's driver reads it, as an aware UTC datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def published(stand: Stand) -> list[str]:
    """The ticks of the rows in report_jobs, in the order of their ids."""
    rows = stand.rows("SELECT payload FROM report_jobs ORDER BY id")
    return [json.loads(bytes(payload))["tick"] for (payload,) in rows]


def marks(stand: Stand, schedule: str) -> list[tuple[datetime, str]]:
    """The schedule's ticks in the tick table, oldest first, with their outcome."""
    rows = stand.rows(
        "SELECT tick, outcome FROM app_ticks WHERE schedule = ? ORDER BY tick", schedule
    )
    return [(utc(tick), outcome) for tick, outcome in rows]


def stored(stand: Stand, value: datetime) -> object:
    """A time as trinbox stores it on the stand (UTC text on SQLite, naive UTC on MariaDB)."""
    if stand.name == "sqlite":
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    if stand.name == "mariadb":
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def mark(stand: Stand, schedule: str, tick: datetime, outcome: str = "published") -> None:
    """A tick fired before the test (by a process gone since), with no row."""
    stand.execute(
        "INSERT INTO app_ticks (schedule, tick, fired_at, outcome) VALUES (?, ?, ?, ?)",
        schedule,
        stored(stand, tick),
        stored(stand, tick),
        outcome,
    )
