"""Operations on a served (or only opened) app's queues: their depth, their dead letters, and
the redrive of dead letters back into their queues. ``trinbox inspect`` and
``trinbox dead-letters`` are built on these, and so is the queue-depth gauge.

Everything here runs on a broker's pool alone (``broker.open()`` is enough: no subscription
starts); the statistics are read-only statements, one per table for the depths.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .._declare._inbox import spec_of
from .._declare._spec import TableSpec
from .._dialects import _inspect as sql
from .._dialects._base import DeadLetter
from .._drivers.aio import asyncio_loop
from .._errors import DeclarationError
from .._forms._base import give_back, rollback_quietly
from .app import App, Mount
from .broker import SqlBroker
from .startup import _dead_letter

__all__ = [
    "DeadRow",
    "Queue",
    "QueueDepth",
    "Redriven",
    "dead_rows",
    "depths",
    "opened",
    "parse_id",
    "queue_of",
    "queues_of",
    "redrive",
]

CHUNK = 500  # ids per statement of a redrive


@dataclass(frozen=True, slots=True)
class Queue:
    """A mounted queue as the operations see it: its broker, table, group (``None``: the
    table is one queue), subscriber's queue name and dead letter destination."""

    broker: SqlBroker[Any]
    spec: TableSpec
    name: str
    group: str | None
    dead_letter: DeadLetter | None

    @property
    def table(self) -> str:
        return self.spec.qualified_name


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """One queue's rows now, in the database's clock. ``due``: claimable now (a leased row
    is in work, not due; where the form cannot tell, rows in work count as due);
    ``scheduled``: due later; ``in_work``: leased (``None`` where the form cannot tell without
    taking locks: row locks, advisory keys); ``dead``: rows of the dead letter destination
    (``None``: the queue has none); ``oldest_due_age_seconds``: how long the oldest due row
    has been due (``None``: no due row, or no RetryAfter field to tell). Rows marked processed
    are not counted."""

    table: str
    group: str | None
    queue: str
    due: int
    scheduled: int
    in_work: int | None
    dead: int | None
    oldest_due_age_seconds: float | None


@dataclass(frozen=True, slots=True)
class DeadRow:
    """A row of a dead letter destination: its id, the deliveries it had (from its Attempt
    field), its RetryAfter (where the table has one) and every column's value by field
    name."""

    queue: str
    id: object
    attempts: int | None
    retry_after: object
    values: dict[str, object]


@dataclass(frozen=True, slots=True)
class Redriven:
    """What a redrive moved back into its queue, and the ids asked for that it did not find
    among the dead letters."""

    queue: str
    moved: tuple[object, ...]
    missing: tuple[object, ...]


def queue_of(mount: Mount) -> Queue:
    """The queue a mount serves, its dead letter destination parsed as serving parses it."""
    queue = mount.subscriber.queue
    spec = spec_of(queue.row)
    where = f"{queue.name} on {spec.label}"
    dead = _dead_letter(where, spec, mount.attempts, mount.dead_letter_to)
    group = queue.name if spec.group is not None else None
    return Queue(mount.broker, spec, queue.name, group, dead)


def queues_of(app: App) -> list[Queue]:
    """Every mounted queue of ``app``, in the order it was included."""
    return [queue_of(m) for m in app.mounts]


@asynccontextmanager
async def opened(brokers: Sequence[SqlBroker[Any]]) -> AsyncIterator[None]:
    """The brokers' pools open for the block (inside a trio-asyncio loop when a driver needs
    one), and nothing else: no startup hook, no subscription."""
    async with asyncio_loop(any(b.needs_asyncio for b in brokers)):
        try:
            for broker in brokers:
                await broker.open()
            yield
        finally:
            for broker in brokers:
                await broker.aclose()


def _int(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal | float | str):
        return int(value)
    return int(str(value))


def _float(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, Decimal | float | int | str):
        return max(0.0, float(value))
    return max(0.0, float(str(value)))


async def depths(queues: Sequence[Queue]) -> list[QueueDepth]:
    """The depth of each queue (brokers open), in the order given: one statement per table
    and broker for the queues and their dead letter groups, one per dead letter table."""
    # By broker and table as declared (two row classes of one table's shape read it once).
    tables: dict[tuple[int, TableSpec], list[Queue]] = {}
    for q in queues:
        tables.setdefault((id(q.broker), q.spec), []).append(q)
    by_group: dict[tuple[int, TableSpec, str | None], tuple[object, ...]] = {}
    for same in tables.values():
        first = same[0]
        groups: list[str] = []
        for q in same:
            for g in (q.group, q.dead_letter.group if q.dead_letter else None):
                if g is not None and g not in groups:
                    groups.append(g)
        statement, columns = sql.depth(first.broker.dialect, first.spec, len(groups))
        values = {f"g{n}": g for n, g in enumerate(groups)}
        rows = await first.broker.database.fetch(statement.sql, *statement.bind(values))
        for row in rows:
            group = str(row[0]) if columns.grouped else None
            rest = row[1:] if columns.grouped else row
            by_group[(id(first.broker), first.spec, group)] = rest
    found = []
    for q in queues:
        key = (id(q.broker), q.spec)
        # A group without rows has no row in the result: nothing of it is counted.
        counts: tuple[object, ...] = by_group.get((*key, q.group)) or (0, 0, 0, 0, None)
        due, scheduled = counts[1], counts[2]
        in_work = _int(counts[3]) if q.spec.locked_until is not None else None
        age = _float(counts[-1])
        found.append(
            QueueDepth(
                table=q.table,
                group=q.group,
                queue=q.name,
                due=_int(due),
                scheduled=_int(scheduled),
                in_work=in_work,
                dead=await _dead_count(q, by_group),
                oldest_due_age_seconds=age,
            )
        )
    return found


async def _dead_count(
    q: Queue, by_group: dict[tuple[int, TableSpec, str | None], tuple[object, ...]]
) -> int | None:
    dead = q.dead_letter
    if dead is None:
        return None
    if dead.group is not None:
        rest = by_group.get((id(q.broker), q.spec, dead.group))
        return 0 if rest is None else _int(rest[0])
    statement = sql.count_rows(q.broker.dialect, q.spec, dead)
    return _int(await q.broker.database.fetchval(statement.sql))


def _require_dead(q: Queue) -> DeadLetter:
    if q.dead_letter is None:
        msg = (
            f"queue {q.name!r} on {q.spec.label} has no dead letter destination; mount it "
            f"with .max_attempts(n).dead_letter(..) to have one"
        )
        raise DeclarationError(msg)
    return q.dead_letter


async def dead_rows(q: Queue, *, limit: int = 100) -> tuple[list[DeadRow], int]:
    """The first ``limit`` dead letters of a queue by id, and how many there are."""
    dead = _require_dead(q)
    dialect = q.broker.dialect
    count = sql.count_rows(dialect, q.spec, dead)
    listing = sql.list_dead(dialect, q.spec, dead)
    values = {"dest": dead.group, "limit": limit}
    total = _int(await q.broker.database.fetchval(count.sql, *count.bind(values)))
    rows = await q.broker.database.fetch(listing.sql, *listing.bind(values))
    found = []
    for row in rows:
        by_field = {c.field: v for c, v in zip(q.spec.columns, row, strict=True)}
        attempt = by_field.get(q.spec.attempt.field) if q.spec.attempt else None
        due = by_field.get(q.spec.retry_after.field) if q.spec.retry_after else None
        found.append(
            DeadRow(
                queue=q.name,
                id=by_field[q.spec.id.field],
                attempts=None if attempt is None else sql.deliveries_made(q.spec, _int(attempt)),
                retry_after=due,
                values=by_field,
            )
        )
    return found, total


def parse_id(q: Queue, text: str) -> object:
    """An id given as text, as the id field's type holds it (``int``, ``str``, ``UUID``)."""
    kind = q.spec.id.python_type
    try:
        if kind is int:
            return int(text)
        if kind is uuid.UUID:
            return uuid.UUID(text)
    except ValueError:
        msg = (
            f"the ids of {q.spec.label} are {getattr(kind, '__name__', kind)}, found "
            f"{text!r}; give ids as the table holds them"
        )
        raise DeclarationError(msg) from None
    return text


async def redrive(
    q: Queue,
    ids: Sequence[object] | None,
    *,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
    on_count: Callable[[int], None] | None = None,
) -> Redriven:
    """Move dead letters of ``q`` back into its queue as first deliveries due now (attempt 1,
    RetryAfter now, lease cleared), ``ids`` or every one (``None``), in one transaction that
    moves ``chunk`` rows per statement. ``on_count`` hears how many rows will move before the
    first chunk, ``progress`` how many each chunk moved."""
    dead = _require_dead(q)
    if ids is not None:
        ids = list(dict.fromkeys(ids))
    dialect = q.broker.dialect
    base = {"dest": dead.group, "group": q.group}
    pool = q.broker.pool
    conn = await pool.acquire("dead letter redrive")
    try:
        await conn.begin(sql.redrive_begin(dialect))
        found: list[object] = []
        if ids is None:
            st = sql.dead_ids(dialect, q.spec, dead, None)
            found = [r[0] for r in await conn.fetch(st.sql, st.bind(base))]
        else:
            for start in range(0, len(ids), chunk):
                part = list(ids[start : start + chunk])
                st = sql.dead_ids(dialect, q.spec, dead, len(part))
                values = {**base, **sql.bind_ids(part)}
                found += [r[0] for r in await conn.fetch(st.sql, st.bind(values))]
        if on_count is not None:
            on_count(len(found))
        for start in range(0, len(found), chunk):
            part = found[start : start + chunk]
            values = {**base, **sql.bind_ids(part)}
            for st in sql.redrive(dialect, q.spec, dead, len(part)):
                await conn.execute(st.sql, st.bind(values))
            if progress is not None:
                progress(len(part))
        await conn.commit()
    except BaseException:
        await rollback_quietly(conn)
        raise
    finally:
        await give_back(pool, conn)
    present = {_key(v) for v in found}
    missing = () if ids is None else tuple(i for i in ids if _key(i) not in present)
    return Redriven(q.name, tuple(found), missing)


def _key(value: object) -> str:
    """Ids compared as the database gave them back and as they were asked for."""
    return str(value)
