"""Relays in real processes (``python -m tests.integration.outbox_relay_process``), on every
stand, sending to an HTTP server the test starts:

- a relay killed with SIGKILL while its sink waits for the receiver's answer loses no
  record: the record it was sending stays leased and unmarked, and once the lease ends the
  next relay sends it again (the one duplicate a death mid-send leaves) and every other one
  once;
- two relays serving one table at once send each record once between them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

import trinbox
from trinbox.schema import DialectName, ddl_script

from .http_sink import Receiver, receiver
from .matrix.kit import insert_rows
from .outbox_kit import OrderEvents, records
from .readme import child_env
from .stands import STANDS, Stand, StandName, fresh_stand
from .worker_kit import Worker

ROOT = Path(trinbox.__file__).resolve().parents[1]
DIALECT: dict[StandName, DialectName] = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "mariadb": "mysql",
}


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        found.script(ddl_script(OrderEvents, DIALECT[name]))
        yield found


def write_records(stand: Stand, count: int) -> list[int]:
    """``count`` due records, in one statement (so one due time: they go out by id)."""
    insert_rows(
        stand,
        "order_outbox",
        [
            {"name": "orders.placed", "payload": json.dumps({"order": n}).encode()}
            for n in range(count)
        ],
    )
    return [record_id for record_id, _, _ in records(stand)]


async def start_relay(nursery: trio.Nursery, stand: Stand, http: Receiver, mode: str) -> Worker:
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "tests.integration.outbox_relay_process",
            stand.name,
            stand.url,
            http.url,
            mode,
        ],
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    worker = Worker(process)
    nursery.start_soon(worker.read)
    nursery.start_soon(worker.drain)
    return worker


def sent_by(worker: Worker) -> list[int]:
    assert worker.process.returncode == 0, worker.err.decode()
    lines = worker.out.decode().splitlines()
    assert lines[0] == "ready", worker.out.decode()
    found: list[int] = json.loads(lines[-1])["sent"]
    return found


async def test_a_relay_killed_mid_send_loses_no_record(stand: Stand) -> None:
    ids = write_records(stand, 12)
    victim = ids[4]
    async with receiver() as http:
        http.hold = lambda body: int(body["id"]) == victim
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                first = await start_relay(nursery, stand, http, "forever")
                await http.wait_until(lambda r: bool(r.held))
                # Mid-send: the receiver has the record, the relay waits for its answer.
                os.kill(first.process.pid, signal.SIGKILL)
                assert await first.process.wait() == -signal.SIGKILL
                http.release()
                # Sent before the kill and marked; the one in flight leased, unmarked.
                marked = {i for i, _, done in records(stand) if done}
                assert marked == set(ids[:4])
                leased = (
                    "SELECT count(*) FROM order_outbox WHERE id = ? AND locked_until IS NOT NULL"
                )
                assert stand.value(leased, victim) == 1
                second = await start_relay(nursery, stand, http, "until-sent")
                await second.ready.wait()
                assert second.process.stdin is not None
                await second.process.stdin.send_all(b"go\n")
                await second.process.wait()
        assert sorted(sent_by(second)) == ids[4:]  # the victim again, once its lease ended
    counts = Counter(http.ids())
    assert sorted(counts) == ids
    assert {i: n for i, n in counts.items() if n != 1} == {victim: 2}
    again = [b for b in http.received if int(b["id"]) == victim]
    assert [b["attempt"] for b in again] == [1, 2]  # the death left its attempt counted
    assert all(done for _, _, done in records(stand))


async def test_two_relays_send_each_record_once_between_them(stand: Stand) -> None:
    ids = write_records(stand, 150)
    async with receiver() as http:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                relays = [await start_relay(nursery, stand, http, "until-sent") for _ in range(2)]
                for worker in relays:
                    await worker.ready.wait()
                for worker in relays:
                    assert worker.process.stdin is not None
                    await worker.process.stdin.send_all(b"go\n")
                for worker in relays:
                    await worker.process.wait()
        sent = [sent_by(worker) for worker in relays]
    assert sorted(sent[0] + sent[1]) == ids
    assert all(sent), "one relay sent nothing"
    assert sorted(http.ids()) == ids  # the receiver got each record once
    assert all(done for _, _, done in records(stand))
