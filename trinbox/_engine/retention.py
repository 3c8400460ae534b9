"""Retention: a mount's finished rows and dead letters deleted by age
(``app.include(...).retain(processed=..., dead_letters=...)``), by a loop in ``serve``'s
nursery and by ``trinbox prune``.

One loop per mount that declares it (not per worker). Each pass reads "now" from the
broker's clock (the database server's under ``DatabaseClock``, one statement; the host
clock otherwise, so ``VirtualClock`` tests run in virtual time): the clock that wrote the
marks it compares. Then, for each kind (``trinbox/_dialects/retention.py``), it deletes
at most ``RETAIN_BATCH`` rows older than their age a statement, each statement its own
short transaction on a connection taken from the pool and given back at once, repeated
while a statement finds a full batch (at most ``RETAIN_ROUNDS`` a pass). Any process may
run it: PostgreSQL's batches skip rows another one holds, and two processes deleting the
same old rows only find fewer. No LISTEN, a fixed few statements per mount per interval;
the rows pruned are counted in the subscription's statistics.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import trio

from .._bounds import RETAIN_EVERY, TICK_ERROR_WAIT
from .._broker.broker import SqlBroker
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter
from .._dialects.retention import (
    RETAIN_BATCH,
    Kind,
    Prune,
    RetentionPlan,
    check_ages,
    retention_plan,
)
from .._holders.connections import give_back
from ..errors import DeclarationError, SchemaError, TrinboxError
from .schedules import as_utc

__all__ = ["RETAIN_PASS", "RETAIN_ROUNDS", "Retain", "Retention", "check_retain"]

logger = logging.getLogger("trinbox.retention")


RETAIN_PASS = timedelta(seconds=RETAIN_EVERY)

RETAIN_ROUNDS = 100
"""Statements a retention pass runs per kind at most (``RETAIN_BATCH`` rows each, so 100,000
rows); a pass that reaches it goes on at the next pass, so a backlog never makes one long
pass."""


_LABELS: dict[Kind, str] = {"processed": "finished rows", "dead_letters": "dead letters"}


@dataclass(frozen=True, slots=True)
class Retain:
    """What a mount keeps, as ``Mount.retain`` declared it: finished rows for ``processed``,
    dead letters for ``dead_letters`` (``None``: kept for ever), a pass ``every``."""

    processed: timedelta | None = None
    dead_letters: timedelta | None = None
    every: timedelta = RETAIN_PASS


def check_retain(where: str, spec: TableSpec, retain: Retain) -> None:
    """Refuse ages that are not positive ``timedelta``s, a retention that keeps everything,
    and a kind the table cannot tell the age of (its field missing)."""
    given: dict[str, object] = {"processed": retain.processed, "dead_letters": retain.dead_letters}
    for name, value in given.items():
        if value is None:
            continue
        if not isinstance(value, timedelta) or value <= timedelta(0):
            msg = (
                f"{where}: .retain({name}=...) keeps rows for a positive timedelta, found "
                f"{value!r}; pass one, like {name}=timedelta(days=7), or leave it out to keep "
                f"them for ever"
            )
            raise DeclarationError(msg)
    if all(v is None for v in given.values()):
        msg = (
            f"{where}: .retain() prunes finished rows, dead letters or both, found neither "
            f"processed= nor dead_letters=; pass one, like .retain(processed=timedelta(days=1))"
        )
        raise DeclarationError(msg)
    every: object = retain.every
    if not isinstance(every, timedelta) or every < timedelta(seconds=1):
        msg = (
            f"{where}: .retain(every=...) runs a pass a second apart or more (a timedelta), "
            f"found {every!r}; pass every=timedelta(minutes=1), or leave it out"
        )
        raise DeclarationError(msg)
    # The dead letter destination is checked at serve: .dead_letter() may follow .retain().
    check_ages(
        spec,
        processed=retain.processed is not None,
        dead_letters=retain.dead_letters is not None,
        where=where,
    )


class Retention:
    """One mount's retention: its plan, its loop (``run``), one pass now (``prune``) and
    the rows it pruned."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        spec: TableSpec,
        dead_letter: DeadLetter | None,
        retain: Retain,
        *,
        where: str,
    ) -> None:
        self.broker = broker
        self.spec = spec
        self.retain = retain
        self.where = where
        self.dead_letter = dead_letter
        self.plan: RetentionPlan = retention_plan(
            broker.dialect,
            spec,
            dead_letter,
            processed=retain.processed is not None,
            dead_letters=retain.dead_letters is not None,
            where=where,
        )
        self.pruned: dict[Kind, int] = {"processed": 0, "dead_letters": 0}
        self.passes = 0
        self.failed_passes = 0
        self._scope: trio.CancelScope | None = None

    def keep(self, kind: Kind) -> timedelta:
        found = self.retain.processed if kind == "processed" else self.retain.dead_letters
        assert found is not None  # the plan prunes only the kinds given
        return found

    def values(self, prune: Prune, before: datetime) -> dict[str, object]:
        values: dict[str, object] = {"before": before}
        if prune.kind == "dead_letters" and self.dead_letter is not None:
            values["dest"] = self.dead_letter.group
        return values

    async def open(self) -> None:
        """Prepare each statement against the database: a table or column missing (a dead
        letter table without the DeadLetteredAt column) stops the startup, naming it."""
        pool = self.broker.pool
        conn = await pool.acquire("retention startup")
        try:
            for prune in self.plan.prunes:
                for statement in (prune.delete, prune.count):
                    try:
                        await conn.prepare(statement.sql)
                    except TrinboxError as exc:
                        msg = (
                            f"{self.where}: retention deletes from {prune.table}, found "
                            f"{statement.event} failing there: {exc}; create the table and "
                            f"its columns as trinbox schema writes them"
                        )
                        raise SchemaError(msg, table=prune.table, statement=statement.sql) from exc
        finally:
            await give_back(pool, conn)

    async def now(self) -> datetime:
        """The broker's now: the server's under the database clock, else the host clock."""
        if not self.broker.dialect.database_clock:
            return self.broker.clock()
        pool = self.broker.pool
        conn = await pool.acquire("retention clock")
        try:
            rows = await conn.fetch(self.plan.now.sql)
        finally:
            await give_back(pool, conn)
        return as_utc(rows[0][0])

    async def prune(self, *, dry_run: bool = False) -> dict[Kind, int]:
        """One pass now: the rows of each kind deleted (``dry_run``: counted, none
        deleted), at most ``RETAIN_ROUNDS`` batches of each."""
        now = await self.now()
        found: dict[Kind, int] = {}
        pool = self.broker.pool
        for prune in self.plan.prunes:
            values = self.values(prune, now - self.keep(prune.kind))
            if dry_run:
                conn = await pool.acquire("retention count")
                try:
                    rows = await conn.fetch(prune.count.sql, prune.count.bind(values))
                finally:
                    await give_back(pool, conn)
                found[prune.kind] = int(str(rows[0][0]))  # an int, or MySQL's Decimal
                continue
            total = 0
            for _ in range(RETAIN_ROUNDS):
                conn = await pool.acquire("retention")
                try:
                    if self.plan.begin is not None:
                        await conn.execute(self.plan.begin.sql)
                    deleted = await conn.execute(prune.delete.sql, prune.delete.bind(values))
                finally:
                    await give_back(pool, conn)
                total += deleted
                self.pruned[prune.kind] += deleted
                if deleted < RETAIN_BATCH:
                    break
            found[prune.kind] = total
        return found

    def stop(self) -> None:
        """Run no more passes (the app is shutting down); a statement in flight is
        cancelled, and its one-statement transaction rolls back."""
        if self._scope is not None:
            self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The loop: report started, then a pass every ``retain.every`` (the first at
        once), until ``stop``. A failed pass (the database away) is logged and the next one
        runs at its time."""
        every = self.retain.every.total_seconds()
        with trio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            while True:
                try:
                    found = await self.prune()
                except Exception:
                    self.failed_passes += 1
                    logger.warning(
                        "%s: a retention pass failed; trying again in %s s",
                        self.where,
                        max(TICK_ERROR_WAIT, every),
                        exc_info=True,
                        extra={"action": "retention_pass", "table": self.spec.qualified_name},
                    )
                else:
                    self.passes += 1
                    pruned = [f"{n} {_LABELS[kind]}" for kind, n in found.items() if n]
                    if pruned:
                        logger.info(
                            "%s: pruned %s",
                            self.spec.label,
                            " and ".join(pruned),
                            extra={"action": "retention_pass", "table": self.spec.qualified_name},
                        )
                await trio.sleep(every)
