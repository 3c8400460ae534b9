"""Dedup keys across OS processes: two publisher processes racing every key, from several tasks
each, write one row per key and agree on its id (unique_process.py; through PgBouncer too); a
worker killed with SIGKILL while its handler holds the row leaves the key held, the row
unfinished, until the next claim settles it (unique_worker_process.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import trio

from trinbox import InboxQueue, subscriber
from trinbox.schema import DialectName, ddl
from trinbox.testing import settled

from .. import worker_kit
from ..postgres.test_pgbouncer import PGBOUNCER_DSN
from ..serving import make_app, serving
from ..stands import PostgresStand, fresh_stand
from .conftest import Case
from .kit import cells
from .test_unique import PLAIN, PLAINS, Sync

ROOT = Path(__file__).resolve().parents[3]
KEYS = 20
TASKS = 4
DIALECTS: dict[str, DialectName] = {"postgres": "postgres", "mariadb": "mysql", "sqlite": "sqlite"}


def _create(stand: str, script: Callable[[str], None], form: str = "lease") -> None:
    for statement in ddl(PLAINS[form], DIALECTS[stand]):
        script(statement)


async def _race(stand: str, url: str) -> list[list[list[object]]]:
    """Start two publisher processes, let them race together, and return what each got."""
    command = [
        sys.executable,
        "-m",
        "tests.integration.matrix.unique_process",
        stand,
        url,
        str(KEYS),
        str(TASKS),
    ]
    publishers: list[worker_kit.Worker] = []
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                process = await trio.lowlevel.open_process(
                    command,
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                publisher = worker_kit.Worker(process)
                publishers.append(publisher)
                nursery.start_soon(publisher.read)
                nursery.start_soon(publisher.drain)
            for publisher in publishers:
                await publisher.ready.wait()
            for publisher in publishers:
                assert publisher.process.stdin is not None
                await publisher.process.stdin.send_all(b"go\n")
            for publisher in publishers:
                await publisher.process.wait()
    found: list[list[list[object]]] = []
    for publisher in publishers:
        assert publisher.process.returncode == 0, publisher.err.decode()
        lines = publisher.out.decode().splitlines()
        assert lines[0] == "ready", publisher.out.decode()
        found.append(json.loads(lines[-1]))
    return found


def _one_row_per_key(found: list[list[list[object]]], rows: list[tuple[object, ...]]) -> None:
    """Every publish of a key got the one row that holds it, one publish of each wrote it, and
    the table holds that row alone."""
    ids: dict[str, set[object]] = defaultdict(set)
    written: dict[str, int] = defaultdict(int)
    for results in found:
        assert len(results) == KEYS * TASKS
        for key, ident, duplicate in results:
            ids[str(key)].add(ident)
            written[str(key)] += 0 if duplicate else 1
    assert {key: len(seen) for key, seen in ids.items()} == {f"race-{n}": 1 for n in range(KEYS)}
    assert written == {f"race-{n}": 1 for n in range(KEYS)}
    assert sorted((str(key), ident) for ident, key in rows) == sorted(
        (key, next(iter(seen))) for key, seen in ids.items()
    )


@cells(forms=("lease",))
async def test_two_publisher_processes_racing_each_key_write_one_row_per_key(
    case: Case,
) -> None:
    _create(case.name, case.stand.script)
    found = await _race(case.name, case.stand.url)
    _one_row_per_key(found, case.stand.rows(f"SELECT id, dedup FROM {PLAIN}"))


async def test_two_publisher_processes_racing_through_pgbouncer(tmp_path: Path) -> None:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        _create("postgres", stand.script)
        database = urlsplit(stand.url).path
        url = urlunsplit(urlsplit(PGBOUNCER_DSN)._replace(path=database))
        found = await _race("pgbouncer", url)
        _one_row_per_key(found, stand.rows(f"SELECT id, dedup FROM {PLAIN}"))


@cells(leave_out=(("sqlite", "advisory"),))
async def test_a_worker_killed_holding_the_row_keeps_its_key_held_until_the_next_claim(
    case: Case,
) -> None:
    # (SQLite serves the advisory form from one process per database file.)
    _create(case.name, case.stand.script, case.form)
    row = PLAINS[case.form]
    broker = case.stand.broker()
    app = make_app()
    app.add_broker(broker)
    async with serving(app):
        first = await broker.publish(row, Sync("a"), unique="k")
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "tests.integration.matrix.unique_worker_process",
            case.name,
            case.form,
            case.stand.url,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    holder = worker_kit.Worker(process)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder.read)
            nursery.start_soon(holder.drain)
            await holder.ready.wait()
            assert holder.out.decode().splitlines()[0] == f"holding {first.id}", (
                holder.out.decode() + holder.err.decode()
            )
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
    assert process.returncode == -signal.SIGKILL

    handled: list[str] = []

    @subscriber(InboxQueue(row, "plain").poll_interval(0.05))
    async def handle(sync: Sync) -> None:
        handled.append(sync.user)

    # Its holder died mid-delivery: the row is unfinished and holds the key.
    app = make_app()
    app.add_broker(broker)
    async with serving(app):
        held = await broker.publish(row, Sync("b"), unique="k")
    assert (held.id, held.duplicate) == (first.id, True)
    # The next claim (past the dead holder's lease, in the lease form) settles it: free again.
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(20):
            await settled(app, handle, 1)
        after = await broker.publish(row, Sync("c"), unique="k")
        assert not after.duplicate
        with trio.fail_after(20):
            await settled(app, handle, 2)
    assert handled == ["a", "c"]
