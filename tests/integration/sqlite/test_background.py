"""``app.background(fn)``: a service's own tasks in ``serve``'s nursery (on SQLite; nothing
in it depends on the database). They start once the subscriptions serve, are cancelled once
the subscriptions have stopped (after the handlers' grace, before the shutdown hooks), and a
crash stops the app gracefully and ends ``serve`` with the task's exception."""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import Advisory, App, AppInfo, Attempt, Id, Inbox, InboxQueue, Payload, subscriber
from trinbox.testing import VirtualClock, settled

from ..readme import block, child_env
from ..serving import serving
from .harness import Db
from .tables2 import JOBS, LeasedJob


@dataclass
class Job:
    n: int


def _app(grace: float = 30.0) -> App:
    return App(AppInfo("tasks"), grace=grace)


async def test_a_task_runs_from_start_to_after_the_handlers_grace(
    db: Db, clock: VirtualClock
) -> None:
    """A producer publishes while the app serves; at shutdown a handler in work finishes in
    its grace while the task still runs; then the task is cancelled, before the hooks."""
    db.script(JOBS)
    broker = db.broker()
    app = _app()
    seen: list[str] = []
    handled: list[int] = []
    finish = trio.Event()
    both_in = trio.Event()

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def work(job: Job) -> None:
        handled.append(job.n)
        if len(handled) == 2:
            both_in.set()
        if job.n == 2:
            await finish.wait()  # in work when the shutdown comes
            seen.append("handler finished")

    @app.background
    async def produce(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        seen.append("task started")
        await broker.publish(LeasedJob, Job(1))
        task_status.started()
        try:
            await broker.publish(LeasedJob, Job(2))
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append("task cancelled")
            raise

    @app.on_shutdown
    async def note() -> None:
        seen.append("shutdown hook")

    app.include(broker, work)
    with trio.fail_after(600):
        await _serve_then_shut_down(app, seen, both_in, finish)
    assert seen == ["task started", "handler finished", "task cancelled", "shutdown hook"]
    assert app.report is not None and app.report.locks_released == 0
    assert db.value("SELECT COUNT(*) FROM jobs") == 0


async def _serve_then_shut_down(
    app: App, seen: list[str], both_in: trio.Event, finish: trio.Event
) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        # serve reported started after the task did.
        assert seen == ["task started"]
        await both_in.wait()
        app.shutdown()
        await trio.sleep(10)  # in the grace: the task still runs beside the handler
        assert seen == ["task started"]
        finish.set()


async def test_a_task_without_task_status_starts_once_serving(db: Db, clock: VirtualClock) -> None:
    db.script(JOBS)
    broker = db.broker()
    app = _app()
    handled: list[int] = []

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def work(job: Job) -> None:
        handled.append(job.n)

    async def tick(every: float) -> None:
        for n in range(3):
            await broker.publish(LeasedJob, Job(n))
            await trio.sleep(every)
        # Returning ends the task only: the app serves on.

    app.include(broker, work)
    app.background(functools.partial(tick, 60.0))
    async with serving(app):
        with trio.fail_after(600):
            await settled(app, work, 3)
        await trio.sleep(120)
        assert app.statistics(work).serving
    assert handled == [0, 1, 2]


async def test_a_task_that_raises_stops_the_app_gracefully_and_serve_raises_it(
    db: Db, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    db.script(JOBS)
    broker = db.broker()
    app = _app()
    in_work = trio.Event()
    finished: list[int] = []

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def work(job: Job) -> None:
        in_work.set()
        await trio.sleep(5)  # within the grace: it finishes and its row is acked
        finished.append(job.n)

    @app.background
    async def broken() -> None:
        await broker.publish(LeasedJob, Job(7))
        await in_work.wait()
        raise ValueError("the producer broke")

    app.include(broker, work)
    with trio.fail_after(600), pytest.raises(ValueError, match="the producer broke"):
        await app.serve()
    assert finished == [7]
    assert db.value("SELECT COUNT(*) FROM jobs") == 0
    (record,) = [r for r in caplog.records if "background task" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "tasks: the background task" in record.getMessage()
    assert "broken raised" in record.getMessage()


async def test_a_task_that_raises_before_it_started_ends_serve_with_it(
    db: Db, clock: VirtualClock
) -> None:
    db.script(JOBS)
    app = _app()
    app.add_broker(db.broker())
    closed: list[bool] = []

    @app.background
    async def cannot_start(*, task_status: trio.TaskStatus[None]) -> None:
        raise OSError("no metrics port")

    @app.on_shutdown
    async def note() -> None:
        closed.append(True)

    with trio.fail_after(600), pytest.raises(OSError, match="no metrics port"):
        await app.serve()
    assert closed == [True]  # the shutdown ran as for any failed start


async def test_a_task_status_task_that_returns_without_starting_is_named(
    db: Db, clock: VirtualClock
) -> None:
    app = _app()
    app.add_broker(db.broker())

    @app.background
    async def forgets(*, task_status: trio.TaskStatus[None]) -> None:
        return

    with trio.fail_after(600), pytest.raises(RuntimeError) as raised:
        await app.serve()
    assert "the background task " in str(raised.value)
    assert "forgets takes task_status" in str(raised.value)
    assert "returned without calling it" in str(raised.value)


async def test_a_cancel_of_serve_cancels_the_task(db: Db, clock: VirtualClock) -> None:
    app = _app()
    app.add_broker(db.broker())
    ended: list[str] = []

    @app.background
    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            ended.append("cancelled")

    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        nursery.cancel_scope.cancel()
    assert ended == ["cancelled"]


def test_a_task_is_checked_where_it_is_added() -> None:
    app = _app()

    def plain() -> None: ...

    async def needs(interval: float) -> None: ...

    with pytest.raises(TypeError, match="a background task is an async function, found "):
        app.background(plain)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="requiring interval; bind them first"):
        app.background(needs)
    app.background(functools.partial(needs, 1.0))  # bound: accepted


# -- the README's blocks -------------------------------------------------------------------------

VIDEO_JOBS = """
CREATE TABLE video_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1, payload BLOB NOT NULL);
"""


class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    """The README's first example's row class."""

    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


@dataclass
class Video:
    url: str


async def test_the_readme_producer_publishes_every_minute_until_shutdown(
    db: Db, clock: VirtualClock
) -> None:
    db.script(VIDEO_JOBS)
    broker = db.broker()
    app = _app()
    encoded: list[tuple[str, float]] = []
    uploads = iter([["a.mp4", "b.mp4"], [], ["c.mp4"]])

    async def new_uploads() -> list[str]:
        return next(uploads, [])

    @subscriber(InboxQueue(Transcode, "uploads"))
    async def transcode(video: Video) -> None:
        encoded.append((video.url, trio.current_time()))

    app.include(broker, transcode)
    namespace: dict[str, Any] = {
        "app": app,
        "broker": broker,
        "Transcode": Transcode,
        "Video": Video,
        "new_uploads": new_uploads,
        "trio": trio,
    }
    exec(compile(block("readme_background"), "README.md", "exec"), namespace)
    task = namespace["enqueue_uploads"]
    assert app._tasks[0].fn is task
    with trio.fail_after(3600):
        async with serving(app):
            start = trio.current_time()
            await settled(app, transcode, 3)
            await trio.sleep(600)  # nothing more to publish: the loop goes on, idle
    assert [url for url, _ in encoded] == ["a.mp4", "b.mp4", "c.mp4"]
    # c.mp4 came with the third round, two minutes after the first.
    assert encoded[2][1] - start == pytest.approx(120, abs=1)
    assert db.value("SELECT COUNT(*) FROM video_jobs") == 0


GAUGES = """
import sys

import trio
from prometheus_client import generate_latest

from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber
from jobs import Transcode, Video

broker = SqlBroker.sqlite(sys.argv[1])
app = App(AppInfo("gauges"))


@subscriber(InboxQueue(Transcode, "uploads"))
async def transcode(video: Video) -> None:
    await trio.sleep_forever()


app.include(broker, transcode)
exec(open("block.py").read())


async def main() -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        print(generate_latest().decode(), flush=True)
        app.shutdown()


trio.run(main)
"""

JOBS_MODULE = """
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


def test_the_readme_gauges_are_read_once_serve_has_started(db: Db, tmp_path: Path) -> None:
    """In a process of its own: the block registers on prometheus_client's global registry."""
    db.script(VIDEO_JOBS)
    db.script("INSERT INTO video_jobs (channel, payload) VALUES ('c1', X'7B7D'), ('c2', X'7B7D')")
    work = tmp_path / "gauges"
    work.mkdir()
    (work / "jobs.py").write_text(JOBS_MODULE)
    (work / "block.py").write_text(block("readme_gauges"))
    (work / "main.py").write_text(GAUGES)
    done = subprocess.run(
        [sys.executable, "main.py", db.url],
        cwd=work,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    labels = '{queue="uploads",table="video_jobs"}'
    # Both rows were due when serve started; the first read ran before it reported started
    # (the handler may have claimed some since: due and in work add up).
    lines = dict(
        line.rsplit(" ", 1)
        for line in done.stdout.splitlines()
        if line.startswith("trinbox_queue_") and labels in line
    )
    assert float(lines[f"trinbox_queue_due{labels}"]) == 2.0
    assert float(lines[f"trinbox_queue_scheduled{labels}"]) == 0.0
