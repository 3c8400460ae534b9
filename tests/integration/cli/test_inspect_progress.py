"""``trinbox inspect`` shows the progress a handler of another process reported (issue 21,
item 5), on every stand: a ``trinbox run`` process serves a lease table with a Progress field,
its handler reports 0.25 and waits; the lease keeper's next extension writes it, and
``trinbox inspect`` (a third process) lists the row with 25%, in text and ``--json``."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from .. import readme
from ..stands import STANDS, Stand, fresh_stand
from .kit import Service, start_run

SERVICE = """
import os
from datetime import datetime
from typing import Annotated

import trio

from trinbox import (
    App, AppInfo, Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, Progress, SqlBroker,
    keys, subscriber,
)

URL = os.environ["SVC_URL"]
KIND = os.environ["SVC_KIND"]


class RenderJob(Inbox[Lease], table="render_jobs"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    done: Annotated[float | None, Progress()] = None
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(RenderJob, "renders"))
async def render(body: bytes, progress: keys.Progress) -> None:
    progress.set(0.25)
    print("reported", flush=True)
    await trio.sleep_forever()


broker = {"sqlite": SqlBroker.sqlite, "postgres": SqlBroker.postgres, "mysql": SqlBroker.mysql}[
    KIND
](URL, lease=1.5, poll_interval=0.1)
app = App(AppInfo("svc"), grace=0.1)
app.include(broker, render)


async def made() -> None:
    await broker.create_tables(RenderJob)
    await broker.publish(RenderJob, b"{}", id=7)


app.on_startup(made)
"""


@pytest.fixture(params=STANDS)
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    with fresh_stand(request.param, tmp_path) as stand:
        work = tmp_path / "work"
        work.mkdir()
        (work / "svc.py").write_text(SERVICE)
        yield Service(stand, work)


def shown(svc: Service) -> list[str]:
    done = svc.trinbox("inspect", "svc:app")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


async def test_inspect_shows_the_progress_another_process_reported(svc: Service) -> None:
    stand: Stand = svc.stand
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app"])
        await running.wait_lines("reported")
        with trio.fail_after(30):
            # The keeper writes within a third of the lease (0.5 s): read until it has.
            while not stand.value("SELECT count(*) FROM render_jobs WHERE done IS NOT NULL"):  # noqa: ASYNC110
                await trio.sleep(0.1)
        text = shown(svc)
        listed = json.loads(svc.trinbox("inspect", "svc:app", "--json").stdout)
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    assert text == readme.shown("readme_progress_inspect").splitlines()  # as the README shows
    assert listed[0]["progress"] == [{"id": 7, "progress": 0.25}]
    assert listed[0]["in_work"] == 1
