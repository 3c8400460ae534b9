"""Batch publish: many rows written one statement per chunk, their ids read back in the order
given (``SqlBroker.publish_many``, ``Tx.publish_many``, ``insert_many_statement``).

A batch's items are messages, or ``Message`` items with fields of their own (``message.py``);
each becomes the values a single publish would write (``row_values``: every rule of a
publish, per row). The rows go in chunks: at most ``chunk`` rows a statement, fewer where the
server's limits say so (SQLite's parameters, MySQL's ``max_allowed_packet``, read once per
broker). A chunk is one insert (``Dialect.batch_insert``); its new rows come back with their
ids and keys, matched to the chunk's rows by key (a keyed row) and by rising id (the others,
inserted in order); a row whose key was held is matched to the holder (one read per chunk),
so each item gets the ``Published`` its own publish would return.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from .._api.codecs import Codec
from .._api.message import Message
from .._api.published import OnDuplicate, Published
from .._declare._spec import TableSpec
from .._dialects._base import BatchInsert, Dialect
from .._drivers._base import Connection, Op
from ..errors import DatabaseError, DeclarationError, Duplicate, IntegrityError
from .publishing import group_of, row_values, with_added

__all__ = [
    "CHUNK",
    "BatchLimits",
    "BatchRow",
    "batch_rows",
    "check_chunk",
    "chunked",
    "merged",
    "write_chunk",
]

CHUNK = 1000
"""Rows a batch writes per statement at most, unless ``chunk=`` says otherwise."""

# A holder may finish between the insert and the read of the holders (the key is free again),
# and the row is then written again, this many times at most (as a single publish does).
TRIES = 3

# What a statement of MySQL's carries besides its rows (a margin under max_allowed_packet).
_PACKET_MARGIN = 4096


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What bounds a chunk besides its row count: the parameters a statement binds (SQLite's
    running library), the bytes a statement may take (MySQL's ``max_allowed_packet``)."""

    parameters: int | None = None
    packet: int | None = None


class BatchRow:
    """One row of a batch, as its single publish would write it."""

    __slots__ = ("given_id", "group", "key", "values")

    def __init__(
        self, values: dict[str, object], key: str | None, given_id: object, group: str | None
    ) -> None:
        self.values = values
        self.key = key
        self.given_id = given_id
        self.group = group


def check_chunk(chunk: object, where: str) -> int:
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        msg = (
            f"{where}: chunk= is the most rows a batch writes per statement, found {chunk!r}; "
            f"pass a positive int, like chunk={CHUNK}"
        )
        raise ValueError(msg)
    return chunk


def merged(
    spec: TableSpec,
    items: Iterable[object],
    *,
    delay: timedelta | None,
    headers: Mapping[str, str] | None,
    columns: dict[str, object],
    where: str,
) -> list[Message]:
    """Each item as the ``Message`` it publishes: a plain message with what the call shares,
    a ``Message``'s own fields over the shared ones (its columns and headers over theirs, its
    delay instead of theirs)."""
    writable = {c.field for c in spec.insert_columns}
    if "unique" in columns and "unique" not in writable:
        msg = (
            f"{where} into {spec.label}: a dedup key is a row's own (one key shared by a batch "
            f"would hold one row of it), found unique= given to the whole batch; give each "
            f"row its key, Message(message, unique=...)"
        )
        raise DeclarationError(msg)
    if isinstance(items, str | bytes | Mapping):
        msg = (
            f"{where} into {spec.label}: a batch is an iterable of messages (one row each), "
            f"found a {type(cast('object', items)).__name__}; pass a list, like [message] "
            f"for one row"
        )
        raise DeclarationError(msg)
    rows: list[Message] = []
    for item in items:
        if not isinstance(item, Message):
            row = Message(item, delay=delay, headers=headers)
            row.columns = columns
            rows.append(row)
            continue
        own_headers = item.headers
        if headers is not None and own_headers is not None and isinstance(own_headers, Mapping):
            own_headers = {**headers, **own_headers}
        row = Message(
            item.message,
            delay=item.delay if item.delay is not None else delay,
            headers=own_headers if own_headers is not None else headers,
            unique=item.unique,
        )
        row.columns = {**columns, **item.columns}
        rows.append(row)
    return rows


def batch_rows(
    dialect: Dialect,
    spec: TableSpec,
    items: Sequence[Message],
    now: datetime,
    codec: Codec,
    added: Mapping[str, str],
    where: str,
) -> list[BatchRow]:
    """The values of each row, or the first row's error that its publish would raise, with a
    note naming the item."""
    rows: list[BatchRow] = []
    key_slot = None if spec.unique is None else dialect.slot_of(spec.unique)
    given = None if spec.id.generated else spec.id.field
    for position, item in enumerate(items):
        try:
            values = row_values(
                dialect,
                spec,
                item.message,
                item.columns,
                item.delay,
                now,
                codec,
                with_added(added, item.headers),
                item.unique,
            )
        except DeclarationError as exc:
            exc.add_note(f"{where}: the batch's item {position} (counting from 0): {item!r}")
            raise
        key = None if key_slot is None else values[key_slot]
        rows.append(
            BatchRow(
                values,
                None if key is None else str(key),
                None if given is None else item.columns.get(given),
                group_of(spec, item.columns),
            )
        )
    return rows


def chunked(
    rows: Sequence[BatchRow], plan: BatchInsert, limits: BatchLimits, chunk: int
) -> Iterator[Sequence[BatchRow]]:
    """The rows in chunks of at most ``chunk``, within the statement's limits: the parameters
    of the rows' VALUES (PostgreSQL's arrays bind one per column, whatever the rows), and the
    bytes of the statement as MySQL's client writes it (each value's text escaped: at most
    twice its length). A row alone past the bytes goes alone (the server says why)."""
    most = chunk
    per_row = len(plan.row.params)
    if plan.arrays is None and limits.parameters is not None and per_row:
        most = max(1, min(most, limits.parameters // per_row))
    if limits.packet is None:
        for start in range(0, len(rows), most):
            yield rows[start : start + most]
        return
    budget = limits.packet - len(plan.head) - len(plan.tail) - _PACKET_MARGIN
    start, size = 0, 0
    for i, row in enumerate(rows):
        cost = len(plan.row.sql) + 2 + sum(_size(v) for v in row.values.values())
        if i > start and (i - start >= most or size + cost > budget):
            yield rows[start:i]
            start, size = i, 0
        size += cost
    if start < len(rows):
        yield rows[start:]


def _size(value: object) -> int:
    if isinstance(value, bytes):
        return 2 * len(value) + 10
    if isinstance(value, str):
        return 2 * len(value.encode("utf-8", "surrogatepass")) + 2
    return 32


async def write_chunk(
    conn: Connection,
    dialect: Dialect,
    spec: TableSpec,
    plan: BatchInsert,
    rows: Sequence[BatchRow],
    on_duplicate: OnDuplicate,
) -> list[Published]:
    """Write one chunk on ``conn`` (inside the batch's transaction): what each row's publish
    returns, in the rows' order. ``Duplicate`` for the first held key with
    ``on_duplicate="raise"``."""
    found: list[Published | None] = [None] * len(rows)
    pending: list[int] = list(range(len(rows)))
    refused: IntegrityError | None = None
    for _ in range(TRIES):
        if plan.returns:
            rest = await _insert_returning(conn, spec, plan, rows, pending, found)
        else:
            try:
                rest = await _insert_free(conn, dialect, spec, plan, rows, pending, found)
            except IntegrityError as exc:
                # A key written since the read of its holders (or another constraint's
                # refusal, which the next read tells apart).
                if all(rows[i].key is None for i in pending):
                    raise
                refused = exc
                continue
        if rest:
            held = await _holders(conn, dialect, spec, {rows[i].key for i in rest})
            pending = []
            for i in rest:
                key = rows[i].key
                assert key is not None
                if key in held:
                    found[i] = Published(held[key], True, key)
                else:
                    pending.append(i)  # its holder finished in between: the key is free
        else:
            pending.clear()
        if not pending:
            break
    else:
        if refused is not None:
            raise refused
        msg = (
            f"publish_many into {spec.label}: a row with a dedup key is written or matched to "
            f"the row holding its key, found keys held at each of {TRIES} writes and free at "
            f"each read (their holders finished in between); publish again"
        )
        raise DatabaseError(msg, statement=plan.head)
    published = cast("list[Published]", found)
    if on_duplicate == "raise":
        for item in published:
            if item.duplicate:
                msg = (
                    f"publish_many into {spec.label}: a dedup key is held by one unfinished "
                    f"row at a time, found {item.key!r} held by the row {item.id!r} (the "
                    f"batch's other rows go with the transaction it ran in, which this error "
                    f"rolls back as it leaves the block); leave the message to that row, or "
                    f'publish with on_duplicate="return" to get it back'
                )
                raise Duplicate(msg, id=item.id, key=str(item.key), table=spec.qualified_name)
    return published


async def _insert_returning(
    conn: Connection,
    spec: TableSpec,
    plan: BatchInsert,
    rows: Sequence[BatchRow],
    pending: list[int],
    found: list[Published | None],
) -> list[int]:
    """Insert the pending rows, skipping those whose key is held; fill in the written rows'
    ``Published`` and return the skipped rows."""
    batch = [rows[i] for i in pending]
    if plan.arrays is not None:
        arrays = plan.arrays
        params: tuple[object, ...] = tuple(
            [row.values[slot] for row in batch] for slot in arrays.params
        )
        back = await conn.fetch(arrays.sql, params)
    else:
        sql, flat = _values_text(plan, batch)
        back = await conn.fetch(sql, flat)
    by_key: dict[str, object] = {}
    plain: list[object] = []
    for record in back:
        row_id, key = record[0], (record[1] if len(record) > 1 else None)
        if key is None:
            plain.append(row_id)
        else:
            by_key[str(key)] = row_id
    if all(isinstance(i, int) for i in plain):
        # Generated in the order the rows were inserted, which is the order given.
        plain.sort(key=lambda value: cast("int", value))
    unkeyed = iter(plain)
    skipped: list[int] = []
    for i, row in zip(pending, batch, strict=True):
        key = row.key
        if key is None:
            new_id = row.given_id if not spec.id.generated else next(unkeyed, None)
            found[i] = Published(new_id, False, None)
        elif key in by_key:
            found[i] = Published(by_key.pop(key), False, key)  # the first row of its key
        else:
            skipped.append(i)
    return skipped


async def _insert_free(
    conn: Connection,
    dialect: Dialect,
    spec: TableSpec,
    plan: BatchInsert,
    rows: Sequence[BatchRow],
    pending: list[int],
    found: list[Published | None],
) -> list[int]:
    """MySQL: read the holders of the pending rows' keys, then insert the rows whose key is
    free (the first row of each key; a later one is a duplicate of it) and read their ids.
    A key written meanwhile fails the insert with a duplicate key error."""
    keys = {rows[i].key for i in pending if rows[i].key is not None}
    held = await _holders(conn, dialect, spec, keys) if keys else {}
    first: dict[str, int] = {}
    write: list[int] = []
    later: list[tuple[int, int]] = []
    for i in pending:
        key = rows[i].key
        if key is not None and key in held:
            found[i] = Published(held[key], True, key)
        elif key is not None and key in first:
            later.append((i, first[key]))
        else:
            if key is not None:
                first[key] = i
            write.append(i)
    if write:
        ids = await _insert_ids(conn, spec, plan, [rows[i] for i in write])
        for i, new_id in zip(write, ids, strict=True):
            found[i] = Published(new_id, False, rows[i].key)
    for i, j in later:
        earlier = found[j]
        assert earlier is not None
        found[i] = Published(earlier.id, True, rows[i].key)
    return []


async def _insert_ids(
    conn: Connection, spec: TableSpec, plan: BatchInsert, batch: list[BatchRow]
) -> list[object]:
    """A plain insert of ``batch`` and its ids: given, or the first generated one and the
    step after it (one insert's ids are reserved at once); ``None`` for a generated id that
    is not an integer (no LAST_INSERT_ID)."""
    sql, flat = _values_text(plan, batch)
    if not spec.id.generated:
        await conn.execute(sql, flat)
        return [row.given_id for row in batch]
    if plan.last_id is None or spec.id.python_type is not int:
        await conn.execute(sql, flat)
        return [None] * len(batch)
    results = await conn.script([Op("execute", sql, flat), Op("fetch", plan.last_id.sql, ())])
    last = results[1]
    assert isinstance(last, list)
    first, step = int(cast("int", last[0][0])), int(cast("int", last[0][1]))
    return [first + n * step for n in range(len(batch))]


def _values_text(plan: BatchInsert, batch: Sequence[BatchRow]) -> tuple[str, list[object]]:
    """A multi-row VALUES: the row's part once per row, their parameters in turn."""
    row = plan.row
    sql = plan.head + ", ".join([row.sql] * len(batch)) + plan.tail
    flat: list[object] = []
    for item in batch:
        values = item.values
        flat.extend(values[slot] for slot in row.params)
    return sql, flat


async def _holders(
    conn: Connection, dialect: Dialect, spec: TableSpec, keys: set[str | None]
) -> dict[str, object]:
    """The id of the row holding each of ``keys`` that an unfinished row holds (one read)."""
    wanted = sorted(k for k in keys if k is not None)
    if not wanted:
        return {}
    statement = dialect.batch_holders(spec, len(wanted))
    slots = {f"key{i}": key for i, key in enumerate(wanted)}
    records = await conn.fetch(statement.sql, statement.bind(slots))
    return {str(key): row_id for key, row_id in records}
