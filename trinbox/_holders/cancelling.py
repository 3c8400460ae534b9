"""The cancel of one queued row (``broker.cancel``), run on a pool: the statements of its
plan (trinbox._dialects.cancels) in one statement or one transaction, then the read of what
the row is when the settlement changed nothing. It never waits on a lock: a row in work is
passed over (SKIP LOCKED, a lease or key guard), never blocked on."""

from __future__ import annotations

import json
from typing import Literal, cast

from .._dialects.cancels import CancelPlan
from .._drivers._base import Connection, Pool, ThreadedConnection, ThreadedPool, ThreadSession
from ..errors import CancelRefused
from .connections import give_back, rollback_quietly
from .sqlite_key import KeyRegistry, keys_in_work, served_elsewhere

__all__ = ["Found", "cancel_queued"]

Found = Literal["queued", "running", "finished", "not_found"]


async def cancel_queued(
    plan: CancelPlan, pool: Pool, ident: object, now: object, *, label: str
) -> Found:
    """Cancel the row ``ident`` if it is queued (``"queued"``), else say what it is."""
    values: dict[str, object] = {"id": ident, "now": now, "result": None}
    threads = pool if plan.keys else None
    if threads is not None:
        assert isinstance(threads, ThreadedPool)  # the SQLite driver's (plan.keys)
        other = served_elsewhere(threads.path)
        if other is not None:
            msg = (
                f"a cancel of a row of {label} (advisory form on SQLite) runs where the "
                f"file's keys in work are known, in the process serving them, found "
                f"process {other} serving {threads.path}; cancel from that process "
                f"(broker.cancel in its app), or once it has stopped"
            )
            raise CancelRefused(msg)
    conn: Connection = await pool.acquire("cancel")
    try:
        if threads is not None:
            assert isinstance(threads, ThreadedPool)
            keys = KeyRegistry.keys(threads.identity)
            on_thread = cast("ThreadedConnection", conn)
            changed = await on_thread.run_on_thread(
                lambda session: _settle_on_thread(session, plan, values, keys), "cancel"
            )
        else:
            changed = await _settle(conn, plan, values)
        if changed:
            return "queued"
        records = await conn.fetch(plan.state.sql, plan.state.bind(values))
    except BaseException:
        await rollback_quietly(conn)
        raise
    finally:
        await give_back(pool, conn)
    if not records:
        return "not_found"
    processed, dead = records[0]
    return "finished" if processed is not None or dead is not None else "running"


async def _settle(conn: Connection, plan: CancelPlan, values: dict[str, object]) -> int:
    settle = plan.settle
    if plan.begin is None:
        return await conn.execute(settle.sql, settle.bind(values))
    await conn.begin(plan.begin.sql)
    changed = 0
    if plan.probe is None or await conn.fetch(plan.probe.sql, plan.probe.bind(values)):
        changed = await conn.execute(settle.sql, settle.bind(values))
    await conn.commit()
    return changed


def _settle_on_thread(
    session: ThreadSession, plan: CancelPlan, values: dict[str, object], keys: set[str]
) -> int:
    """In the pool's write transaction, so that no claim takes a key between the read of
    the keys in work and the settlement."""
    assert plan.begin is not None
    session.execute(plan.begin.sql)
    try:
        bound = {**values, "held": json.dumps(keys_in_work(keys))}
        changed = session.execute(plan.settle.sql, plan.settle.bind(bound))
        session.commit()
    except BaseException:
        if session.in_transaction:
            session.rollback()
        raise
    return changed
