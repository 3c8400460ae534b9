"""Operations on a served (or only opened) app's queues: their depth, their dead letters, and
the redrive of dead letters back into their queues. ``trinbox inspect`` and
``trinbox dead-letters`` are built on these, and so is the queue-depth gauge.

Everything here runs on a broker's pool alone (``broker.open()`` is enough: no subscription
starts); the statistics are read-only statements, one per table for the depths.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from .._broker.broker import SqlBroker
from .._broker.pausing import paused_by
from .._declare._inbox import spec_of
from .._declare._spec import TableSpec
from .._dialects import _inspect as sql
from .._dialects._base import DeadLetter
from .._dialects.pauses import WHOLE
from .._drivers._base import Connection
from .._drivers.aio import asyncio_loop
from .._engine.app import App, Mount
from .._engine.retention import Retention
from .._engine.startup import declared_dead_letter
from .._holders.connections import give_back, rollback_quietly
from ..errors import DeclarationError

__all__ = [
    "QueuePause",
    "pauses_of",
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
    "redrive_group",
    "retentions_of",
]

CHUNK = 500  # ids per statement of a redrive


@dataclass(frozen=True, slots=True)
class Queue:
    """A mounted queue as the operations see it: its broker, table, group (``None``: the
    table is one queue), subscriber's queue name and dead letter destination.
    ``counts_at_claim``: its Attempt column is counted at the claim (the row lock form's
    ``count_attempt_at_claim()``), as the lease and advisory forms count it."""

    broker: SqlBroker[Any]
    spec: TableSpec
    name: str
    group: str | None
    dead_letter: DeadLetter | None
    counts_at_claim: bool = False

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
    """A dead letter of ``queue`` (in a dead letter group, a row that came from its group):
    its id, the deliveries it had (from its Attempt field), its RetryAfter (where the table
    has one) and every column's value by field name."""

    queue: str
    id: object
    attempts: int | None
    retry_after: object
    values: dict[str, object]


@dataclass(frozen=True, slots=True)
class Redriven:
    """What a redrive moved (into ``group``: the queue's own, or the one it was told; ``None``
    for a table that is one queue); the ids asked for that are dead letters of other queues
    of the same dead letter group, each with the group it came from (``None``: the row keeps
    none), left where they are; and the ids asked for that it found nowhere among them."""

    queue: str
    moved: tuple[object, ...]
    missing: tuple[object, ...]
    elsewhere: tuple[tuple[object, str | None], ...] = ()
    group: str | None = None
    held: tuple[tuple[object, str], ...] = ()
    """Dead letters left where they are, each with its dedup key (a ``Unique`` field's):
    a live row of the queue's table holds the key, or an earlier row of the same redrive
    takes it back."""


def queue_of(mount: Mount) -> Queue:
    """The queue a mount serves, its dead letter destination parsed as serving parses it."""
    queue = mount.subscriber.queue
    spec = spec_of(queue.row)
    where = f"{queue.name} on {spec.label}"
    dead = declared_dead_letter(where, spec, mount.attempts, mount.dead_letter_to)
    return Queue(mount.broker, spec, queue.name, queue.group, dead, queue.attempt_at_claim)


def retentions_of(app: App) -> list[tuple[Queue, Retention]]:
    """Every mounted queue that declares ``.retain(...)``, with its retention (``trinbox
    prune`` runs one pass of each), in the order it was included."""
    found: list[tuple[Queue, Retention]] = []
    for mount in app.mounts:
        if mount.retention is None:
            continue
        q = queue_of(mount)
        where = f"{q.name} on {q.spec.label}"
        found.append((q, Retention(q.broker, q.spec, q.dead_letter, mount.retention, where=where)))
    return found


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
    and broker for the queues, one per queue for its dead letters."""
    # By broker and table as declared (two row classes of one table's shape read it once).
    tables: dict[tuple[int, TableSpec], list[Queue]] = {}
    for queue in queues:
        tables.setdefault((id(queue.broker), queue.spec), []).append(queue)
    by_group: dict[tuple[int, TableSpec, str | None], tuple[object, ...]] = {}
    for same in tables.values():
        first = same[0]
        groups: list[str] = []
        for queue in same:
            if queue.group is not None and queue.group not in groups:
                groups.append(queue.group)
        if any(_every_group(queue) for queue in same):
            groups = []  # every group of the table is read
        statement, columns = sql.depth(first.broker.dialect, first.spec, len(groups))
        values = {f"g{n}": g for n, g in enumerate(groups)}
        rows = await first.broker.database.fetch(statement.sql, *statement.bind(values))
        for row in rows:
            group = str(row[0]) if columns.grouped else None
            rest = row[1:] if columns.grouped else row
            by_group[(id(first.broker), first.spec, group)] = rest
    found = []
    for queue in queues:
        key = (id(queue.broker), queue.spec)
        # A group without rows has no row in the result: nothing of it is counted.
        if _every_group(queue):
            counts = _summed(queue, by_group)
        else:
            counts = by_group.get((*key, queue.group)) or (0, 0, 0, 0, None)
        due, scheduled = counts[1], counts[2]
        in_work = _int(counts[3]) if queue.spec.locked_until is not None else None
        age = _float(counts[-1])
        found.append(
            QueueDepth(
                table=queue.table,
                group=queue.group,
                queue=queue.name,
                due=_int(due),
                scheduled=_int(scheduled),
                in_work=in_work,
                dead=await _dead_count(queue),
                oldest_due_age_seconds=age,
            )
        )
    return found


def _every_group(queue: Queue) -> bool:
    """A subscription over every group of a FIFO table."""
    return queue.group is None and queue.spec.group is not None


def _summed(
    queue: Queue, by_group: dict[tuple[int, TableSpec, str | None], tuple[object, ...]]
) -> tuple[object, ...]:
    """The counts of every group of the queue's table but its dead letter group, added up;
    the oldest due row's age is the oldest of any group."""
    dest = queue.dead_letter.group if queue.dead_letter is not None else None
    found = [
        rest
        for (broker, spec, group), rest in by_group.items()
        if broker == id(queue.broker) and spec == queue.spec and group != dest
    ]
    if not found:
        return (0, 0, 0, 0, None)
    # The counts, then the age: (total, due, scheduled[, in work], age).
    sums = [sum(_int(rest[i]) for rest in found) for i in range(len(found[0]) - 1)]
    ages = [a for a in (_float(rest[-1]) for rest in found) if a is not None]
    return (*sums, max(ages) if ages else None)


async def _dead_count(queue: Queue) -> int | None:
    """The queue's dead letters: in a dead letter group, those that came from its group."""
    dead = queue.dead_letter
    if dead is None:
        return None
    statement = sql.count_rows(
        queue.broker.dialect, queue.spec, dead, every_group=_every_group(queue)
    )
    values = {"dest": dead.group, "origin": queue.group}
    return _int(await queue.broker.database.fetchval(statement.sql, *statement.bind(values)))


def _require_dead(queue: Queue) -> DeadLetter:
    if queue.dead_letter is None:
        msg = (
            f"queue {queue.name!r} on {queue.spec.label} has no dead letter destination; mount it "
            f"with .max_attempts(n).dead_letter(..) to have one"
        )
        raise DeclarationError(msg)
    return queue.dead_letter


async def dead_rows(queue: Queue, *, limit: int = 100) -> tuple[list[DeadRow], int]:
    """The first ``limit`` dead letters of a queue by id, and how many there are. In a dead
    letter group they are the rows that came from the queue's group."""
    dead = _require_dead(queue)
    dialect = queue.broker.dialect
    every = _every_group(queue)
    count = sql.count_rows(dialect, queue.spec, dead, every_group=every)
    listing = sql.list_dead(dialect, queue.spec, dead, every_group=every)
    values = {"dest": dead.group, "origin": queue.group, "limit": limit}
    total = _int(await queue.broker.database.fetchval(count.sql, *count.bind(values)))
    rows = await queue.broker.database.fetch(listing.sql, *listing.bind(values))
    found = []
    for row in rows:
        by_field = {c.field: v for c, v in zip(queue.spec.columns, row, strict=True)}
        attempt = by_field.get(queue.spec.attempt.field) if queue.spec.attempt else None
        due = by_field.get(queue.spec.retry_after.field) if queue.spec.retry_after else None
        found.append(
            DeadRow(
                queue=queue.name,
                id=by_field[queue.spec.id.field],
                attempts=None
                if attempt is None
                else sql.deliveries_made(
                    queue.spec, _int(attempt), counted_at_claim=queue.counts_at_claim
                ),
                retry_after=due,
                values=by_field,
            )
        )
    return found, total


def parse_id(queue: Queue, text: str) -> object:
    """An id given as text, as the id field's type holds it (``int``, ``str``, ``UUID``)."""
    kind = queue.spec.id.python_type
    try:
        if kind is int:
            return int(text)
        if kind is uuid.UUID:
            return uuid.UUID(text)
    except ValueError:
        msg = (
            f"the ids of {queue.spec.label} are {getattr(kind, '__name__', kind)}, found "
            f"{text!r}; give ids as the table holds them"
        )
        raise DeclarationError(msg) from None
    return text


async def redrive(
    queue: Queue,
    ids: Sequence[object] | None,
    *,
    to_group: str | None = None,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
    on_count: Callable[[int], None] | None = None,
) -> Redriven:
    """Move dead letters of ``queue`` back into its queue as first deliveries due now (attempt 1,
    RetryAfter now, lease cleared), ``ids`` or every one (``None``), in one transaction that
    moves ``chunk`` rows per statement. In a dead letter group the queue's dead letters are
    the rows that came from its group; they go back to it, or into ``to_group`` when given,
    and ids of other queues' rows are left where they are and reported. A row whose dedup key
    a live row holds stays, and is reported (``held``): one unfinished row holds a key.
    ``on_count`` hears how many rows will move before the first chunk, ``progress`` how many
    each chunk moved."""
    dead = _require_dead(queue)
    into = redrive_group(queue, to_group)
    # Over every group of a FIFO table: each row goes back to the group it came from.
    every = _every_group(queue)
    if ids is not None:
        ids = list(dict.fromkeys(ids))
    dialect = queue.broker.dialect
    base = {"dest": dead.group, "origin": queue.group, "group": into}
    pool = queue.broker.pool
    conn = await pool.acquire("dead letter redrive")
    elsewhere: list[tuple[object, str | None]] = []
    try:
        await conn.begin(sql.redrive_begin(dialect))
        found: list[object] = []
        if ids is None:
            st = sql.dead_ids(dialect, queue.spec, dead, None, every_group=every)
            found = [r[0] for r in await conn.fetch(st.sql, st.bind(base))]
        else:
            for start in range(0, len(ids), chunk):
                part = list(ids[start : start + chunk])
                st = sql.dead_ids(dialect, queue.spec, dead, len(part), every_group=every)
                values = {**base, **sql.bind_ids(part)}
                found += [r[0] for r in await conn.fetch(st.sql, st.bind(values))]
            if dead.group is not None and queue.spec.origin_group is not None:
                elsewhere = await _of_other_queues(conn, queue, dead, ids, found, base, chunk)
        held: list[tuple[object, str]] = []
        if queue.spec.unique is not None and found:
            found, held = await _free_keys(conn, queue, dead, found, base, chunk)
        if on_count is not None:
            on_count(len(found))
        for start in range(0, len(found), chunk):
            part = found[start : start + chunk]
            values = {**base, **sql.bind_ids(part)}
            for st in sql.redrive(dialect, queue.spec, dead, len(part), every_group=every):
                await conn.execute(st.sql, st.bind(values))
            if progress is not None:
                progress(len(part))
        await conn.commit()
    except BaseException:
        await rollback_quietly(conn)
        raise
    finally:
        await give_back(pool, conn)
    present = {_key(v) for v in found} | {_key(v) for v, _ in elsewhere}
    present |= {_key(v) for v, _ in held}
    missing = () if ids is None else tuple(i for i in ids if _key(i) not in present)
    return Redriven(queue.name, tuple(found), missing, tuple(elsewhere), into, tuple(held))


def redrive_group(queue: Queue, to_group: str | None) -> str | None:
    """The group a redrive of ``queue`` moves rows into: the queue's own, or ``to_group``
    (``DeclarationError`` for one that names no queue's group)."""
    dead = _require_dead(queue)
    if to_group is None:
        return queue.group
    where = f"redrive of queue {queue.name!r} on {queue.spec.label}"
    if dead.group is None:
        msg = (
            f"{where}: a redrive into another group moves rows within a table's group column, "
            f"found to_group={to_group!r} for a table without a Group field (its dead letters "
            f"go back into the table, which is one queue); leave to_group out"
        )
        raise DeclarationError(msg)
    if not to_group or to_group == dead.group:
        msg = (
            f"{where}: a redrive moves rows into a queue's group, found to_group={to_group!r}"
            + (" (the dead letter group itself)" if to_group else "")
            + "; name the group of the queue that should take them"
        )
        raise DeclarationError(msg)
    return to_group


async def _of_other_queues(
    conn: Connection,
    queue: Queue,
    dead: DeadLetter,
    ids: Sequence[object],
    found: Sequence[object],
    base: Mapping[str, object],
    chunk: int,
) -> list[tuple[object, str | None]]:
    """Those of ``ids`` not among ``found`` (the queue's own) that are dead letters of the
    same dead letter group from another queue, with the group each came from."""
    own = {_key(v) for v in found}
    rest = [i for i in ids if _key(i) not in own]
    others: list[tuple[object, str | None]] = []
    for start in range(0, len(rest), chunk):
        part = rest[start : start + chunk]
        st = sql.dead_origins(queue.broker.dialect, queue.spec, dead, len(part))
        rows = await conn.fetch(st.sql, st.bind({**base, **sql.bind_ids(part)}))
        others += [(r[0], None if r[1] is None else str(r[1])) for r in rows]
    return others


async def _free_keys(
    conn: Connection,
    queue: Queue,
    dead: DeadLetter,
    found: Sequence[object],
    base: Mapping[str, object],
    chunk: int,
) -> tuple[list[object], list[tuple[object, str]]]:
    """Of the dead letters ``found``, those a redrive may return, and those it leaves with
    their key: one whose key a live row holds, or an earlier one of ``found`` returns (the
    first of them by id goes back). A row without a key always goes back."""
    dialect = queue.broker.dialect
    keys: dict[str, object] = {}
    for start in range(0, len(found), chunk):
        part = list(found[start : start + chunk])
        st = sql.dead_keys(dialect, queue.spec, dead, len(part))
        for ident, key in await conn.fetch(st.sql, st.bind({**base, **sql.bind_ids(part)})):
            if key is not None:
                keys[_key(ident)] = key
    wanted: list[str] = list(dict.fromkeys(str(k) for k in keys.values()))
    taken: set[str] = set()
    for start in range(0, len(wanted), chunk):
        keys_part = wanted[start : start + chunk]
        st = sql.live_keys(dialect, queue.spec, len(keys_part))
        rows = await conn.fetch(st.sql, st.bind({f"k{n}": k for n, k in enumerate(keys_part)}))
        taken |= {str(r[0]) for r in rows}
    going: list[object] = []
    held: list[tuple[object, str]] = []
    for ident in found:
        key = keys.get(_key(ident))
        if key is None:
            going.append(ident)
        elif str(key) in taken:
            held.append((ident, str(key)))
        else:
            taken.add(str(key))
            going.append(ident)
    return going, held


def _key(value: object) -> str:
    """Ids compared as the database gave them back and as they were asked for."""
    return str(value)


@dataclass(frozen=True, slots=True)
class QueuePause:
    """Whether a queue is paused (``broker.pause``), as its broker's pause table holds it, and
    since when (the earliest pause that covers it: its table's or its group's)."""

    paused: bool
    since: datetime | None


async def progress_of(queues: Sequence[Queue]) -> list[list[tuple[object, float]] | None]:
    """Each queue's rows in work that reported progress (brokers open), ``(id, fraction)``
    by id, in the order given; ``None`` where the table keeps no progress (a lease table
    with a Progress field does: the lease keeper writes it). One statement per such queue."""
    found: list[list[tuple[object, float]] | None] = []
    for queue in queues:
        spec = queue.spec
        if spec.progress is None or spec.locked_until is None:
            found.append(None)
            continue
        grouped = queue.group is not None
        statement = sql.in_work_progress(queue.broker.dialect, spec, grouped)
        values = {"g0": queue.group} if grouped else {}
        rows = await queue.broker.database.fetch(statement.sql, *statement.bind(values))
        found.append([(row[0], float(str(row[1]))) for row in rows])
    return found


async def pauses_of(queues: Sequence[Queue]) -> list[QueuePause | None]:
    """Each queue's pause (brokers open), in the order given; ``None`` where its broker has
    no pause table. One statement per broker."""
    read: dict[int, dict[tuple[str, str], object]] = {}
    found: list[QueuePause | None] = []
    for queue in queues:
        broker, plan = queue.broker, queue.broker.pause_plan
        if plan is None:
            found.append(None)
            continue
        if id(broker) not in read:
            rows = await broker.database.fetch(plan.read.sql)
            read[id(broker)] = {(str(r[0]), str(r[1])): r[2] for r in rows}
        held = read[id(broker)]
        covering = [(queue.table, WHOLE)]
        if queue.group is not None:
            covering.append((queue.table, queue.group))
        times = [_utc(held[k]) for k in covering if k in held]
        paused = paused_by(frozenset(held), queue.table, queue.group)
        found.append(QueuePause(paused, min(times) if times else None))
    return found


def _utc(value: object) -> datetime:
    """A time as the drivers read it (aware, naive UTC, or UTC text on SQLite), aware UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        msg = f"a pause time is a timestamp, found {value!r}"
        raise TypeError(msg)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
