"""``trinbox run`` serves an app's background tasks with it (``app.background``): a producer
publishes while the command serves and is cancelled at the signal's shutdown; a task's crash
ends the command with its traceback and status 1. SQLite: nothing here depends on the
database."""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from ..stands import fresh_stand
from .kit import service, start_run

PRODUCER = """
import os

import trio

from svc import Email, app, broker


@app.background
async def produce() -> None:
    if os.environ.get("PRODUCER_MODE") == "crash":
        raise RuntimeError("the producer broke")
    try:
        for n in range(3):
            await broker.publish(Email, f"produced {n}".encode(), name="emails")
        print("produced 3", flush=True)
        await trio.sleep_forever()
    finally:
        print("producer stopped", flush=True)
"""


async def test_run_serves_a_background_producer_and_cancels_it_at_shutdown(
    tmp_path: Path,
) -> None:
    with fresh_stand("sqlite", tmp_path) as stand:
        svc = service(stand, tmp_path)
        (svc.dir / "producing.py").write_text(PRODUCER)
        async with trio.open_nursery() as nursery:
            running = await start_run(nursery, svc, ["producing:app"])
            await running.wait_lines("produced 3", *(f"email produced {n}" for n in range(3)))
            assert b"producer stopped" not in running.out
            running.process.send_signal(signal.SIGINT)
            assert await running.ended() == 0, running.err.decode()
        assert running.out.decode().splitlines()[-1] == "producer stopped"
        assert stand.value("SELECT COUNT(*) FROM email_jobs WHERE processed_at IS NULL") == 0
    err = running.err.decode()
    assert "SIGINT received, shutting down" in err
    assert "Traceback" not in err


async def test_run_ends_with_the_traceback_of_a_task_that_crashed(tmp_path: Path) -> None:
    with fresh_stand("sqlite", tmp_path) as stand:
        svc = service(stand, tmp_path)
        (svc.dir / "producing.py").write_text(PRODUCER)
        async with trio.open_nursery() as nursery:
            running = await start_run(nursery, svc, ["producing:app"], PRODUCER_MODE="crash")
            assert await running.ended() == 1, running.err.decode()
    err = running.err.decode()
    assert "svc: the background task produce raised" in err
    assert err.rstrip().splitlines()[-1] == "RuntimeError: the producer broke"
    assert "svc: shut down; 0 locks released" in err  # gracefully, before the traceback
