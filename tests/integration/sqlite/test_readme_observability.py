"""README.md's "Observability" section stays true: its hook and its Prometheus metrics run as
written over a real SQLite queue and give what the section shows, and the log line it shows is
what a handler failure logs."""

from __future__ import annotations

import logging
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

import trinbox
from trinbox import (
    Attempt,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.testing import TrioClock, VirtualClock, settled

README = Path(trinbox.__file__).parents[1] / "README.md"


def section() -> str:
    text = README.read_text()
    return text[text.index("## Observability\n") : text.index("## Databases\n")]


def blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block but the queue depth gauges' (test_background.py runs it): (language,
    body)."""
    found = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.DOTALL)
    return [(lang, body) for lang, body in found if "QueueDepthGauges" not in body]


class Transcode(Inbox[Lease], table="video_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Video:
    url: str


def test_the_section_sits_right_before_databases() -> None:
    text = README.read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[headings.index("Observability") + 1] == "Databases"


async def test_the_hook_the_metrics_and_the_log_line_are_what_the_readme_shows(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    (python, hook), (_, tallied), (metrics_python, metrics), (_, scraped), (_, logged) = blocks(
        section()
    )
    assert python == metrics_python == "python"
    path = tmp_path / "videos.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE video_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, attempt INTEGER "
            "NOT NULL DEFAULT 1, locked_until TEXT, payload BLOB)"
        )
    namespace: dict[str, Any] = {}
    exec(compile(hook, "README.md", "exec"), namespace)
    exec(compile(metrics, "README.md", "exec"), namespace)  # on the hook's app
    app = namespace["app"]
    broker = SqlBroker.sqlite(f"sqlite:///{path}", poll_interval=0.05, clock=TrioClock())

    @subscriber(InboxQueue(Transcode, "videos"))
    async def transcode(video: Video, attempt: keys.Attempt) -> HandlerOutcome:
        if video.url == "a" and attempt == 1:
            raise RuntimeError("the encoder crashed")
        return HandlerOutcome.ack()

    app.include(broker, transcode)
    caplog.set_level(logging.WARNING, logger="trinbox")
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for url in ("a", "b", "c"):
            await broker.publish(Transcode, Video(url))
        with trio.fail_after(60):
            await settled(app, transcode, 4)
        app.shutdown()
    assert f"{sorted(namespace['tally'].outcomes.items())}\n" == tallied
    exposition = namespace["scrape"]()
    shown = [
        line
        for line in exposition.splitlines()
        if line.startswith(("trinbox_published_total", "trinbox_in_work"))
    ]
    assert "\n".join(shown) + "\n" == scraped
    formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")
    # Each record's first line (the handler's carries its traceback below it).
    assert "".join(f"{formatter.format(r).splitlines()[0]}\n" for r in caplog.records) == logged
