"""README "Retention": its service, served eight days in virtual time on SQLite from an empty
directory, logs the passes the README shows and counts what it reads in the statistics; and
``trinbox prune`` over the same database, its rows aged eight days, prints what the README
shows (a subprocess, the system clock)."""

from __future__ import annotations

import logging
import re
import sqlite3
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import README, block, child_env, shown

DAY = 86400.0


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def receipts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///receipts.db
    (tmp_path / "receipts.py").write_text(block("readme_retention"))
    module = types.ModuleType("receipts")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(block("readme_retention"), module.__dict__)
    yield module


async def _serve(m: Any, days: float) -> None:
    m.broker.clock = TrioClock()  # the ages pass in virtual time
    m.broker.poll_interval = timedelta(hours=6)  # a publish wakes the claim; few polls
    mount = m.app.mounts[0]
    mount.retention = replace(mount.retention, every=timedelta(hours=1))  # fewer passes
    with trio.fail_after(30 * DAY):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, m.send_receipt, 4)
            await trio.sleep(days * DAY)
            m.app.shutdown()


async def test_the_passes_log_and_count_what_the_readme_shows(
    receipts: types.ModuleType, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trinbox.retention")
    m: Any = receipts
    await _serve(m, 8)
    logged = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name == "trinbox.retention"
    ]
    assert logged == shown("readme_retention_output").splitlines()
    stats = m.app.statistics(m.send_receipt)
    assert (stats.acked, stats.dead_lettered) == (2, 2)
    counts = " and ".join(
        f"`{name}={getattr(stats, name)}`" for name in ("pruned_processed", "pruned_dead_letters")
    )
    assert f"counts {counts}." in _flat(README.read_text())
    with sqlite3.connect("receipts.db") as db:
        assert db.execute("SELECT count(*) FROM receipt_jobs").fetchone() == (0,)


def _console(tag: str) -> list[tuple[list[str], list[str]]]:
    """The commands of the console block marked ``tag`` and the lines each prints."""
    found = re.search(rf"<!-- test: {tag} -->\n```console\n(.*?)\n```", README.read_text(), re.S)
    assert found is not None, f"README.md: the block {tag} moved"
    runs: list[tuple[list[str], list[str]]] = []
    for line in found.group(1).splitlines():
        if line.startswith("$ "):
            runs.append((line[2:].split(), []))
        else:
            runs[-1][1].append(line)
    return runs


def test_trinbox_prune_prints_what_the_readme_shows(
    receipts: types.ModuleType, tmp_path: Path
) -> None:
    trio.run(_serve, receipts, 0, clock=VirtualClock())
    # Aged eight days by the system clock, which the command reads.
    old = (datetime.now(UTC) - timedelta(days=8)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect("receipts.db") as db:
        db.execute(
            "UPDATE receipt_jobs SET processed_at = ? WHERE processed_at IS NOT NULL", (old,)
        )
        db.execute("UPDATE receipt_jobs SET dead_at = ? WHERE dead_at IS NOT NULL", (old,))
        assert db.execute("SELECT count(*) FROM receipt_jobs").fetchone() == (4,)
    runs = _console("readme_retention_prune")
    assert [args[:2] for args, _ in runs] == [["trinbox", "prune"]] * 2
    for args, lines in runs:
        done = subprocess.run(
            [sys.executable, "-m", "trinbox", *args[1:]],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == lines
    with sqlite3.connect("receipts.db") as db:
        assert db.execute("SELECT count(*) FROM receipt_jobs").fetchone() == (0,)
