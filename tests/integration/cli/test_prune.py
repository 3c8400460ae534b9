"""``trinbox prune MODULE:APP [--dry-run]`` as a subprocess, on every stand with its default
clock (the database's on PostgreSQL and MariaDB, the system's on SQLite): one retention
pass now deletes the finished rows and dead letters older than the mount's ages and leaves
the rest — a row finished a minute ago, an unfinished row however old, a dead letter that
died yesterday; ``--dry-run`` counts the same rows and deletes none."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from trinbox import CancelRequests
from trinbox.schema import ddl

from ..stands import STANDS, Stand, fresh_stand
from .kit import Service, stored_time

SERVICE = """
import os
from datetime import datetime, timedelta
from typing import Annotated

from trinbox import (
    App, AppInfo, Attempt, DeadLetteredAt, Group, Id, Inbox, InboxQueue, Lease, LockedUntil,
    OriginGroup, Payload, ProcessedAt, RetryAfter, SqlBroker, subscriber,
)

URL = os.environ["SVC_URL"]
KIND = os.environ["SVC_KIND"]


class Kept(Inbox[Lease], table="kept_jobs"):
    id: Annotated[int, Id()]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt()]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(Kept, "jobs"))
async def work(body: bytes) -> None:
    pass


@subscriber(InboxQueue(Kept, "other"))
async def other(body: bytes) -> None:
    pass


broker = {"sqlite": SqlBroker.sqlite, "postgres": SqlBroker.postgres, "mysql": SqlBroker.mysql}[
    KIND
](URL)
app = App(AppInfo("svc"))
app.include(broker, work).max_attempts(3).dead_letter("jobs.dead").retain(
    processed=timedelta(days=1), dead_letters=timedelta(days=7)
)
app.include(broker, other)
"""

DDL = {
    "sqlite": """
        CREATE TABLE kept_jobs (
            id INTEGER PRIMARY KEY, queue TEXT NOT NULL, origin TEXT,
            attempt INTEGER NOT NULL DEFAULT 1, retry_after TEXT NOT NULL, locked_until TEXT,
            processed_at TEXT, dead_at TEXT, payload BLOB
        )
    """,
    "postgres": """
        CREATE TABLE kept_jobs (
            id BIGINT PRIMARY KEY, queue TEXT NOT NULL, origin TEXT,
            attempt INT NOT NULL DEFAULT 1, retry_after TIMESTAMPTZ NOT NULL,
            locked_until TIMESTAMPTZ, processed_at TIMESTAMPTZ, dead_at TIMESTAMPTZ,
            payload BYTEA
        )
    """,
    "mariadb": """
        CREATE TABLE kept_jobs (
            id BIGINT PRIMARY KEY, queue VARCHAR(191) NOT NULL, origin VARCHAR(191),
            attempt INT NOT NULL DEFAULT 1, retry_after DATETIME(6) NOT NULL,
            locked_until DATETIME, processed_at DATETIME(6), dead_at DATETIME(6),
            payload LONGBLOB
        ) ENGINE=InnoDB
    """,
}

DAY = 86400.0


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    with fresh_stand(request.param, tmp_path) as found:
        yield found


def kept(svc: Service) -> list[int]:
    return sorted(int(r[0]) for r in svc.stand.rows("SELECT id FROM kept_jobs"))


def setup(stand: Stand, tmp_path: Path) -> Service:
    stand.script(DDL[stand.name])
    work = tmp_path / "work"
    work.mkdir()
    (work / "svc.py").write_text(SERVICE)
    svc = Service(stand, work)

    def at(seconds: float | None) -> object:
        return (
            None if seconds is None else stored_time(stand, svc.now() - timedelta(seconds=seconds))
        )

    rows = [
        # id, group, origin, finished ago, died ago
        (1, "jobs", None, 2 * DAY, None),  # finished two days ago: goes
        (2, "jobs", None, 60.0, None),  # finished a minute ago: stays
        (3, "jobs", None, None, None),  # unfinished, due three days ago: stays
        (4, "jobs.dead", "jobs", None, 8 * DAY),  # dead eight days: goes
        (5, "jobs.dead", "jobs", None, DAY),  # dead a day: stays
        (6, "other", None, 3 * DAY, None),  # finished, but of the same table: goes
    ]
    for n, group, origin, done, died in rows:
        stand.execute(
            "INSERT INTO kept_jobs (id, queue, origin, attempt, retry_after, processed_at, "
            "dead_at, payload) VALUES (?, ?, ?, 1, ?, ?, ?, ?)",
            n,
            group,
            origin,
            at(3 * DAY),
            at(done),
            at(died),
            b"{}",
        )
    return svc


def test_prune_deletes_what_is_past_its_age_and_dry_run_deletes_nothing(
    stand: Stand, tmp_path: Path
) -> None:
    svc = setup(stand, tmp_path)
    dry = svc.trinbox("prune", "svc:app", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "queue  finished rows  dead letters",
        "jobs               2             1",
        "svc: 3 rows to delete (--dry-run: none deleted)",
    ]
    assert kept(svc) == [1, 2, 3, 4, 5, 6]
    done = svc.trinbox("prune", "svc:app")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "queue  finished rows  dead letters",
        "jobs               2             1",
        "svc: 3 rows deleted",
    ]
    assert kept(svc) == [2, 3, 5]
    again = svc.trinbox("prune", "svc:app")
    assert again.stdout.splitlines()[-1] == "svc: 0 rows deleted"
    assert kept(svc) == [2, 3, 5]


def test_prune_names_a_table_that_cannot_tell_an_age(stand: Stand, tmp_path: Path) -> None:
    svc = setup(stand, tmp_path)
    (svc.dir / "svc.py").write_text(
        SERVICE.replace("    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None\n", "")
    )
    found = svc.trinbox("prune", "svc:app")
    assert found.returncode == 1
    assert "found no DeadLetteredAt field on kept_jobs" in found.stderr
    assert kept(svc) == [1, 2, 3, 4, 5, 6]


def test_two_processes_pruning_at_once_delete_each_row_once(stand: Stand, tmp_path: Path) -> None:
    """Two ``trinbox prune`` processes over the same backlog (three batches of finished rows
    and the unfinished ones among them) both end well, and together delete each finished row
    once: PostgreSQL's batches skip the rows the other holds, MySQL's and SQLite's wait for
    them and find them gone."""
    svc = setup(stand, tmp_path)
    old = stored_time(stand, svc.now() - timedelta(days=3))
    due = stored_time(stand, svc.now() - timedelta(days=3))
    backlog = 3000
    values = ", ".join(
        f"({100 + n}, 'jobs', 1, ?, {'?' if n % 100 else 'NULL'}, NULL)" for n in range(backlog)
    )
    params: list[object] = []
    for n in range(backlog):
        params.append(due)
        if n % 100:
            params.append(old)
    stand.execute(
        "INSERT INTO kept_jobs (id, queue, attempt, retry_after, processed_at, payload) "
        f"VALUES {values}",
        *params,
    )
    unfinished = backlog // 100
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "trinbox", "prune", "svc:app"],
            cwd=svc.dir,
            env=svc.environ(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outs]
    deleted = [int(out.splitlines()[-1].split()[1]) for out, _ in outs]
    # Row 1 (finished two days ago), 4 (dead eight days), 6 (another queue's, finished) too.
    assert sum(deleted) == backlog - unfinished + 3
    assert len(kept(svc)) == 3 + unfinished


def test_prune_deletes_the_lapsed_cancel_requests(stand: Stand, tmp_path: Path) -> None:
    """The broker's ``CancelRequests`` table: a request past its ``expire_after`` goes, one
    still live stays (its watch may not have read it yet)."""
    svc = setup(stand, tmp_path)
    (svc.dir / "svc.py").write_text(
        SERVICE.replace("SqlBroker, subscriber,", "SqlBroker, subscriber, CancelRequests,")
        + 'broker.use_cancel_requests(CancelRequests("svc_cancels"))\n'
    )
    dialect = "mysql" if stand.name == "mariadb" else stand.name
    (create,) = ddl(CancelRequests("svc_cancels"), dialect)
    stand.script(create)
    for row_id, expires in (("1", -60.0), ("2", -1.0), ("3", 3600.0)):
        stand.execute(
            "INSERT INTO svc_cancels (queue_table, row_id, expires_at) VALUES (?, ?, ?)",
            "kept_jobs",
            row_id,
            svc.time(expires),
        )
    dry = svc.trinbox("prune", "svc:app", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[-2:] == [
        "cancel requests in svc_cancels: 2 lapsed",
        "svc: 5 rows to delete (--dry-run: none deleted)",
    ]
    done = svc.trinbox("prune", "svc:app")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        "cancel requests in svc_cancels: 2 lapsed",
        "svc: 5 rows deleted",
    ]
    assert [r[0] for r in stand.rows("SELECT row_id FROM svc_cancels")] == ["3"]
