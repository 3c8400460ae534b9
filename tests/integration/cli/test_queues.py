"""``trinbox queues pause|resume`` (subprocesses, on every stand): the pause row it writes and
deletes, what ``trinbox inspect`` shows of it, and a ``trinbox run`` process obeying a pause
written by another process, and again after its restart."""

from __future__ import annotations

import json
import signal
import subprocess
from typing import Any

import pytest
import trio

from ..stands import SERVER_STANDS
from .kit import SERVICE, Running, Service, start_run

# The kit's service, its broker with a pause table.
PAUSED_SERVICE = (
    SERVICE.replace("URL = os.environ", "PAUSES = Pauses('app_pauses')\nURL = os.environ", 1)
    .replace("(URL)", "(URL, pauses=PAUSES)")
    .replace("from trinbox import (", "from trinbox import Pauses\nfrom trinbox import (", 1)
)
PAUSES_DDL = {
    "sqlite": "CREATE TABLE app_pauses (tbl TEXT NOT NULL, grp TEXT NOT NULL, "
    "paused_at TEXT NOT NULL, PRIMARY KEY (tbl, grp))",
    "postgres": "CREATE TABLE app_pauses (tbl TEXT NOT NULL, grp TEXT NOT NULL, "
    "paused_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (tbl, grp))",
    "mariadb": "CREATE TABLE app_pauses (tbl VARCHAR(191) NOT NULL, grp VARCHAR(191) NOT NULL, "
    "paused_at DATETIME(6) NOT NULL, PRIMARY KEY (tbl, grp))",
}


def paused_service(svc: Service) -> None:
    assert PAUSED_SERVICE.count("pauses=PAUSES") == 3
    (svc.dir / "psvc.py").write_text(PAUSED_SERVICE)
    svc.stand.script(PAUSES_DDL[svc.stand.name])


async def queues(svc: Service, action: str) -> subprocess.CompletedProcess[str]:
    """``trinbox queues psvc:app ACTION --queue emails``, off the Trio thread."""
    return await trio.to_thread.run_sync(
        svc.trinbox, "queues", "psvc:app", action, "--queue", "emails"
    )


def held(svc: Service) -> list[tuple[str, str]]:
    rows = svc.stand.rows("SELECT tbl, grp FROM app_pauses ORDER BY tbl, grp")
    return [(str(t), str(g)) for t, g in rows]


def test_pause_and_resume_write_the_pause_table_and_inspect_shows_it(svc: Service) -> None:
    paused_service(svc)
    done = svc.trinbox("queues", "psvc:app", "pause", "--queue", "emails")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "paused email_jobs:emails: serving processes stop claiming it within a poll interval\n"
    )
    assert held(svc) == [("email_jobs", "emails")]
    done = svc.trinbox("queues", "psvc:app", "pause", "--queue", "plain", "--table")
    assert done.returncode == 0, done.stderr
    assert held(svc) == [("email_jobs", "emails"), ("plain_jobs", "")]
    shown = svc.trinbox("inspect", "psvc:app")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("PAUSED TABLE")))
    assert lines[at].split() == ["PAUSED", "TABLE", "QUEUE", "SINCE"]
    assert [line.split()[:2] for line in lines[at + 1 :]] == [
        ["email_jobs", "emails"],
        ["plain_jobs", "plain"],
    ]
    as_json = svc.trinbox("inspect", "psvc:app", "--json")
    found: list[dict[str, Any]] = json.loads(as_json.stdout)
    assert [(q["queue"], q["paused"]) for q in found] == [("emails", True), ("plain", True)]
    done = svc.trinbox("queues", "psvc:app", "resume", "--queue", "emails")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("resumed email_jobs:emails: ")
    assert held(svc) == [("plain_jobs", "")]
    as_json = svc.trinbox("inspect", "psvc:app", "--json")
    found = json.loads(as_json.stdout)
    assert [(q["queue"], q["paused"]) for q in found] == [("emails", False), ("plain", True)]
    # Without a pause table: no "paused" key, no section; and queues pause refuses.
    assert "paused" not in json.loads(svc.trinbox("inspect", "svc:app", "--json").stdout)[0]
    refused = svc.trinbox("queues", "svc:app", "pause", "--queue", "emails")
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        "email_jobs:emails: a pause is kept in its broker's pause table, found a broker "
        "without one; pass pauses=Pauses('app_pauses') to its SqlBroker"
    )


async def test_a_serving_process_obeys_another_process_pause_and_after_a_restart(
    svc: Service,
) -> None:
    paused_service(svc)
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["psvc:app"])
        await running.wait_for("2 subscriptions serving")
        done = await queues(svc, "pause")
        assert done.returncode == 0, done.stderr
        await trio.sleep(2.5)  # past the serving process's next read of the pauses (1 s)
        svc.email("emails", payload=b"held")
        svc.plain(payload=b"p1")
        await running.wait_lines("plain p1")  # the other queue goes on
        await trio.sleep(2)  # forty of the email queue's polls
        assert b"email held" not in running.out
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    async with trio.open_nursery() as nursery:
        # A new process: the pause holds from its first claim.
        running = await start_run(nursery, svc, ["psvc:app"])
        await running.wait_for("2 subscriptions serving")
        await trio.sleep(2)
        assert b"email held" not in running.out
        done = await queues(svc, "resume")
        assert done.returncode == 0, done.stderr
        await running.wait_lines("email held")
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()


async def _printed(runs: list[Running], text: bytes, count: int) -> None:
    """Until the processes together printed ``text`` ``count`` times."""
    with trio.fail_after(60):
        while sum(r.out.count(text) for r in runs) < count:
            for r in runs:
                r.grew = trio.Event()
            async with trio.open_nursery() as nursery:

                async def grown(r: Running) -> None:
                    await r.grew.wait()
                    nursery.cancel_scope.cancel()

                for r in runs:
                    nursery.start_soon(grown, r)


@pytest.mark.parametrize("svc", SERVER_STANDS, indirect=True)  # one process serves a SQLite file
async def test_two_serving_processes_obey_one_pause(svc: Service) -> None:
    paused_service(svc)
    async with trio.open_nursery() as nursery:
        runs = [await start_run(nursery, svc, ["psvc:app"]) for _ in range(2)]
        for running in runs:
            await running.wait_for("2 subscriptions serving")
        done = await queues(svc, "pause")
        assert done.returncode == 0, done.stderr
        await trio.sleep(2.5)  # past each serving process's next read of the pauses (1 s)
        for n in range(6):
            svc.email("emails", payload=f"held {n}".encode())
        await trio.sleep(2)  # forty of each email queue's polls
        assert [r.out.count(b"email ") for r in runs] == [0, 0]
        done = await queues(svc, "resume")
        assert done.returncode == 0, done.stderr
        await _printed(runs, b"email held", 6)
        for running in runs:
            running.process.send_signal(signal.SIGINT)
        for running in runs:
            assert await running.ended() == 0, running.err.decode()
