"""The startup check of a limited queue's limits against the other processes serving it
(``broker.use_limit_records``): the records of its (table, group) that other processes wrote
within the last ``RECENT_POLLS`` poll intervals, any whose limits differ warned of or refused,
then the records of processes gone deleted and this process's record written; and the loop
that keeps it recent while the subscription serves (one statement every ``REFRESH_POLLS``
poll intervals, in its upkeep nursery), so a process that starts later sees it however long
it has served.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from .._broker.broker import SqlBroker
from .._declare._limits import ClaimLimits
from .._holders.connections import give_back
from ..errors import SchemaError, StartupError, TrinboxError

__all__ = [
    "RECENT_POLLS",
    "REFRESH_POLLS",
    "RecordWrites",
    "check_limit_records",
    "keep_limit_record",
]

logger = logging.getLogger("trinbox.app")

RECENT_POLLS = 10  # a record older than so many poll intervals is a process gone (or old)
REFRESH_POLLS = 3  # a serving process writes its record again so often: well within RECENT_POLLS


@dataclass
class RecordWrites:
    """A subscription's writes of its limit record, for its statistics."""

    written: int = 0
    failed: int = 0


async def check_limit_records(
    broker: SqlBroker[Any],
    limits: ClaimLimits | None,
    table: str,
    group: str | None,
    where: str,
    writes: RecordWrites,
) -> None:
    """Warn of, or refuse, other limits recorded for (``table``, ``group``); record ours."""
    plan = broker.limit_records
    if plan is None or limits is None:
        return
    declared = limits.label
    now = broker.clock()
    values: dict[str, object] = {
        "table": table,
        "grp": group or "",
        "process": broker.process_id,
        "declared": declared,
        "seen": now,
        "since": now - broker.poll_interval * RECENT_POLLS,
    }
    pool = broker.pool
    conn = await pool.acquire("limit records")
    try:
        try:
            rows = await conn.fetch(plan.others.sql, plan.others.bind(values))
        except TrinboxError as exc:
            msg = (
                f"{where}: a broker that uses limit records reads them at startup, found "
                f"{plan.others.event} failing on {plan.label}: {exc}; create it with "
                f"broker.create_tables(records) in an on_startup hook, or from trinbox schema "
                f"MODULE:RECORDS in your migrations"
            )
            raise SchemaError(msg, table=plan.label, statement=plan.others.sql) from exc
        differing = sorted({str(row[0]) for row in rows} - {declared})
        if differing:
            queue = f"group {group!r} of {table}" if group is not None else table
            msg = (
                f"{where}: another process serving {queue} declared "
                f"{' and '.join(differing)}, this one declares {declared}; each process "
                f"keeps its own limits, so declare the same limits in every process"
            )
            if broker.limit_mismatch == "refuse":
                raise StartupError(msg)
            logger.warning("%s", msg)
        # The records of processes gone go, so each start does not leave one for ever.
        await conn.execute(plan.gone.sql, plan.gone.bind(values))
        if await conn.execute(plan.refresh.sql, plan.refresh.bind(values)) == 0:
            await conn.execute(plan.insert.sql, plan.insert.bind(values))
        writes.written += 1
    finally:
        await give_back(pool, conn)


async def keep_limit_record(
    broker: SqlBroker[Any],
    limits: ClaimLimits | None,
    table: str,
    group: str | None,
    where: str,
    writes: RecordWrites,
) -> None:
    """Write this process's record again every ``REFRESH_POLLS`` poll intervals (Trio's
    clock), until cancelled. A failed write is logged and tried at the next one: another
    process may then not see this one's limits, which never stops this app."""
    plan = broker.limit_records
    if plan is None or limits is None:
        return
    values: dict[str, object] = {
        "table": table,
        "grp": group or "",
        "process": broker.process_id,
        "declared": limits.label,
    }
    while True:
        await trio.sleep(broker.poll_interval.total_seconds() * REFRESH_POLLS)
        values["seen"] = broker.clock()
        try:
            pool = broker.pool
            conn = await pool.acquire("limit records")
            try:
                if await conn.execute(plan.refresh.sql, plan.refresh.bind(values)) == 0:
                    await conn.execute(plan.insert.sql, plan.insert.bind(values))
                writes.written += 1
            finally:
                await give_back(pool, conn)
        except TrinboxError:
            writes.failed += 1
            logger.warning("%s: writing its limit record failed", where, exc_info=True)
