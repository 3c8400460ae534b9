"""README "Results": its service, written to ``quotes.py`` in an empty directory, runs as
``trinbox run quotes:app`` in a process of its own and prints what the README shows (the
handler's result, read back by ``broker.wait`` from the row)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import trio

from ..readme import block, child_env, shown
from .kit import Running


async def test_the_results_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "quotes.py").write_text(block("readme_results"))
    printed = shown("readme_results_output").splitlines()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", "quotes:app"],
        cwd=tmp_path,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running = Running(process)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(running.pump, process.stdout, running.out)
        nursery.start_soon(running.pump, process.stderr, running.err)
        await running.wait_lines(*printed)
        process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    assert running.out.decode().splitlines() == printed
    with closing(sqlite3.connect(tmp_path / "quotes.db")) as db:
        kept = db.execute("SELECT quote, processed_at IS NOT NULL FROM quote_jobs").fetchall()
    assert kept == [('{"total":12}', 1)]
