"""A limit's slot freed in another process (``InboxQueue.limit``, PostgreSQL with
``listen_notify``): the process whose row of a key finished announces it on the table's channel
(``SlotAnnouncer``), so a claim elsewhere that found the key at its limit takes the freed slot
at once, not at its next poll (an hour here). Without LISTEN the claims poll.

Two real processes: the holder (limit_slot_process.py) and this one. Real clock: a
notification arrives on a socket while every task waits, which a virtual clock would skip past.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from trinbox import SqlBroker, subscriber
from trinbox.testing import idle

from ..matrix.test_limit_processes import read_lines
from ..matrix.test_processes import ROOT
from ..serving import make_app, serving
from ..stands import PostgresStand, fresh_stand
from .limit_slot_process import HOUR, SLOT_JOBS, Job, queue

# Far less than the poll interval (an hour): only a notification brings the row this soon.
SEEN_WITHIN = 10.0


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        stand.script(SLOT_JOBS)
        yield stand


async def test_a_slot_freed_in_another_process_is_claimed_at_once(pg: PostgresStand) -> None:
    pg.execute(
        "INSERT INTO slot_jobs (tenant, payload) VALUES ('hot', ?), ('hot', ?)",
        b'{"n": 0}',
        b'{"n": 1}',
    )
    command = [sys.executable, "-m", "tests.integration.postgres.limit_slot_process", pg.url]
    handled: list[int] = []
    arrived = trio.Event()

    @subscriber(queue())
    async def handle(job: Job) -> None:
        handled.append(job.n)
        arrived.set()

    broker = SqlBroker.postgres(pg.url, listen_notify=True, poll_interval=HOUR)
    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(60):
        holder = await trio.lowlevel.open_process(
            command,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert holder.stdin is not None and holder.stdout is not None
            assert await read_lines(holder.stdout, 1) == ["holding 0"]
            async with serving(app):
                # The first claim here found the tenant at its limit (the holder's row 0):
                # nothing, and the claim loop waits its hour.
                await idle(app, handle)
                assert handled == []
                await holder.stdin.send_all(b"go\n")
                started = trio.current_time()
                with trio.fail_after(SEEN_WITHIN):
                    await arrived.wait()
                assert trio.current_time() - started < SEEN_WITHIN
                assert handled == [1]
            # This process announced its own finished row once, as it stopped at the latest.
            assert app.statistics(handle).freed_slot_notifies == 1
            assert await read_lines(holder.stdout, 1) == ["done"]
            assert await holder.wait() == 0
        finally:
            if holder.returncode is None:
                holder.kill()
                await holder.wait()
    assert pg.rows("SELECT id FROM slot_jobs") == []
