"""What the command line tests share: a service module written into a temporary directory,
the matrix's tables on a fresh database, rows inserted by hand, and the ``trinbox`` command
run as a subprocess (``python -m trinbox``) importing this worktree's trinbox."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio

import trinbox

from ..matrix.schema import EMAIL_JOBS, PLAIN_JOBS
from ..readme import child_env
from ..stands import Stand

ROOT = Path(trinbox.__file__).resolve().parents[1]

# The service the commands are pointed at: ``svc:app``. A lease table with a dead letter
# group (``email_jobs``, rows marked processed when handled, a dead letter's group kept in
# ``dead_from``) and an advisory table with a dead letter table (``plain_jobs``, rows deleted
# when handled). Each handler prints its
# queue and payload on stdout; SVC_MODE=hang makes the email handler never return, and
# SVC_MODE=crash makes it raise under the fail-fast policy.
SERVICE = """
import os
from datetime import datetime
from typing import Annotated

import trio

from trinbox import (
    Advisory, App, AppInfo, Attempt, FailurePolicy, Group, Id, Inbox, InboxQueue, Lease,
    LockedUntil, OnFailure, OriginGroup, Payload, ProcessedAt, RetryAfter, SqlBroker,
    subscriber,
)

URL = os.environ["SVC_URL"]
KIND = os.environ["SVC_KIND"]
MODE = os.environ.get("SVC_MODE", "ack")


class Email(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class Plain(Inbox[Advisory], table="plain_jobs", advisory_lock="plain_jobs-{tenant}"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    tenant: str
    payload: Annotated[bytes, Payload()]


FAILURE = OnFailure(handler=FailurePolicy.FAIL_FAST if MODE == "crash" else FailurePolicy.RETRY)


@subscriber(InboxQueue(Email, "emails").poll_interval(0.05).on_failure(FAILURE))
async def email(body: bytes) -> None:
    print("email", body.decode(), flush=True)
    if MODE == "crash":
        raise RuntimeError("the handler broke")
    if MODE == "hang":
        print("hanging", body.decode(), flush=True)
        await trio.sleep_forever()


@subscriber(InboxQueue(Plain, "plain").poll_interval(0.05))
async def plain(body: bytes) -> None:
    print("plain", body.decode(), flush=True)


if KIND == "sqlite":
    broker = SqlBroker.sqlite(URL)
elif KIND == "postgres":
    broker = SqlBroker.postgres(URL)
else:
    broker = SqlBroker.mysql(URL)
app = App(AppInfo("svc"), grace=float(os.environ.get("SVC_GRACE", "10")))
app.include(broker, email).max_attempts(3).dead_letter("emails_dead")
app.include(broker, plain).max_attempts(3).dead_letter("plain_jobs_dead")
"""


@dataclass
class Service:
    """A service module in ``dir`` pointed at ``stand``'s database."""

    stand: Stand
    dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def environ(self, **more: str) -> dict[str, str]:
        kind = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mysql"}[self.stand.name]
        found = dict(os.environ)
        found.update(PYTHONPATH=str(ROOT), SVC_URL=self.stand.url, SVC_KIND=kind)
        found.update(self.env)
        found.update(more)
        return found

    def trinbox(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """``trinbox ARGS`` run to its end."""
        return subprocess.run(
            [sys.executable, "-m", "trinbox", *args],
            cwd=self.dir,
            env=self.environ(**env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def now(self) -> datetime:
        return datetime.now(UTC)

    def time(self, delta: float) -> object:
        """A time ``delta`` seconds from now, as this stand's table holds it."""
        return stored_time(self.stand, self.now() + timedelta(seconds=delta))

    def email(
        self,
        group: str,
        *,
        due: float = -1.0,
        attempt: int = 1,
        locked: float | None = None,
        processed: bool = False,
        payload: bytes = b"{}",
        job_id: int | None = None,
        origin: str | None = None,
    ) -> None:
        """A row of ``email_jobs``: due ``due`` seconds from now, leased ``locked`` seconds;
        ``origin``: a dead letter's group of origin."""
        cols = [
            "name",
            "dead_from",
            "retry_after",
            "attempt",
            "locked_until",
            "processed_at",
            "payload",
        ]
        values: list[object] = [
            group,
            origin,
            self.time(due),
            attempt,
            None if locked is None else self.time(locked),
            self.time(0) if processed else None,
            payload,
        ]
        if job_id is not None:
            cols.insert(0, "job_id")
            values.insert(0, job_id)
        marks = ", ".join("?" for _ in cols)
        self.stand.execute(f"INSERT INTO email_jobs ({', '.join(cols)}) VALUES ({marks})", *values)

    def plain(
        self,
        *,
        table: str = "plain_jobs",
        id: int | None = None,
        attempt: int = 1,
        tenant: str = "t",
        payload: bytes = b"{}",
    ) -> None:
        cols = ["attempt", "tenant", "payload"]
        values: list[object] = [attempt, tenant, payload]
        if id is not None:
            cols.insert(0, "id")
            values.insert(0, id)
        marks = ", ".join("?" for _ in cols)
        self.stand.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", *values)


def stored_time(stand: Stand, at: datetime) -> object:
    """``at`` as the stand's time columns take it: trinbox's text on SQLite, naive UTC on
    MariaDB, aware on PostgreSQL."""
    if stand.name == "sqlite":
        return at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    if stand.name == "mariadb":
        return at.astimezone(UTC).replace(tzinfo=None)
    return at


def service(stand: Stand, tmp_path: Path) -> Service:
    """The matrix's tables on ``stand`` and the service module beside them."""
    stand.script(EMAIL_JOBS[stand.name])
    stand.script(PLAIN_JOBS[stand.name])
    work = tmp_path / "work"
    work.mkdir()
    (work / "svc.py").write_text(SERVICE)
    return Service(stand, work)


@dataclass
class Running:
    """``trinbox run`` as a process, its output read as it comes."""

    process: trio.Process
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    grew: trio.Event = field(default_factory=trio.Event)

    async def pump(self, stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
        assert stream is not None
        async for chunk in stream:
            into += chunk
            self.grew.set()
        self.grew.set()

    async def wait_lines(self, *texts: str) -> None:
        """Until every one of ``texts`` was printed by the handlers (stdout)."""
        for text in texts:
            await self.wait_for(text, err=False)

    async def wait_for(self, text: str, *, err: bool = True, within: float = 60) -> None:
        """Until ``text`` appears on stderr (or stdout), or fail."""
        with trio.fail_after(within):
            while text.encode() not in (self.err if err else self.out):
                if self.process.returncode is not None:
                    raise AssertionError(f"trinbox run ended: {self.err.decode()}")
                self.grew = trio.Event()
                await self.grew.wait()

    async def ended(self, within: float = 60) -> int:
        with trio.fail_after(within):
            return await self.process.wait()


async def start_run(
    nursery: trio.Nursery, svc: Service, args: Sequence[str], **env: str
) -> Running:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", *args],
        cwd=svc.dir,
        env=svc.environ(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running = Running(process)
    nursery.start_soon(running.pump, process.stdout, running.out)
    nursery.start_soon(running.pump, process.stderr, running.err)
    return running


async def runs_as_shown(directory: Path, target: str, printed: str) -> None:
    """``trinbox run target`` in ``directory`` (a README service written there) prints
    ``printed`` on stdout, exactly, and ends with status 0 at a SIGINT once it has."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trinbox", "run", target],
        cwd=directory,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running = Running(process)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(running.pump, process.stdout, running.out)
        nursery.start_soon(running.pump, process.stderr, running.err)
        await running.wait_lines(*printed.splitlines())
        process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    assert running.out.decode().splitlines() == printed.splitlines()
