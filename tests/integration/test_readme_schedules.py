"""README "Periodic schedules": its service, run in virtual time on SQLite from an empty
directory across Oslo's spring-forward night, prints what the README shows; the tick table's
DDL is what ``trinbox schema nightly:TICKS`` prints; the refusal quoted for six fields is the
one raised."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import trio

from trinbox.errors import DeclarationError
from trinbox.schedules import Cron
from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import README, block, child_env, shown


@pytest.fixture
def nightly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///reports.db
    (tmp_path / "nightly.py").write_text(block("readme_schedules"))
    module = types.ModuleType("nightly")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_schedules"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_nightly_report_runs_across_spring_forward(
    nightly: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = nightly
    noon = datetime(2026, 3, 27, 12, tzinfo=ZoneInfo("Europe/Oslo"))
    m.broker.clock = TrioClock(noon.astimezone(UTC))
    # Three days of claims once a second would take minutes; a tick's publish wakes its
    # subscription anyway.
    m.broker.poll_interval = timedelta(hours=6)
    with trio.fail_after(4 * 86400):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, m.nightly_report, 3)
            m.app.shutdown()
    assert capsys.readouterr().out.splitlines() == shown("readme_schedules_output").splitlines()
    (schedule,) = m.app.schedules
    stats = schedule.statistics()
    assert (stats.published, stats.missed, stats.failed) == (3, 0, 0)


def test_the_tick_table_ddl_is_what_trinbox_schema_prints(nightly: types.ModuleType) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trinbox", "schema", "nightly:TICKS"],
        env=child_env(PYTHONPATH=f"{Path.cwd()}:{child_env()['PYTHONPATH']}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown("readme_schedules_ddl")


def test_the_six_field_refusal_is_quoted() -> None:
    with pytest.raises(DeclarationError) as caught:
        Cron("0 0 2 * * *")
    quoted = str(caught.value).replace("*", "\\*")
    assert quoted in " ".join(README.read_text().split())
