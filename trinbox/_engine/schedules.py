"""Periodic schedules with no leader (``app.schedule``): every serving process runs each
schedule's scheduler, and a tick publishes one row because the row is written in one
transaction with the tick's mark in the tick table, whose primary key is (schedule, tick).

A tick's transaction, in any process: insert the mark unless it is there (``INSERT .. ON
CONFLICT DO NOTHING`` / ``INSERT IGNORE`` / ``INSERT OR IGNORE``). One row inserted: this
transaction fires the tick, writes its row and commits both. None: another transaction has
the mark (one still open holds the key, and this insert waits for it to end: a commit leaves
the mark, a rollback or a dead process's aborted transaction lets this one insert it). So a
pooler, clocks that differ or ten processes can delay a tick, never duplicate it; a process
killed mid-tick leaves no mark and no row, and the tick is fired by the next scheduler that
reaches it while the missed-ticks policy still does.

Each scheduler is a task in ``serve``'s nursery. It reads "now" from the broker's clock (the
database's under ``DatabaseClock``, one statement per pass; a host clock otherwise, so
``VirtualClock`` tests run in virtual time), fires what its policy says is due, and sleeps to
the next tick (at most ``SCHEDULER_NAP``). Per pass it runs one transaction per tick it
fires, and now and then one prune of ticks older than the table's ``keep``: a fixed few
statements per schedule per tick, with no LISTEN (PgBouncer's transaction pooling serves).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

import trio

from .._api.events import EventBus, TickEvent, now_ns
from .._api.schedule import Missed, Outcome, Publish, ScheduleStatistics, Tick
from .._api.when import Cron, Every, When
from .._bounds import ON_TIME, PRUNE_EVERY, SCHEDULER_NAP, TICK, TICK_ERROR_WAIT
from .._broker.broker import SqlBroker
from .._declare._inbox import spec_of
from .._declare._spec import TableSpec
from .._declare._ticks import Ticks
from .._dialects.seen import KEY_LENGTH
from .._dialects.ticks import PRUNE_BATCH, TickPlan, tick_plan
from .._holders.connections import give_back
from ..errors import DeclarationError, SchemaError, TrinboxError

__all__ = ["CATCH_UP", "Overlap", "Schedule", "as_utc"]

logger = logging.getLogger("trinbox.schedules")

Overlap: TypeAlias = Literal["allow", "skip"]
"""Whether a tick publishes while an earlier tick's row is unfinished: ``"allow"``, or
``"skip"``: the row is published with the schedule's key in the row's ``Unique()`` field
(``schedule:<name>``), so a tick whose earlier row still holds the key publishes nothing and
is marked skipped."""

CATCH_UP = 1000
"""Ticks one pass fires (``Missed.all``) or counts missed at most; the rest wait for the
next pass, which follows at once."""


def as_utc(value: object) -> datetime:
    """A time as the drivers read it (aware on PostgreSQL, naive UTC on MySQL, UTC text on
    SQLite) as an aware UTC ``datetime``."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        msg = f"a tick time is a timestamp, found {value!r}"
        raise TypeError(msg)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Schedule:
    """One schedule of an app, as ``app.schedule`` declared it, and its scheduler: the loop
    ``serve`` runs, the single tick ``trinbox.testing.fire`` fires, and its statistics."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        name: str,
        when: When,
        publish: Publish[Any],
        *,
        ticks: Ticks,
        missed: Missed,
        overlap: Overlap,
    ) -> None:
        where = f"app.schedule({name!r})"
        _check(where, name, when, publish, ticks, missed)
        _check_overlap(where, overlap, spec_of(publish.row))
        self.broker = broker
        self.name = name
        self.when = when
        self.publish = publish
        self.ticks = ticks
        self.missed = missed
        self.overlap = overlap
        self.where = where
        self.spec: TableSpec = spec_of(publish.row)
        broker.dialect.check(self.spec)
        self.plan: TickPlan = tick_plan(broker.dialect, ticks.table, ticks.schema, where)
        self.events: EventBus | None = None
        self._counts: dict[Outcome, int] = dict.fromkeys(
            ("published", "skipped", "taken", "missed", "failed"), 0
        )
        self._last: datetime | None = None  # the latest tick known fired, by any process
        self._seen: datetime | None = None  # the latest tick this scheduler dealt with
        self._floor: datetime | None = None  # unfired ticks after it are missed
        self._next: datetime | None = None
        self._started: datetime | None = None
        self._pruned: float | None = None
        self._scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        return f"<schedule {self.name!r}: {self.when} -> {self.spec.label}>"

    def statistics(self) -> ScheduleStatistics:
        """This process's counts since the schedule began serving, and its last and next
        tick: a frozen snapshot."""
        c = self._counts
        return ScheduleStatistics(
            name=self.name,
            published=c["published"],
            skipped=c["skipped"],
            taken=c["taken"],
            missed=c["missed"],
            failed=c["failed"],
            last_tick=self._last,
            next_tick=self._next,
        )

    # -- startup --------------------------------------------------------------------------------

    async def open(self, events: EventBus | None) -> None:
        """Prepare the tick table's statements and the row's insert (a missing table stops
        the startup, naming the fix), and read the schedule's latest tick."""
        self.events = events
        self._counts = dict.fromkeys(self._counts, 0)
        self._next = None
        pool = self.broker.pool
        conn = await pool.acquire("schedule startup")
        try:
            insert = self.broker.dialect.insert(self.spec)
            for statement in self.plan.checked:
                try:
                    await conn.prepare(statement.sql)
                except TrinboxError as exc:
                    msg = (
                        f"{self.where}: a schedule records its ticks in its tick table, found "
                        f"{statement.event} failing on {self.ticks.label}: {exc}; create it "
                        f"with broker.create_tables(ticks) in an on_startup hook, or from "
                        f"trinbox schema MODULE:TICKS in your migrations"
                    )
                    raise SchemaError(msg, table=self.ticks.label, statement=statement.sql) from exc
            try:
                await conn.prepare(insert.sql)
            except TrinboxError as exc:
                row = self.publish.row.__qualname__
                msg = (
                    f"{self.where}: a schedule's row is written by its tick, found the insert "
                    f"failing on {self.spec.label}: {exc}; create the table (trinbox schema "
                    f"MODULE:{row} in your migrations, or broker.create_tables({row}) in an "
                    f"on_startup hook)"
                )
                raise SchemaError(
                    msg, table=self.spec.qualified_name, statement=insert.sql
                ) from exc
            last = self.plan.last
            rows = await conn.fetch(last.sql, last.bind({"schedule": self.name}))
        finally:
            await give_back(pool, conn)
        found = rows[0][0] if rows else None
        self._last = self._seen = self._floor = None if found is None else as_utc(found)
        self._started = None

    async def read_ticks(self) -> tuple[datetime | None, datetime]:
        """The latest tick fired (by any process; ``None``: none kept) and the next one due,
        read from the tick table on the broker's open pool (``trinbox inspect``)."""
        pool = self.broker.pool
        conn = await pool.acquire("inspect schedule")
        try:
            last = self.plan.last
            rows = await conn.fetch(last.sql, last.bind({"schedule": self.name}))
        finally:
            await give_back(pool, conn)
        found = None if not rows or rows[0][0] is None else as_utc(rows[0][0])
        now = await self._now()
        return found, self.when.after(max(now, found or now))

    # -- the loop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Fire no more ticks (the app is shutting down); a tick's transaction in flight is
        cancelled and rolls back, so its tick is left to the next scheduler."""
        if self._scope is not None:
            self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The scheduler: report started, then fire what is due and sleep to the next tick,
        until ``stop``. A failed pass (the database away) is logged and tried again
        ``TICK_ERROR_WAIT`` later."""
        with trio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            while True:
                try:
                    now = await self._now()
                    if self._started is None:
                        self._started = now
                    more = await self._pass(now)
                    await self._prune(now)
                except Exception:
                    # The database away, or the message function raising: the tick's
                    # transaction rolled back, and the tick is tried again while in reach.
                    logger.warning(
                        "%s: a pass of the scheduler failed; trying again in %s s",
                        self.where,
                        TICK_ERROR_WAIT,
                        exc_info=True,
                        extra={"action": "schedule_pass", "schedule": self.name},
                    )
                    await trio.sleep(TICK_ERROR_WAIT)
                    continue
                if more:
                    continue  # a catch-up larger than one pass: go on at once
                upcoming = self.when.after(max(now, self._seen or now))
                self._next = upcoming
                wait = (upcoming - now).total_seconds()
                await trio.sleep(max(0.0, min(wait, SCHEDULER_NAP)))

    async def _now(self) -> datetime:
        """The broker's now: the database server's under the database clock, else the
        host clock the broker reads."""
        if not self.broker.dialect.database_clock:
            return self.broker.clock()
        pool = self.broker.pool
        conn = await pool.acquire("schedule clock")
        try:
            rows = await conn.fetch(self.plan.now.sql)
        finally:
            await give_back(pool, conn)
        return as_utc(rows[0][0])

    async def _pass(self, now: datetime) -> bool:
        """Fire the ticks the missed-ticks policy says are due at ``now``, and count the
        ones it lets go; whether ticks are left for another pass."""
        window, policy = self.missed.within, self.missed.policy
        if self._seen is None:
            # A schedule never fired has no missed ticks: its first scheduler fires the
            # latest tick that is on time (Missed.skip()), never a backlog from before it.
            window, policy = min(window, timedelta(seconds=ON_TIME)), "latest"
        reach = now - window
        # A tick after the floor that is not fired is missed: after the latest tick fired
        # (by any process), or, for a schedule never fired, after this scheduler began.
        floor = self._floor or self._started or now
        if floor < reach:
            for tick in _first(self.when.between(floor, reach), CATCH_UP):
                self._count(tick, "missed")
            floor = self._floor = reach
        seen = reach if self._seen is None else max(self._seen, reach)
        self._seen = seen
        due = list(_first(self.when.between(seen, now), CATCH_UP + 1))
        more = len(due) > CATCH_UP
        due = due[:CATCH_UP]
        if policy != "all" and len(due) > 1:
            for tick in due[:-1]:
                if tick > floor:
                    self._count(tick, "missed")
            self._seen = self._floor = max(floor, due[-2])
            due = due[-1:]
        for tick in due:
            await self.fire(tick)
            self._seen = tick
            self._floor = tick if self._floor is None else max(self._floor, tick)
        return more

    async def fire(self, tick: datetime) -> Outcome:
        """Fire ``tick`` (a UTC instant of the schedule): in one transaction, its mark and,
        if the mark was not there, its row. Raises what failed (counted ``failed``; nothing
        is left behind), else says what became of it."""
        start, t0 = now_ns(), time.perf_counter()
        mark = self.plan.mark
        outcome: Outcome = "failed"
        try:
            message = self.publish.message_of(Tick(self.name, tick.astimezone(self.when.zone)))
            # Shielded from the shutdown, within TICK: a tick that committed is counted.
            with trio.CancelScope(shield=True), trio.fail_after(TICK):
                async with self.broker.transaction() as tx:
                    values = {"schedule": self.name, "tick": tick, "now": self.broker.clock()}
                    if await tx.execute(mark.sql, *mark.bind(values)) == 0:
                        outcome = "taken"
                    else:
                        # Any: the row's fields, checked by the publish (unique= among them).
                        columns: dict[str, Any] = dict(self.publish.columns)
                        if self.overlap == "skip":
                            columns["unique"] = f"schedule:{self.name}"
                        written = await tx.publish(
                            self.publish.row, message, headers=self.publish.headers, **columns
                        )
                        outcome = "published"
                        if written.duplicate:  # an earlier tick's row is unfinished
                            skipped = self.plan.skipped
                            await tx.execute(skipped.sql, *skipped.bind(values))
                            outcome = "skipped"
        except BaseException as exc:
            self._count(tick, "failed", start, time.perf_counter() - t0, exc)
            raise
        self._last = tick if self._last is None else max(self._last, tick)
        self._count(tick, outcome, start, time.perf_counter() - t0)
        return outcome

    def _count(
        self,
        tick: datetime,
        outcome: Outcome,
        start: int = 0,
        duration: float = 0.0,
        error: BaseException | None = None,
    ) -> None:
        self._counts[outcome] += 1
        log = logger.debug if outcome == "taken" else logger.info
        if error is None:
            log(
                "%s: tick %s %s",
                self.where,
                tick.isoformat(),
                outcome,
                extra={"action": "tick", "schedule": self.name, "outcome": outcome},
            )
        events = self.events
        if events is not None:
            events.ticked(
                TickEvent(
                    self.name,
                    tick,
                    outcome,
                    self.broker.backend.system,
                    start or now_ns(),
                    duration,
                    error,
                )
            )

    async def _prune(self, now: datetime) -> None:
        """Delete this schedule's ticks older than the table's ``keep`` (its latest one
        stays), ``PRUNE_BATCH`` a statement, once every ``PRUNE_EVERY``."""
        clock = trio.current_time()
        if self._pruned is not None and clock - self._pruned < PRUNE_EVERY:
            return
        self._pruned = clock
        if self._last is None:
            return
        before = min(now - self.ticks.keep, self._last)
        prune = self.plan.prune
        pool = self.broker.pool
        for _ in range(10):
            conn = await pool.acquire("prune ticks")
            try:
                values = {"schedule": self.name, "before": before}
                deleted = await conn.execute(prune.sql, prune.bind(values))
            finally:
                await give_back(pool, conn)
            if deleted < PRUNE_BATCH:
                return


def _first(ticks: Iterator[datetime], count: int) -> Iterator[datetime]:
    for n, tick in enumerate(ticks):
        if n >= count:
            return
        yield tick


def _check_overlap(where: str, overlap: object, spec: TableSpec) -> None:
    """``overlap="skip"`` keys the rows by the row's Unique() field, which must be there."""
    if overlap not in ("allow", "skip"):
        msg = f"{where}: overlap= is 'allow' or 'skip', found {overlap!r}; pass one of those"
        raise DeclarationError(msg)
    if overlap == "skip" and spec.unique is None:
        msg = (
            f"{where}: overlap='skip' publishes each tick's row with the schedule's key in the "
            f"row's Unique() field (an unfinished earlier row holds it), found {spec.label} "
            f"without one; add one, like dedup: Annotated[str | None, Unique()] = None"
        )
        raise DeclarationError(msg)


def _check(
    where: str, name: object, when: object, publish: object, ticks: object, missed: object
) -> None:
    """The declaration's rules, for untyped callers too."""
    if not isinstance(name, str) or not name or len(name) > KEY_LENGTH:
        msg = (
            f"{where}: a schedule is named by a non-empty str of at most {KEY_LENGTH} "
            f"characters (its ticks are recorded by name: a renamed schedule is a new one), "
            f"found {name!r}; name it, like 'nightly-report'"
        )
        raise DeclarationError(msg)
    if not isinstance(when, Cron | Every):
        msg = (
            f"{where}: a schedule ticks by Cron('...') or Every(timedelta(...)), found "
            f"{when!r}; pass one of those"
        )
        raise DeclarationError(msg)
    if not isinstance(publish, Publish):
        msg = (
            f"{where}: a schedule publishes a Publish(Row, message, **columns), found "
            f"{publish!r}; wrap the row class, like Publish(Report, lambda tick: ...)"
        )
        raise DeclarationError(msg)
    if not isinstance(ticks, Ticks):
        msg = (
            f"{where}: a schedule records its ticks in a Ticks('table'), found ticks={ticks!r}; "
            f"pass ticks=Ticks('app_ticks') (create it with broker.create_tables)"
        )
        raise DeclarationError(msg)
    if not isinstance(missed, Missed):
        msg = (
            f"{where}: missed= is Missed.skip(), Missed.latest(within=...) or "
            f"Missed.all(within=...), found {missed!r}; pass one of those"
        )
        raise DeclarationError(msg)
    if missed.within >= ticks.keep - timedelta(hours=1):
        msg = (
            f"{where}: a missed-ticks window is shorter than the tick table keeps its ticks "
            f"(less an hour), so a pruned tick never fires again, found {missed} beside "
            f"Ticks({ticks.table!r}, keep={ticks.keep}); shorten the window or keep ticks longer"
        )
        raise DeclarationError(msg)
