"""`trinbox schema MODULE:Row` end to end, as a subprocess: its output, run on a fresh
database of each stand by the stand's own client, makes a table the startup check accepts
and a queue that serves; its refusals are one readable line and a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

import trinbox
from examples.transcoder import Transcode
from trinbox import HandlerOutcome, InboxQueue, subscriber
from trinbox.testing import settled

from .serving import make_app, serving
from .stands import STANDS, StandName, fresh_stand

ROOT = Path(trinbox.__file__).parents[1]
DIALECT: dict[StandName, str] = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mysql"}


def trinbox_schema(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "trinbox", "schema", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Video:
    title: str
    channel: str


@pytest.mark.parametrize("stand_name", STANDS)
async def test_the_printed_ddl_makes_a_table_that_serves(
    stand_name: StandName, tmp_path: Path
) -> None:
    done = trinbox_schema(
        "examples.transcoder:Transcode",
        "--dialect",
        DIALECT[stand_name],
        "--dead-letter",
        "video_jobs_dead",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(";\n") == 2  # the table and its dead letter table
    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(done.stdout)
        broker = stand.broker()
        handled: list[str] = []

        @subscriber(InboxQueue(Transcode, "videos"))
        async def transcode(video: Video) -> HandlerOutcome:
            handled.append(video.title)
            return HandlerOutcome.retry() if video.title == "bad" else HandlerOutcome.ack()

        app = make_app()
        app.include(broker, transcode).max_attempts(1).dead_letter("video_jobs_dead")
        async with serving(app):
            await broker.publish(Transcode, Video("good", "c"), channel="c")
            await broker.publish(Transcode, Video("bad", "c"), channel="c")
            with trio.fail_after(20):
                await settled(app, transcode, 2)
        assert sorted(handled) == ["bad", "good"]
        assert stand.value("SELECT COUNT(*) FROM video_jobs") == 0
        assert stand.rows("SELECT channel FROM video_jobs_dead") == [("c",)]


def test_help_names_the_options() -> None:
    done = trinbox_schema("--help")
    assert done.returncode == 0
    assert "MODULE:Row" in done.stdout
    assert "--dialect [postgres|mysql|sqlite]" in done.stdout
    assert "--dead-letter NAME" in done.stdout


def test_a_field_without_a_type_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "odd_rows.py").write_text(
        "from datetime import datetime\n"
        "from typing import Annotated\n"
        "from trinbox import Id, Inbox, Lease, LockedUntil\n"
        "class Odd(Inbox[Lease], table='odd'):\n"
        "    id: Annotated[int, Id(generated=True)]\n"
        "    locked_until: Annotated[datetime | None, LockedUntil()]\n"
        "    ratio: complex\n"
    )
    done = trinbox_schema("odd_rows:Odd", "--dialect", "sqlite", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: field 'ratio' of odd (Odd): the DDL derives")
    assert "SqlType" in lines[0]


def test_a_target_that_is_no_row_class_is_refused() -> None:
    done = trinbox_schema("examples.transcoder:Video")
    assert done.returncode == 2
    assert "not a row class" in done.stderr


UTC_ROWS = """\
from datetime import datetime
from typing import Annotated
from trinbox import Attempt, Group, Id, Inbox, Lease, LockedUntil, Payload, Priority, RetryAfter
class Ledger(Inbox[Lease], table="ledger"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
"""


def test_mysql_prints_a_generated_retry_after_defaulting_to_the_utc_now(tmp_path: Path) -> None:
    # UTC_TIMESTAMP, not CURRENT_TIMESTAMP: the writing session's time zone does not move it.
    (tmp_path / "utc_rows.py").write_text(UTC_ROWS)
    done = trinbox_schema("utc_rows:Ledger", "--dialect", "mysql", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "CREATE TABLE IF NOT EXISTS `ledger` (\n"
        "    `id` BIGINT AUTO_INCREMENT PRIMARY KEY,\n"
        "    `account` VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    `priority` INT NOT NULL DEFAULT 0,\n"
        "    `retry_after` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
        "    `attempt` INT NOT NULL DEFAULT 1,\n"
        "    `locked_until` DATETIME(6),\n"
        "    `payload` LONGBLOB NOT NULL,\n"
        "    INDEX `ledger_claim` (`account`, `priority`, `id`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n"
    )
