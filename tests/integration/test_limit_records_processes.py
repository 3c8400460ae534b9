"""Limit records across real processes, on every stand: a subprocess serves ``limit_jobs``
with ``.limit(concurrency=3)``; this test's app, with ``.limit(concurrency=4)``, logs the
warning naming both, as README "Limits per key" shows it (the brokers on the system clock:
the records are wall-clock times)."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest
import trio

from trinbox import InboxQueue, SqlBroker, subscriber

from .readme import ROOT, child_env, shown
from .serving import make_app, serving
from .stands import Stand
from .test_limit_records import MESSAGE, RECORDS, Job, stand, warned

__all__ = ["stand"]  # the fixture, on every stand


@subscriber(InboxQueue(Job, "jobs").limit(concurrency=4))
async def pull(message: str) -> None:
    del message


async def test_a_process_with_other_limits_than_a_running_one_is_warned(
    stand: Stand, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.app")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.integration.limit_records_process", stand.name, stand.url],
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        with trio.fail_after(60):
            out = b""
            while b"serving\n" not in out:
                chunk = await process.stdout.receive_some()
                assert chunk, f"the other process ended: {out!r}"
                out += chunk
            maker: Any = {"sqlite": SqlBroker.sqlite, "postgres": SqlBroker.postgres}.get(
                stand.name, SqlBroker.mysql
            )
            broker: SqlBroker[Any] = maker(stand.url, poll_interval=1.0)
            broker.use_limit_records(RECORDS)

            app = make_app()
            app.include(broker, pull)
            async with serving(app):
                pass
    finally:
        await process.stdin.send_all(b"stop\n")
        with trio.fail_after(60):
            assert await process.wait() == 0
    assert warned(caplog) == [MESSAGE]
    (logged,) = [r.getMessage() for r in caplog.records if "another process" in r.getMessage()]
    assert logged == " ".join(shown("readme_limit_records_output").splitlines())
