"""The examples run to completion on a fresh SQLite file (what scripts/demo runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from examples import mailer, reports, transcoder


async def test_transcoder_keeps_each_channel_to_one_video_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await transcoder.main(tmp_path / "videos.db", videos=24, channels=4) == 0
    out = capsys.readouterr().out
    assert "no channel ever had two videos in work at once" in out
    # Several channels side by side: each channel's line says 1, the whole more than 1.
    assert out.count(": most videos in work at once = 1\n") == 4
    busiest = re.search(r"most videos in work at once over all channels: (\d+) of 4 workers", out)
    assert busiest is not None and int(busiest.group(1)) > 1
    assert "encoded 24/24" in out


async def test_mailer_sends_and_dead_letters(tmp_path: Path) -> None:
    assert await mailer.main(tmp_path / "mail.db") == 0


async def test_report_renders_outlast_their_lease(tmp_path: Path) -> None:
    assert await reports.main(tmp_path / "reports.db") == 0
