"""README "A queue in twenty lines": its service, written to ``transcoder.py`` in an empty
directory, runs as the README shows it, ``trinbox run transcoder:app`` in a process of its
own: it creates its tables, publishes its videos, encodes them (the retry included) and
prints what the README shows; Ctrl-C (SIGINT) shuts it down with status 0."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import trio

from ..readme import README, block, child_env
from .kit import Running

# The log lines' time stamp, as --log-format text writes it.
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 ")


def _shown() -> tuple[list[str], list[str]]:
    """What the README shows ``trinbox run`` print: the handler's lines (stdout) and the log
    lines (stderr, time stamps left out), each in order."""
    found = re.search(
        r"<!-- test: readme_first_output -->\n```console\n\$ trinbox run transcoder:app\n"
        r"(.*?)```",
        README.read_text(),
        re.DOTALL,
    )
    assert found is not None, "README.md: the first example's output block moved"
    lines = [line.removeprefix("^C") for line in found.group(1).splitlines()]
    logs = [STAMP.sub("", line) for line in lines if STAMP.match(line)]
    printed = [line for line in lines if not STAMP.match(line)]
    return printed, logs


async def test_the_first_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "transcoder.py").write_text(block("readme_first"))
    printed, logs = _shown()
    assert len(printed) == 3
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", "transcoder:app"],
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
    # The videos are encoded side by side (a channel each), so in any order.
    assert sorted(running.out.decode().splitlines()) == sorted(printed)
    written = [STAMP.sub("", line) for line in running.err.decode().splitlines()]
    assert written == logs
    with sqlite3.connect(tmp_path / "jobs.db") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        left = db.execute("SELECT COUNT(*) FROM video_jobs").fetchone()
    assert {"video_jobs", "video_jobs_dead"} <= tables
    assert left == (0,)
