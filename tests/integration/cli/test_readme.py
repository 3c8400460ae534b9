"""README.md's section on the `trinbox` command shows real output: its service module is
written out, its commands run on a SQLite database holding the rows the section describes,
and each console block is compared with what the commands print (times and ages aside)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio

from .kit import ROOT

README = ROOT / "README.md"

DDL = """
CREATE TABLE emails (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    dead_from TEXT,
    retry_after TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    locked_until TEXT,
    payload BLOB NOT NULL
);
"""

_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
_AGE = re.compile(r"(?<![\w.])\d+\.\d[smhd](?![\w])")
_AGE_JSON = re.compile(r'("oldest_due_age_seconds": )[0-9.e+-]+')


def section() -> str:
    text = README.read_text()
    start = text.index("## The `trinbox` command")
    return text[start : text.index("\n## ", start + 1)]


@dataclass
class Block:
    command: str
    expected: list[str]


def console_blocks(text: str) -> list[Block]:
    found = []
    for body in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in body.splitlines():
            if line.startswith("$ "):
                found.append(Block(line[2:], []))
            else:
                found[-1].expected.append(line)
    return found


def normal(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = _AGE_JSON.sub(r"\1<age>", _AGE.sub("<age>", _TIME.sub("<time>", line)))
        out.append(" ".join(line.split()))
    return out


def stored(at: datetime) -> str:
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def prepare(work: Path, *, table: bool, rows: bool) -> None:
    work.mkdir()
    python = re.search(r"```python\n(.*?)```", section(), re.S)
    assert python is not None
    (work / "service.py").write_text(python.group(1))
    if not table:
        return
    now = datetime.now(UTC)
    with sqlite3.connect(work / "mail.db") as conn:
        conn.executescript(DDL)
        if not rows:
            return
        insert = (
            "INSERT INTO emails (queue, retry_after, attempt, locked_until, payload) "
            "VALUES (?, ?, ?, ?, ?)"
        )
        for seconds, to in ((95, "ann"), (40, "bob"), (10, "cy")):
            due = stored(now - timedelta(seconds=seconds))
            conn.execute(insert, ("outbox", due, 1, None, f'{{"to": "{to}@example.com"}}'.encode()))
        later = stored(now + timedelta(hours=1))
        conn.execute(insert, ("outbox", later, 1, None, b'{"to": "dee@example.com"}'))
        leased = stored(now + timedelta(seconds=30))
        due = stored(now - timedelta(seconds=5))
        conn.execute(insert, ("outbox", due, 2, leased, b'{"to": "ed@example.com"}'))
        # Two dead letters of the outbox, and one that came from another queue (digest).
        dead = insert.replace("(queue, ", "(dead_from, queue, ").replace("(?, ", "(?, ?, ")
        for origin, to in (("outbox", "eve"), ("outbox", "mallory"), ("digest", "flo")):
            conn.execute(
                dead,
                (
                    origin,
                    "outbox.dead",
                    "2026-11-30 09:15:00.000000",
                    4,
                    None,
                    f'{{"to": "{to}@example.com"}}'.encode(),
                ),
            )


def environ() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def command(block: Block) -> list[str]:
    words = block.command.split()
    assert words[0] == "trinbox", block.command
    return [sys.executable, "-m", "trinbox", *words[1:]]


async def serve_and_stop(work: Path, block: Block) -> list[str]:
    """``trinbox run``: until it serves, then SIGINT; its stderr."""
    process = await trio.lowlevel.open_process(
        command(block), cwd=work, env=environ(), stderr=subprocess.PIPE
    )
    err = bytearray()
    signalled = False
    assert process.stderr is not None
    with trio.fail_after(60):
        async for chunk in process.stderr:
            err += chunk
            if b"subscriptions serving" in err and not signalled:
                process.send_signal(signal.SIGINT)
                signalled = True
        await process.wait()
    assert process.returncode == (1 if b"Error:" in err else 0), err.decode()
    return err.decode().splitlines()


async def test_the_readme_shows_what_the_commands_print(tmp_path: Path) -> None:
    blocks = console_blocks(section())
    assert [b.command.split()[1] for b in blocks] == [
        "run",
        "run",
        "run",
        "inspect",
        "inspect",
        "dead-letters",
        "dead-letters",
        "dead-letters",
        "inspect",
    ]
    data = tmp_path / "data"
    prepare(data, table=True, rows=True)
    mismatched = []
    for n, block in enumerate(blocks):
        if block.command.split()[1] == "run":
            fails = bool(block.expected) and block.expected[0].startswith("Error:")
            work = tmp_path / f"run{n}"
            prepare(work, table=not fails, rows=False)
            found = await serve_and_stop(work, block)
        else:
            done = await trio.run_process(
                command(block),
                cwd=data,
                env=environ(),
                capture_stdout=True,
                stderr=subprocess.STDOUT,
                check=False,
            )
            found = done.stdout.decode().splitlines()
        if normal(found) != normal(block.expected):
            mismatched.append(f"$ {block.command}\n" + "\n".join(found))
    assert not mismatched, "\n\n".join(mismatched)


async def test_inspect_reads_the_transcoder_example(tmp_path: Path) -> None:
    # examples.transcoder:app, from the repository's root, on a database of its tables.
    from examples.transcoder import Transcode
    from trinbox.schema import ddl

    path = tmp_path / "videos.db"
    with sqlite3.connect(path) as conn:
        for statement in ddl(Transcode, "sqlite", dead_letter="video_jobs_dead"):
            conn.execute(statement)
        conn.execute("INSERT INTO video_jobs (channel, payload) VALUES ('c1', X'7b7d')")
        conn.execute(
            "INSERT INTO video_jobs_dead (id, channel, attempt, payload) "
            "VALUES (9, 'c2', 6, X'7b7d')"
        )
    done = await trio.run_process(
        [sys.executable, "-m", "trinbox", "inspect", "examples.transcoder:app", "--json"],
        cwd=ROOT,
        env={**environ(), "TRANSCODER_DB": str(path)},
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [
        {
            "table": "video_jobs",
            "group": None,
            "queue": "videos",
            "due": 1,
            "scheduled": 0,
            "in_work": None,
            "dead": 1,
            "oldest_due_age_seconds": None,
        }
    ]
