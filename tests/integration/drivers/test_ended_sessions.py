"""Idle connections whose session the server ended (KILL CONNECTION, pg_terminate_backend,
wait_timeout, a restart) are not handed out again: the pool looks at each idle connection's
socket before it hands it out (trinbox/_drivers/_asyncio.py, ``input_waiting``). And asyncpg's
"another operation is in progress" reads as ConnectionLost."""

from __future__ import annotations

import time

import asyncpg

from trinbox._drivers import postgres
from trinbox.errors import ConnectionLost

from ..stands import MariaStand, PostgresStand
from .harness import Backend, TestPool, session_id, using


def _kill(backend: Backend, sessions: list[int]) -> None:
    """End the sessions from a synchronous connection of the test's own, and return once the
    server has ended them. The Trio thread (and with it the asyncio loop) blocks meanwhile,
    so the pool's transports read nothing of it: only the sockets know."""
    stand = PostgresStand(backend.url) if backend.kind == "postgres" else MariaStand(backend.url)
    for session in sessions:
        if backend.kind == "postgres":
            assert stand.value("SELECT pg_terminate_backend(?, 5000)", session) is True
        else:
            stand.execute(f"KILL CONNECTION {session}")
    listed = "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?"
    while backend.kind == "mysql" and any(stand.rows(listed, s) for s in sessions):
        time.sleep(0.005)


async def test_idle_connections_the_server_ended_are_not_handed_out(
    backend: Backend, pool: TestPool
) -> None:
    conns = [await pool.acquire() for _ in range(pool.max_size)]
    sessions = [session_id(conn) for conn in conns]
    for conn in conns:
        await pool.give_back(conn)
    _kill(backend, sessions)
    for _ in range(3 * pool.max_size):
        async with using(pool) as conn:
            assert session_id(conn) not in sessions
            assert await conn.fetch("SELECT 1") == [(1,)]
    assert pool.size <= pool.max_size


async def test_a_live_idle_connection_is_handed_out_again(pool: TestPool) -> None:
    # Nothing to read on a session nobody ended: the same connection serves again.
    async with using(pool) as conn:
        first = session_id(conn)
    for _ in range(5):
        async with using(pool) as conn:
            assert session_id(conn) == first
            await conn.fetch("SELECT 1")


def test_another_operation_in_progress_is_a_lost_connection() -> None:
    for exc in (
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
        asyncpg.InternalClientError(
            "cannot switch to state 15; another operation (2) is in progress"
        ),
    ):
        error = postgres._translate(exc, "SELECT 1", closed=False)
        assert type(error) is ConnectionLost, error
