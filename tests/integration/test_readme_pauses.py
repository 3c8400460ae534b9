"""README "Pause and resume": its service, served in virtual time on SQLite from an empty
directory, stops claiming at a pause and claims again at the resume, its statistics reading
``paused``; and the ``trinbox queues`` commands it shows print what it shows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import as_module, block, child_env, shown


async def test_the_service_pauses_and_resumes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: VirtualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # its sqlite:///sync.db
    m: Any = as_module("pausing", "readme_pauses", monkeypatch)
    m.broker.clock = TrioClock()
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await m.broker.publish(m.Sync, m.Account("north"))
            await settled(m.app, m.sync, 1)
            await m.broker.pause(m.Sync)
            assert m.app.statistics(m.sync).paused
            assert m.broker.paused(m.Sync)
            await m.broker.publish(m.Sync, m.Account("south"))
            await trio.sleep(10)  # ten poll intervals
            assert capsys.readouterr().out == "synced north\n"
            await m.broker.resume(m.Sync)
            await settled(m.app, m.sync, 2)
            m.app.shutdown()
    assert capsys.readouterr().out == "synced south\n"


def test_the_commands_print_what_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "pausing.py").write_text(block("readme_pauses"))
    env = child_env()
    shown_lines = shown("readme_pauses_cli").splitlines()
    commands = [line for line in shown_lines if line.startswith("$ trinbox ")]
    assert len(commands) == 2
    # The tables, as `trinbox schema` prints them for migrations.
    for target in ("pausing:Sync", "pausing:PAUSES"):
        script = subprocess.run(
            [sys.executable, "-m", "trinbox", "schema", target, "--dialect", "sqlite"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        with sqlite3.connect(tmp_path / "sync.db") as conn:
            conn.executescript(script)
    printed: list[str] = []
    for command in commands:
        args = command.removeprefix("$ trinbox ").split()
        done = subprocess.run(
            [sys.executable, "-m", "trinbox", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        printed += [command, *done.stdout.splitlines()]
    assert printed == shown_lines
