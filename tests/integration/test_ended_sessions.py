"""Pooled connections whose session the server ended (a restart, wait_timeout, KILL,
pg_terminate_backend) are never handed out again: the pool finds them ended when it takes
them from its idle list, and opens new ones. Publishes right after every idle session of the
app was killed all succeed, on both servers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trinbox import SqlBroker

from .matrix.schema import EMAIL, EMAIL_JOBS
from .serving import make_app, serving
from .stands import SERVER_STANDS, Stand, StandName, fresh_stand

WARM = 6
PUBLISHES = 15


@pytest.fixture(params=SERVER_STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as made:
        made.script(EMAIL_JOBS[name])
        yield made


def app_sessions(stand: Stand) -> list[int]:
    """The server sessions on the stand's database, the stand's own one left out."""
    if stand.name == "postgres":
        return [
            int(pid)
            for (pid,) in stand.rows(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
    return [
        int(session)
        for (session,) in stand.rows(
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
    ]


def kill_sessions(stand: Stand, sessions: list[int]) -> None:
    """End each session from the server's side, and return once the server has."""
    for session in sessions:
        if stand.name == "postgres":
            # Waits (up to 5 s) until the backend has exited.
            assert stand.value("SELECT pg_terminate_backend(?, 5000)", session) is True
        else:
            stand.execute(f"KILL CONNECTION {session}")
    left: list[int] = []
    for _ in range(200):
        left = [s for s in app_sessions(stand) if s in sessions]
        if not left:
            return
        time.sleep(0.01)  # blocks the loop too: nothing of the app reads its sockets meanwhile
    raise AssertionError(f"sessions {left} outlived their kill")


async def warm(broker: SqlBroker[Any]) -> None:
    """Open ``WARM`` connections at once, and put them back idle."""
    pool = broker.pool
    conns = [await pool.acquire() for _ in range(WARM)]
    for conn in conns:
        await pool.give_back(conn)


async def test_publishes_after_every_idle_session_was_killed_all_succeed(stand: Stand) -> None:
    broker = stand.broker(pool_size=8)
    row = EMAIL["lease"]
    app = make_app()
    app.add_broker(broker)
    failures: list[BaseException] = []
    async with serving(app):
        await warm(broker)
        sessions = app_sessions(stand)
        assert len(sessions) == WARM
        kill_sessions(stand, sessions)
        for n in range(PUBLISHES):
            try:
                await broker.publish(row, {"n": n}, name="emails", customer="c")
            except Exception as exc:  # counted: the test is about how many fail
                failures.append(exc)
    assert failures == []
    assert stand.value("SELECT COUNT(*) FROM email_jobs") == PUBLISHES
