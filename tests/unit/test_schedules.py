"""Schedules without a database: when ``Every`` and ``Cron`` tick (daylight saving time in a
real zone included), what a declaration refuses, and the tick table's statements."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from trinbox import App, SqlBroker
from trinbox.errors import DeclarationError, MissingExtra
from trinbox.schedules import Cron, Every, Missed, Publish, Ticks
from trinbox.schema import ddl

from ..integration.schedules.kit import REPORT, TICKS, Report

OSLO = ZoneInfo("Europe/Oslo")


def oslo(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=OSLO)


def local(ticks: Iterator[datetime]) -> list[str]:
    return [t.astimezone(OSLO).isoformat() for t in ticks]


def test_every_ticks_at_the_multiples_of_its_interval_since_the_epoch() -> None:
    every = Every(timedelta(minutes=5))
    start = datetime(2026, 3, 29, 0, 3, 20, tzinfo=UTC)
    assert every.after(start) == datetime(2026, 3, 29, 0, 5, tzinfo=UTC)
    assert every.after(datetime(2026, 3, 29, 0, 5, tzinfo=UTC)) == datetime(
        2026, 3, 29, 0, 10, tzinfo=UTC
    )
    # Given in another zone, the same instants.
    assert every.after(start.astimezone(OSLO)) == every.after(start)
    assert list(every.between(start, start + timedelta(minutes=11))) == [
        datetime(2026, 3, 29, 0, 5, tzinfo=UTC),
        datetime(2026, 3, 29, 0, 10, tzinfo=UTC),
    ]


def test_a_fixed_time_on_the_spring_forward_day_runs_at_the_first_minute_after_the_gap() -> None:
    # Oslo, 2026-03-29: at 02:00 the clocks go to 03:00; 02:30 does not exist.
    cron = Cron("30 2 * * *", tz="Europe/Oslo")
    assert local(cron.between(oslo(2026, 3, 27, 12), oslo(2026, 3, 30, 12))) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_a_fixed_time_on_the_fall_back_day_runs_once_at_its_first_occurrence() -> None:
    # Oslo, 2026-10-25: at 03:00 the clocks go back to 02:00; 02:30 happens twice.
    cron = Cron("30 2 * * *", tz="Europe/Oslo")
    ticks = list(cron.between(oslo(2026, 10, 24, 12), oslo(2026, 10, 26, 12)))
    assert local(iter(ticks)) == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    # Asked from inside the repeated hour's second pass, the day's tick is behind: the next
    # is the next day's (cronsim walks wall-clock time and would give 02:30 again).
    repeated = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)
    assert repeated.astimezone(OSLO).isoformat() == "2026-10-25T02:10:00+01:00"
    assert local(iter([cron.after(repeated)])) == ["2026-10-26T02:30:00+01:00"]


def test_a_wildcard_hour_runs_by_elapsed_time_across_daylight_saving() -> None:
    cron = Cron("30 * * * *", tz="Europe/Oslo")
    fall = local(cron.between(oslo(2026, 10, 25, 1), oslo(2026, 10, 25, 4)))
    assert fall == [
        "2026-10-25T01:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",  # the repeated hour runs twice
        "2026-10-25T03:30:00+01:00",
    ]
    spring = local(cron.between(oslo(2026, 3, 29, 1), oslo(2026, 3, 29, 4)))
    assert spring == ["2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00"]


def test_cron_in_utc_by_default() -> None:
    cron = Cron("0 2 * * *")
    assert cron.after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(2026, 1, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Cron("0 0 2 * * *"),
            r"^a cron expression has five fields \(minute hour day month weekday\), found six "
            r"in '0 0 2 \* \* \*': peers disagree on whether seconds come first or last; drop "
            r"the seconds field, or tick by Every\(timedelta\(seconds=\.\.\.\)\)$",
        ),
        (
            lambda: Cron("0 2 * *"),
            r"^a cron expression has five fields \(minute hour day month weekday\), found "
            r"'0 2 \* \*'; write five, like Cron\('0 2 \* \* \*'\)$",
        ),
        (lambda: Cron("@daily"), r"^a cron expression has five fields"),
        (
            lambda: Cron("0 25 * * *"),
            r"^a cron expression is one cronsim reads, found '0 25 \* \* \*': Bad hour; fix "
            r"the field it names$",
        ),
        (
            lambda: Cron("0 2 * * *", tz="Europe/Atlantis"),
            r"^a cron schedule's time zone is an IANA name or a tzinfo, found "
            r"'Europe/Atlantis'; pass one like tz='Europe/Oslo'",
        ),
        (
            lambda: Every(timedelta(milliseconds=500)),
            r"^Every ticks at an interval of whole seconds, one or more, found "
            r"datetime\.timedelta\(microseconds=500000\); pass a timedelta",
        ),
        (
            lambda: Missed.latest(within=timedelta(0)),
            r"^Missed\.latest\(within=\.\.\.\) takes a positive timedelta, found "
            r"datetime\.timedelta\(0\)",
        ),
        (
            lambda: Ticks("app_ticks", keep=timedelta(minutes=5)),
            r"^Ticks\('app_ticks'\): ticks are kept for an hour or more",
        ),
        (lambda: Ticks(""), r"^Ticks\(''\): a tick table is named by a non-empty str"),
        (
            lambda: Publish(Report, "hello"),  # type: ignore[arg-type]
            r"^Publish\('Report', message\): the message is a function of the tick, found "
            r"'hello'; pass lambda tick: 'hello'$",
        ),
    ],
    ids=[
        "six fields",
        "four fields",
        "nickname",
        "bad hour",
        "unknown zone",
        "sub-second",
        "empty window",
        "short keep",
        "no table",
        "constant message",
    ],
)
def test_declarations_refused(make: Any, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        make()


def broker() -> SqlBroker[Any]:
    return SqlBroker.sqlite("sqlite:///never-opened.db")


def test_app_schedule_refuses_what_it_cannot_run() -> None:
    app = App()
    app.schedule(broker(), "nightly", Every(timedelta(days=1)), REPORT, ticks=TICKS)
    with pytest.raises(
        DeclarationError,
        match=r"^app\.schedule\('nightly'\): an app has one schedule per name \(its ticks are "
        r"recorded by name\), found 'nightly' declared twice; name the second one apart$",
    ):
        app.schedule(broker(), "nightly", Every(timedelta(days=1)), REPORT, ticks=TICKS)
    with pytest.raises(
        DeclarationError,
        match=r"^app\.schedule\('weekly'\): a missed-ticks window is shorter than the tick "
        r"table keeps its ticks \(less an hour\), so a pruned tick never fires again, found "
        r"Missed\.all\(within=7 days, 0:00:00\) beside Ticks\('app_ticks', keep=7 days, "
        r"0:00:00\); shorten the window or keep ticks longer$",
    ):
        app.schedule(
            broker(),
            "weekly",
            Every(timedelta(days=7)),
            REPORT,
            ticks=TICKS,
            missed=Missed.all(within=timedelta(days=7)),
        )
    with pytest.raises(DeclarationError, match=r"^app\.schedule\(''\): a schedule is named"):
        app.schedule(broker(), "", Every(timedelta(days=1)), REPORT, ticks=TICKS)
    with pytest.raises(
        DeclarationError,
        match=r"^app\.schedule\('x'\): a schedule ticks by Cron\('\.\.\.'\) or "
        r"Every\(timedelta\(\.\.\.\)\), found '0 2 \* \* \*'; pass one of those$",
    ):
        app.schedule(broker(), "x", "0 2 * * *", REPORT, ticks=TICKS)  # type: ignore[call-overload]
    with pytest.raises(
        DeclarationError, match=r"^app\.schedule\('x'\): a schedule publishes a Publish"
    ):
        app.schedule(broker(), "x", Every(timedelta(days=1)), Report, ticks=TICKS)  # type: ignore[call-overload]
    assert [s.name for s in app.schedules] == ["nightly"]
    assert app.brokers  # the schedule's broker opens with the app


def test_cron_without_cronsim_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def without_cronsim(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cronsim":
            raise ModuleNotFoundError("No module named 'cronsim'", name="cronsim")
        return real(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "cronsim", raising=False)
    monkeypatch.setattr(builtins, "__import__", without_cronsim)
    with pytest.raises(MissingExtra) as caught:
        Cron("0 2 * * *")
    assert str(caught.value) == (
        "a Cron schedule reads its expression with the cronsim library, found no module named "
        "'cronsim'; install the extra: pip install \"trinbox[cron]\" (or tick by "
        "Every(timedelta(...)), which needs no library)"
    )
    assert isinstance(caught.value, ImportError)
    assert caught.value.name == "cronsim"
    Every(timedelta(seconds=30))  # needs no library


def test_the_tick_table_per_dialect() -> None:
    assert ddl(TICKS, "postgres") == [
        'CREATE TABLE IF NOT EXISTS "app_ticks" (\n'
        "    schedule TEXT NOT NULL,\n"
        "    tick TIMESTAMPTZ NOT NULL,\n"
        "    fired_at TIMESTAMPTZ NOT NULL,\n"
        "    outcome TEXT NOT NULL,\n"
        "    PRIMARY KEY (schedule, tick)\n"
        ")"
    ]
    assert ddl(TICKS, "mysql") == [
        "CREATE TABLE IF NOT EXISTS `app_ticks` (\n"
        "    schedule VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    tick DATETIME(6) NOT NULL,\n"
        "    fired_at DATETIME(6) NOT NULL,\n"
        "    outcome VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    PRIMARY KEY (schedule, tick)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    ]
    assert ddl(Ticks("ticks", schema="ops"), "sqlite")[0].startswith(
        "CREATE TABLE IF NOT EXISTS `ops`.`ticks` (\n    schedule TEXT NOT NULL,\n"
        "    tick TEXT NOT NULL,"
    )
