"""``trinbox inspect`` shows each schedule's last tick (fired by any process) and its next,
in the schedule's zone, below the queues; a schedule never fired shows — for its last."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from trinbox.schedules import Cron, Every

from ..readme import child_env
from ..stands import fresh_stand
from .kit import create, mark

SERVICE = """
from datetime import timedelta

from trinbox import App, AppInfo, SqlBroker
from trinbox.schedules import Cron, Every

from tests.integration.schedules.kit import REPORT, TICKS

broker = SqlBroker.sqlite({url!r})
app = App(AppInfo("svc"))
app.schedule(broker, "yearly", Every(timedelta(days=365)), REPORT, ticks=TICKS)
app.schedule(broker, "nightly", Cron("0 2 * * *", tz="Europe/Oslo"), REPORT, ticks=TICKS)
"""


def test_inspect_shows_the_last_and_next_tick(tmp_path: Path) -> None:
    with fresh_stand("sqlite", tmp_path) as stand:
        create(stand)
        last = datetime(2026, 3, 1, tzinfo=UTC)
        mark(stand, "yearly", last)
        (tmp_path / "svc.py").write_text(SERVICE.format(url=stand.url))
        done = subprocess.run(
            [sys.executable, "-m", "trinbox", "inspect", "svc:app"],
            cwd=tmp_path,
            env=child_env(PYTHONPATH=f"{tmp_path}:{child_env()['PYTHONPATH']}"),
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    now = datetime.now(UTC)
    yearly = Every(timedelta(days=365)).after(max(now, last))
    nightly = Cron("0 2 * * *", tz="Europe/Oslo")
    upcoming = nightly.after(now).astimezone(nightly.zone).isoformat()
    assert [re.split(r"  +", line) for line in done.stdout.splitlines()] == [
        ["SCHEDULE", "WHEN", "TICKS", "LAST TICK", "NEXT TICK"],
        ["yearly", "every 365 days, 0:00:00", "app_ticks", last.isoformat(), yearly.isoformat()],
        ["nightly", "cron '0 2 * * *' (Europe/Oslo)", "app_ticks", "—", upcoming],
    ]
