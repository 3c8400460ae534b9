"""README "Headers": its service, written to ``mail.py`` in an empty directory, runs as
``trinbox run mail:app`` in a process of its own and prints what the README shows (the headers
the handler read through ``keys.Headers``); the stored column is the JSON the README says
``insert_statement`` binds; and the refusal it shows is the one a publish into the first
example's table raises. README "Trace context across the queue": ``traced.py`` beside it
prints what the README shows."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trinbox import SqlBroker
from trinbox.errors import HeaderRefused

from ..readme import README, as_module, block, child_env, shown
from .kit import Running


async def test_the_headers_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "mail.py").write_text(block("readme_headers"))
    printed = shown("readme_headers_output")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", "mail:app"],
        cwd=tmp_path,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running = Running(process)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(running.pump, process.stdout, running.out)
        nursery.start_soon(running.pump, process.stderr, running.err)
        await running.wait_lines(printed)
        process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    assert running.out.decode().splitlines() == [printed]
    with sqlite3.connect(tmp_path / "mail.db") as db:
        left = db.execute("SELECT COUNT(*) FROM mail_jobs").fetchone()
    assert left == (0,)


def test_insert_statement_binds_the_json_the_readme_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = as_module("readme_mail", "readme_headers", monkeypatch)
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/unused.db")
    headers = {"tenant": "acme", "request": "r-17"}
    _, params = broker.insert_statement(
        module.Mail, module.Email("ada@example.com"), headers=headers, paramstyle="named"
    )
    assert f"(`'{params['headers']}'`)" in README.read_text()


def test_the_refusal_is_the_one_the_readme_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    module = as_module("readme_transcoder", "readme_first", monkeypatch)
    with pytest.raises(HeaderRefused) as info:
        module.broker.insert_statement(
            module.Transcode, module.Video("https://example.com/a.mp4"), channel="c1",
            headers={"tenant": "acme"},
        )  # fmt: skip
    assert f"trinbox.errors.HeaderRefused: {info.value}" == shown("readme_headers_refused")


async def test_the_trace_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "mail.py").write_text(block("readme_headers"))
    (tmp_path / "traced.py").write_text(block("readme_trace"))
    done = await trio.run_process(
        [sys.executable, "traced.py"],
        cwd=tmp_path,
        env=child_env(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().rstrip("\n") == shown("readme_trace_output")
