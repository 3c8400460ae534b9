"""Publishing: a row's insert values from a publish's message and columns, and the write of
one row on a connection (with the hooks' event and the NOTIFY that wakes other processes).

``SqlBroker.publish`` and friends (broker.py) choose the connection; this module writes.
"""

from __future__ import annotations

import logging
import time
import typing
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._declare._spec import TableSpec
from .._dialects._clock import delay_slot
from .._errors import DatabaseError, DeclarationError
from .._forms._base import give_back
from .codecs import Codec
from .events import EventBus, PublishEvent, now_ns

if TYPE_CHECKING:
    from .broker import SqlBroker

__all__ = [
    "group_of",
    "insert_values",
    "observed_write",
    "row_values",
    "write_pooled",
    "write_row",
]

logger = logging.getLogger("trinbox.publish")


async def write_pooled(
    broker: SqlBroker[Any],
    spec: TableSpec,
    message: object,
    delay: timedelta | None,
    columns: dict[str, object],
) -> None:
    """``write_row`` on a connection of the broker's pool, given back after."""
    conn = await broker.pool.acquire("publish")
    try:
        await write_row(broker, conn, spec, message, delay, columns)
    finally:
        await give_back(broker.pool, conn)


async def observed_write(
    broker: SqlBroker[Any],
    events: EventBus,
    spec: TableSpec,
    message: object,
    delay: timedelta | None,
    columns: dict[str, object],
    conn: Any = None,
) -> None:
    """A publish reported to the hooks, with its time and error (on ``conn``: inside a
    transaction; else on a pooled connection)."""
    start, t0 = now_ns(), time.perf_counter()
    error: BaseException | None = None
    try:
        if conn is not None:
            await write_row(broker, conn, spec, message, delay, columns)
        else:
            await write_pooled(broker, spec, message, delay, columns)
    except BaseException as exc:
        error = exc
        raise
    finally:
        events.published(
            PublishEvent(
                spec.qualified_name,
                group_of(spec, columns),
                "postgresql" if broker.kind == "postgres" else broker.kind,
                conn is not None,
                start,
                time.perf_counter() - t0,
                error,
            )
        )


async def write_row(
    broker: SqlBroker[Any],
    conn: Any,
    spec: TableSpec,
    message: object,
    delay: timedelta | None,
    columns: dict[str, object],
) -> None:
    """Insert the row on ``conn``; with ``listen_notify``, announce it to other processes."""
    dialect = broker.dialect
    statement = dialect.insert(spec)
    values = row_values(broker, spec, message, columns, delay)
    await conn.execute(statement.sql, statement.bind(values))
    notify = dialect.notify_statement()
    if broker.listen_notify and notify is not None:
        group = group_of(spec, columns) or ""
        # Read before the NOTIFY: a failed statement may end what it ran in.
        in_transaction = conn.in_transaction
        try:
            await conn.execute(
                notify.sql, notify.bind({"channel": spec.qualified_name, "group": group})
            )
        except DatabaseError as exc:
            if in_transaction:
                raise _aborted_by_notify(spec, exc) from exc
            # In autocommit the insert committed on its own: only the wake-up is lost.
            logger.warning(
                "NOTIFY for %s failed; the row is written, and other processes see it at "
                "their next poll",
                spec.label,
                exc_info=True,
            )


def _aborted_by_notify(spec: TableSpec, exc: DatabaseError) -> DatabaseError:
    """A NOTIFY that failed inside a transaction failed the transaction (PostgreSQL aborts it
    at the first error): the publish failed, and so will everything after it. Logged as
    that, and raised to the publisher."""
    msg = (
        f"publish into {spec.label}: the NOTIFY announcing the row failed inside the "
        f"transaction ({exc}), and the database aborted the transaction: the publish failed, "
        f"and nothing of the transaction will commit; let the error roll the transaction "
        f"back, then fix what the database reports (the group is the NOTIFY's payload, "
        f"under 8000 bytes) or drop listen_notify"
    )
    logger.warning("%s", msg)
    return DatabaseError(msg, statement=exc.statement, code=exc.code)


def row_values(
    broker: SqlBroker[Any],
    spec: TableSpec,
    message: object,
    columns: dict[str, object],
    delay: timedelta | None,
) -> dict[str, object]:
    """The insert's values by slot, as the broker's driver binds them. On the database clock
    a RetryAfter field the publish leaves out is the server's now plus the delay (bound in
    microseconds; the host's now only bounds it, as a retry's)."""
    dialect = broker.dialect
    now = broker.clock()
    raw = insert_values(spec, message, columns, now, delay, broker.codec)
    due = spec.retry_after
    if dialect.database_clock and due is not None and not due.generated:
        given = due.field in columns
        at = raw[due.column]
        raw[delay_slot(dialect, spec)] = (
            0 if given or not isinstance(at, datetime) else (at - now) // timedelta(microseconds=1)
        )
        if not given:
            raw[due.column] = None
    return {slot: dialect.driver_value(value) for slot, value in raw.items()}


def group_of(spec: TableSpec, columns: dict[str, object]) -> str | None:
    group = spec.group
    if group is None:
        return None
    value = columns.get(group.field)
    return None if value is None else str(value)


def _optional(hint: object) -> bool:
    """Whether a field's type admits ``None`` (a publish may leave it out)."""
    return type(None) in typing.get_args(hint)


def insert_values(
    spec: TableSpec,
    message: object,
    columns: dict[str, object],
    now: datetime,
    delay: timedelta | None,
    codec: Codec,
) -> dict[str, object]:
    """The insert's values by column, or ``DeclarationError`` naming what is missing or extra."""
    where = f"publish into {spec.label}"
    writable = {c.field: c for c in spec.insert_columns}
    unknown = sorted(set(columns) - set(writable))
    if unknown:
        names = ", ".join(sorted(writable)) or "none"
        msg = (
            f"{where}: columns are given by field name, found {', '.join(unknown)} which no "
            f"writable field has (writable: {names})"
        )
        raise DeclarationError(msg)
    if spec.payload is None and message is not None:
        msg = (
            f"{where}: a table without a Payload field takes no message, found "
            f"{type(message).__name__}; give the row's fields as keywords"
        )
        raise DeclarationError(msg)
    if delay is not None:
        _check_delay_has_a_field(where, spec, columns)
    values: dict[str, object] = {}
    missing = []
    for col in spec.insert_columns:
        if col.field in columns:
            values[col.column] = columns[col.field]
            if col.role == "priority":
                _check_priority(where, col.field, columns[col.field])
        elif col.role == "payload":
            values[col.column] = _encoded(where, col.field, message, codec)
        elif col.role == "retry_after":
            values[col.column] = _due(where, col.field, now, delay)
        elif col.role == "attempt":
            values[col.column] = 1
        elif col.role == "priority":
            values[col.column] = 0
        elif col.role in ("locked_until", "processed_at") or _optional(col.python_type):
            values[col.column] = None
        else:
            missing.append(col.field)
    if missing:
        msg = f"{where}: every writable field needs a value, found none for {', '.join(missing)}"
        raise DeclarationError(msg)
    return values


def _check_delay_has_a_field(where: str, spec: TableSpec, columns: dict[str, object]) -> None:
    """A delay is written into the RetryAfter field, so there must be one the insert writes and
    the publish does not also give: never a delay dropped without a word."""
    due = spec.retry_after
    if due is None:
        msg = f"{where}: a delay is written into a RetryAfter field, found none; add one"
        raise DeclarationError(msg)
    if due.generated:
        msg = (
            f"{where}: a delay is written into the RetryAfter field {due.field}, found it "
            f"generated (the database fills it, the insert leaves it out); drop generated=True "
            f"from RetryAfter() to publish with a delay"
        )
        raise DeclarationError(msg)
    if due.field in columns:
        msg = (
            f"{where}: the due time is given once, found both delay= and {due.field}=; pass "
            f"one of them"
        )
        raise DeclarationError(msg)


def _check_priority(where: str, field: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        msg = (
            f"{where}: a priority is an int (the Priority field {field}; smaller is taken "
            f"first), found {type(value).__name__} {value!r}; pass an int, like {field}=5"
        )
        raise DeclarationError(msg)


def _encoded(where: str, field: str, message: object, codec: Codec) -> object:
    """The message as the codec encodes it for the Payload field, or ``DeclarationError``."""
    if message is None:
        msg = (
            f"{where}: a table with a Payload field takes a message (into the Payload field "
            f"{field}), found none; pass it after the row class: publish(Row, message, ...)"
        )
        raise DeclarationError(msg)
    try:
        return codec.encode(message)
    except Exception as exc:
        msg = (
            f"{where}: the message is encoded into the Payload field {field} by "
            f"{type(codec).__name__}, which cannot encode this {type(message).__name__} "
            f"({type(exc).__name__}: {exc}); publish a value the codec encodes (a dataclass, "
            f"a msgspec Struct, a pydantic model, plain JSON values or bytes for JsonCodec), "
            f"or give the broker a codec that encodes it"
        )
        raise DeclarationError(msg) from exc


def _due(where: str, field: str, now: datetime, delay: object) -> datetime:
    """When the row falls due (the RetryAfter field): now, or ``delay`` later."""
    if delay is None:
        return now
    if not isinstance(delay, timedelta):
        msg = (
            f"{where}: a delay is a timedelta (written into the RetryAfter field {field}), "
            f"found {type(delay).__name__} {delay!r}; pass delay=timedelta(seconds=...)"
        )
        raise DeclarationError(msg)
    if delay < timedelta(0):
        msg = (
            f"{where}: a delay is zero or more (written into the RetryAfter field {field}), "
            f"found {delay}; pass a non-negative timedelta"
        )
        raise DeclarationError(msg)
    try:
        return now + delay
    except OverflowError:
        msg = (
            f"{where}: a delay makes the RetryAfter field {field} a time up to "
            f"{datetime.max.year}-12-31, found {delay} after {now:%Y-%m-%d}, past it; pass a "
            f"shorter delay"
        )
        raise DeclarationError(msg) from None
