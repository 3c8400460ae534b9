"""What a publish writes: a row's insert values from its message and columns, checked (each
mistake a ``DeclarationError`` naming the field and the fix), and the error of a NOTIFY that
failed inside the transaction. ``SqlBroker`` (broker.py) writes them."""

from __future__ import annotations

import logging
import typing
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import cast

from .._api.codecs import Codec, Encoded
from .._api.headers import checked_headers, within_limit
from .._declare._spec import TableSpec
from .._dialects._base import Dialect
from ..errors import DatabaseError, DeclarationError

__all__ = [
    "aborted_by_notify",
    "group_of",
    "insert_values",
    "own_headers",
    "row_values",
    "stored_key",
    "with_added",
]

logger = logging.getLogger("trinbox.publish")


def aborted_by_notify(spec: TableSpec, exc: DatabaseError) -> DatabaseError:
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
    dialect: Dialect,
    spec: TableSpec,
    message: object,
    columns: dict[str, object],
    delay: timedelta | None,
    now: datetime,
    codec: Codec,
    headers: object = None,
    unique: object = None,
) -> dict[str, object]:
    """The insert's values by slot, as the dialect's driver binds them (``now``: the host's).
    On the database clock a RetryAfter field the publish leaves out is the server's now plus
    the delay (bound in microseconds; the host's now only bounds it, as a retry's). The
    headers go into the Headers field as the dialect's JSON text (NULL for none), the dedup
    key into the Unique field (with a window, the key and the start of the period holding
    the row's due time as the host reckons it: the RetryAfter given, else now plus the
    delay)."""
    where = f"publish into {spec.label}"
    found = checked_headers(where, spec, headers)
    text = None if found is None else within_limit(where, dialect.headers_json(found))
    raw = insert_values(spec, message, columns, now, delay, codec, text, unique)
    due = spec.retry_after
    key = None if spec.unique is None else raw[spec.unique.column]
    if isinstance(key, str) and spec.unique is not None and spec.unique_window is not None:
        at = raw.get(due.column) if due is not None and not due.generated else None
        when = at if isinstance(at, datetime) else _due(where, "", now, delay)
        raw[spec.unique.column] = stored_key(key, spec.unique_window, when)
    if dialect.database_clock and due is not None and not due.generated:
        given = due.field in columns
        at = raw[due.column]
        raw[dialect.delay_slot(spec)] = (
            0 if given or not isinstance(at, datetime) else (at - now) // timedelta(microseconds=1)
        )
        if not given:
            raw[due.column] = None
    return {slot: dialect.driver_value(value) for slot, value in raw.items()}


def own_headers(given: object) -> Mapping[str, str]:
    """The headers a publish gives, as its event hooks see them (none when they are not a
    mapping: the publish's rule refuses them after)."""
    return cast("Mapping[str, str]", given) if isinstance(given, Mapping) else {}


def with_added(added: Mapping[str, str], given: object) -> object:
    """The headers a publish writes: what its event hooks added (a trace context), under
    those it was given, which win. Headers given as something other than a mapping stay as
    they are, for the publish's rule to refuse."""
    if not added:
        return given
    if given is None:
        return dict(added)
    if not isinstance(given, Mapping):
        return given
    return {**added, **cast("Mapping[str, str]", given)}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stored_key(key: str, window: timedelta, due: datetime) -> str:
    """The key as a windowed Unique column holds it: the key, ``@``, and the UTC start of the
    period of ``window`` (counted from the Unix epoch) that holds ``due`` (naive: UTC), to
    the second, like ``report-7@2026-12-01T10:00:00Z``."""
    at = due if due.tzinfo is not None else due.replace(tzinfo=UTC)
    start = _EPOCH + ((at - _EPOCH) // window) * window
    return f"{key}@{start:%Y-%m-%dT%H:%M:%SZ}"


def _check_key(where: str, spec: TableSpec, key: object) -> str:
    """A dedup key is text a database holds (no NUL, no lone surrogate), given to a table
    with a Unique field."""
    field = spec.unique
    if field is None:
        msg = (
            f"{where}: a dedup key goes into the table's Unique field, found unique={key!r} "
            f"and a table without one; add one, like dedup: Annotated[str | None, Unique()] = "
            f"None, or publish without unique="
        )
        raise DeclarationError(msg)
    if not isinstance(key, str):
        msg = (
            f"{where}: a dedup key is a str (written into the Unique field {field.field}), "
            f"found {type(key).__name__} {key!r}; pass unique=str(...)"
        )
        raise DeclarationError(msg)
    bad = "\x00" in key
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        bad = True
    if bad:
        msg = (
            f"{where}: a dedup key is text every database holds, found {key!r} with a NUL "
            f"character or a lone surrogate; remove it"
        )
        raise DeclarationError(msg)
    return key


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
    headers: str | None = None,
    unique: object = None,
) -> dict[str, object]:
    """The insert's values by column, or ``DeclarationError`` naming what is missing or extra;
    ``headers``: the Headers field's JSON text (``None`` for none); ``unique``: the dedup key
    (``None`` for none)."""
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
    if spec.headers is not None and spec.headers.field in columns:
        field = spec.headers.field
        msg = (
            f"{where}: headers are given as headers= (checked, then written into the Headers "
            f"field {field}), found {field}= among the columns; pass headers={{...}}"
        )
        raise DeclarationError(msg)
    if spec.unique is not None and spec.unique.field in columns:
        field = spec.unique.field
        msg = (
            f"{where}: a dedup key is given as unique= (checked, then written into the Unique "
            f"field {field}), found {field}= among the columns; pass unique=..."
        )
        raise DeclarationError(msg)
    key = None if unique is None else _check_key(where, spec, unique)
    values: dict[str, object] = {}
    missing: list[str] = []
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
        elif col.role == "headers":
            values[col.column] = headers
        elif col.role == "unique":
            values[col.column] = key
        elif col.role in (
            "locked_until",
            "processed_at",
            "dead_lettered_at",
            "progress",
        ) or _optional(col.python_type):
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
    if isinstance(message, Encoded):
        return message.data
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
