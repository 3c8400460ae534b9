"""README "Running, shutdown, testing": the process that only publishes (the block run as a
script on a fresh PostgreSQL database), and what it says of startup and shutdown hooks."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import trio

from trinbox import Advisory, App, AppInfo, Attempt, Id, Inbox, Payload, SqlBroker
from trinbox.errors import Closed, ConnectError
from trinbox.testing import TrioClock, VirtualClock
from trinbox.typing import Sqlite

from .readme import block, child_env
from .stands import fresh_stand

# The first example's row class and message, as the publisher imports them.
TRANSCODER = """
from dataclasses import dataclass
from typing import Annotated

from trinbox import Advisory, Attempt, Id, Inbox, Payload


class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


@dataclass
class Video:
    url: str
"""

VIDEO_JOBS = """CREATE TABLE video_jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    payload BYTEA NOT NULL
)"""


def test_the_publisher_writes_its_rows_and_exits(tmp_path: Path) -> None:
    (tmp_path / "transcoder.py").write_text(TRANSCODER)
    (tmp_path / "enqueue.py").write_text(block("readme_publisher"))
    videos = ["https://example.com/a.mp4", "https://example.com/b.mp4"]
    with fresh_stand("postgres", tmp_path) as stand:
        stand.script(VIDEO_JOBS)
        done = subprocess.run(
            [sys.executable, "enqueue.py", stand.url, *videos],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        rows = stand.rows("SELECT channel, attempt, payload FROM video_jobs ORDER BY id")
        # Every session of the publisher ended with it.
        sessions = stand.value(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
    assert [
        (channel, attempt, json.loads(bytes(payload))) for channel, attempt, payload in rows
    ] == [("uploads", 1, {"url": url}) for url in videos]
    assert sessions == 0


class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


async def test_a_broker_no_serving_app_opened_refuses_to_publish(
    tmp_path: Path, clock: VirtualClock
) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db", clock=TrioClock())
    with pytest.raises(Closed, match="the broker is not open: its pool opens when the app serves"):
        await broker.publish(Transcode, {"url": "u"}, channel="c")


# -- hooks ---------------------------------------------------------------------------------------


def _app(tmp_path: Path) -> tuple[App, SqlBroker[Sqlite]]:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db", clock=TrioClock())
    app = App(AppInfo("hooks"))
    app.add_broker(broker)
    return app, broker


async def test_hooks_run_in_order_with_the_pool_open(tmp_path: Path, clock: VirtualClock) -> None:
    app, broker = _app(tmp_path)
    seen: list[object] = []

    @app.on_startup
    async def first() -> None:
        seen.append(("startup 1", await broker.database.fetchval("SELECT 1")))

    async def second() -> None:
        seen.append(("startup 2", await broker.database.fetchval("SELECT 2")))

    app.on_startup(second)  # a plain call does the same

    @app.on_shutdown
    async def down() -> None:
        seen.append(("shutdown 1", await broker.database.fetchval("SELECT 3")))

    @app.on_shutdown
    async def down_again() -> None:
        seen.append(("shutdown 2", await broker.database.fetchval("SELECT 4")))

    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        seen.append("serving")
        app.shutdown()
    assert seen == [
        ("startup 1", 1),
        ("startup 2", 2),
        "serving",
        ("shutdown 1", 3),
        ("shutdown 2", 4),
    ]


async def test_a_failing_startup_hook_ends_serve_as_itself_and_shutdown_hooks_run(
    tmp_path: Path, clock: VirtualClock
) -> None:
    app, broker = _app(tmp_path)
    ran: list[str] = []

    @app.on_startup
    async def boom() -> None:
        raise RuntimeError("no schema")

    @app.on_shutdown
    async def down() -> None:
        ran.append(f"shutdown {await broker.database.fetchval('SELECT 1')}")

    with pytest.raises(RuntimeError, match="no schema"):
        await app.serve()
    assert ran == ["shutdown 1"]


async def test_after_a_connect_error_shutdown_hooks_run_without_the_pool(
    clock: VirtualClock,
) -> None:
    broker = SqlBroker.postgres("postgresql://postgres@127.0.0.1:1/none", clock=TrioClock())
    app = App(AppInfo("hooks"))
    app.add_broker(broker)
    errors: list[BaseException] = []

    @app.on_shutdown
    async def down() -> None:
        try:
            await broker.database.fetchval("SELECT 1")
        except Closed as exc:
            errors.append(exc)

    with pytest.raises(ConnectError):
        await app.serve()
    assert len(errors) == 1


async def test_a_shutdown_hook_that_raises_or_overruns_is_logged_and_the_next_runs(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = _app(tmp_path)
    ran: list[tuple[str, float]] = []

    @app.on_shutdown
    async def raises() -> None:
        raise RuntimeError("hook broke")

    @app.on_shutdown
    async def overruns() -> None:
        await trio.sleep(3600)

    @app.on_shutdown
    async def last() -> None:
        ran.append(("last", trio.current_time()))

    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        start = trio.current_time()
        app.shutdown()
    assert app.report is not None  # serve returned its report
    assert ran == [("last", start + 10.0)]  # after the overrun's bound, HOOK
    failed = [r for r in caplog.records if r.getMessage() == "hooks: a shutdown hook failed"]
    assert [(r.levelno, r.exc_info is not None) for r in failed] == [(logging.ERROR, True)]
    cut = [
        r for r in caplog.records if r.getMessage() == "hooks: a shutdown hook ran over 10.0 s; cut"
    ]
    assert [r.levelno for r in cut] == [logging.WARNING]
