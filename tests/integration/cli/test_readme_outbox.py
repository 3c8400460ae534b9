"""README "The outbox": its service, written to ``announce.py`` in an empty directory, runs as
the README shows it, ``trinbox run announce:app`` in a process of its own, posting to an HTTP
server the test starts: it prints what the README shows, the webhook gets what the README
says with the headers it names, the declined order leaves no record, and Ctrl-C shuts it down
with status 0. The DDL it shows is what ``trinbox schema`` prints, and the refusal it quotes
is the class statement's."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import trio

from trinbox import Group, Id, Payload, RetryAfter
from trinbox.errors import DeclarationError
from trinbox.outbox import Outbox

from ..http_sink import receiver
from ..readme import README, blocks, child_env
from .kit import Running

# The log lines' time stamp, as --log-format text writes it.
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 ")


def section() -> str:
    text = README.read_text()
    start = text.index("## The outbox\n")
    return text[start : text.index("\n## ", start + 1)]


def shown(tag: str, fence: str) -> str:
    found = re.search(rf"<!-- test: {tag} -->\n```{fence}\n(.*?)```", section(), re.DOTALL)
    assert found is not None, f"README.md: the outbox's block {tag} moved"
    return found.group(1)


def run_shown(
    tag: str = "readme_outbox_output",
    command_shown: str = "$ WEBHOOK_URL=http://localhost:8080/events trinbox run announce:app",
) -> tuple[list[str], list[str]]:
    """What the README shows ``trinbox run`` print: the service's lines (stdout) and the log
    lines (stderr, time stamps left out), each in order."""
    text = shown(tag, "console")
    command, *lines = text.splitlines()
    assert command == command_shown
    lines = [line.removeprefix("^C") for line in lines]
    logs = [STAMP.sub("", line) for line in lines if STAMP.match(line)]
    printed = [line for line in lines if not STAMP.match(line)]
    return printed, logs


async def run_as_shown(tmp_path: Path, program: str, tag: str, command: str, **env: str) -> None:
    """Write the README's ``program`` into ``tmp_path`` and run it as ``command`` shows (its
    ``trinbox run`` target), until it printed what the README shows, then Ctrl-C: it ends with
    status 0, having printed those lines (in any order: tasks print side by side) and the log
    lines shown (time stamps left out)."""
    (tmp_path / program).write_text(blocks("readme_program")[program])
    printed, logs = run_shown(tag, command)
    target = command.split()[-1]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", target],
        cwd=tmp_path,
        env=child_env(**env),
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
    assert sorted(running.out.decode().splitlines()) == sorted(printed)
    assert [STAMP.sub("", line) for line in running.err.decode().splitlines()] == logs


async def test_the_outbox_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    assert len(run_shown()[0]) == 3
    async with receiver() as webhook:
        await run_as_shown(
            tmp_path,
            "announce.py",
            "readme_outbox_output",
            "$ WEBHOOK_URL=http://localhost:8080/events trinbox run announce:app",
            WEBHOOK_URL=webhook.url,
        )
    got = [
        (body["order"], body["http_headers"]["x-event"], body["http_headers"]["trinbox-outbox-id"])
        for body in webhook.received
    ]
    assert got == [(1, "orders.placed", "1"), (3, "orders.placed", "2")]
    assert "`X-Event: orders.placed` and\n`trinbox-outbox-id: 1` (then `2`)" in section()
    with sqlite3.connect(tmp_path / "shop.db") as db:
        orders = db.execute("SELECT id FROM orders ORDER BY id").fetchall()
        events = db.execute(
            "SELECT id, processed_at IS NOT NULL FROM order_events ORDER BY id"
        ).fetchall()
    assert orders == [(1,), (3,)]
    assert events == [(1, 1), (2, 1)]


async def test_the_relay_into_another_broker_runs_as_the_readme_shows(tmp_path: Path) -> None:
    await run_as_shown(tmp_path, "billing.py", "readme_into_output", "$ trinbox run billing:app")
    with sqlite3.connect(tmp_path / "shop.db") as shop:
        assert shop.execute("SELECT count(*) FROM order_events").fetchall() == [(0,)]
    with sqlite3.connect(tmp_path / "billing.db") as billing:
        marks = billing.execute(
            "SELECT consumer, record_id FROM billing_seen ORDER BY record_id"
        ).fetchall()
        assert billing.execute("SELECT count(*) FROM billing_jobs").fetchall() == [(0,)]
    assert marks == [("billing_jobs:orders.placed", "1"), ("billing_jobs:orders.placed", "2")]
    assert "(`billing_jobs:orders.placed`)" in section()
    said = " ".join(section().split())
    assert "*\"outbox record '1' was handled before; acked without the handler\"*" in said
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "trinbox", "schema", "billing:seen", "--dialect", "sqlite"],
            cwd=tmp_path,
            env=child_env(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().startswith("CREATE TABLE IF NOT EXISTS `billing_seen` (")
    assert "`trinbox schema billing:seen`" in section()


async def test_the_custom_events_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    await run_as_shown(
        tmp_path, "own_outbox.py", "readme_custom_events_output", "$ trinbox run own_outbox:app"
    )
    with sqlite3.connect(tmp_path / "legacy.db") as db:
        rows = db.execute(
            "SELECT id, tries, taken_at IS NULL, sent_at IS NOT NULL FROM legacy_outbox"
        ).fetchall()
    assert rows == [(1, 1, 1, 1), (2, 1, 1, 1)]


def test_the_schema_shown_is_what_trinbox_schema_prints(tmp_path: Path) -> None:
    (tmp_path / "announce.py").write_text(blocks("readme_program")["announce.py"])
    assert "`trinbox schema announce:OrderEvents --dialect postgres`" in section()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trinbox",
            "schema",
            "announce:OrderEvents",
            "--dialect",
            "postgres",
        ],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown("readme_outbox_schema", "")


def test_the_refusal_quoted_is_the_class_statements() -> None:
    try:

        class OrderEvents(Outbox, table="order_events"):
            id: Annotated[int, Id(generated=True)]
            name: Annotated[str, Group()]
            retry_after: Annotated[datetime, RetryAfter(generated=True)]
            payload: Annotated[bytes, Payload()]

    except DeclarationError as refused:
        message = str(refused).replace(
            "class test_the_refusal_quoted_is_the_class_statements.<locals>.OrderEvents",
            "class OrderEvents",
        )
    assert f'*"{message}"*' in " ".join(section().split())
