"""Reading a handler's signature once at startup, and turning rows into its arguments."""

from __future__ import annotations

import collections.abc
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, get_args, get_origin
from uuid import UUID

from .._declare._spec import TableSpec
from .._util import as_bytes
from ..errors import DeclarationError
from .codecs import Codec
from .handles import Attempt, CancelRequested, Out, Pool, Progress, RowId, Tx
from .headers import Headers

__all__ = ["HandlerPlan", "decode_row", "plan_handler", "row_id"]

_KEYS: dict[object, str] = {
    Attempt: "attempt",
    RowId: "row_id",
    Tx: "tx",
    Pool: "pool",
    Out: "out",
    Headers: "headers",
    CancelRequested: "cancel_requested",
    Progress: "progress",
}
_KEY_NAMES = {
    "attempt": "Attempt",
    "row_id": "RowId",
    "tx": "Tx",
    "pool": "Pool",
    "headers": "Headers",
    "out": "Out",
    "cancel_requested": "CancelRequested",
    "progress": "Progress",
}
# Keys of one row, which a batch of rows has no single value of (a batch's follow-ups would
# belong to no row: a batch handler replies in no form).
_PER_ROW = ("attempt", "row_id", "tx", "headers", "out", "cancel_requested", "progress")
_LISTS = (
    list,
    typing.Sequence,
    typing.Iterable,
    collections.abc.Sequence,
    collections.abc.Iterable,
)


@dataclass(frozen=True, slots=True)
class HandlerPlan:
    """What a handler takes: the message (decoded payload or row), as a list for batches, and
    the context keys of its further parameters, in order."""

    message_type: Any
    row_mode: bool
    batch: bool
    keys: tuple[str, ...]


def plan_handler(
    fn: Callable[..., object],
    spec: TableSpec,
    *,
    batch: bool,
    transactional: bool,
    where: str,
    whole_rows: bool = False,
) -> HandlerPlan:
    """Check a handler against its table and mode, or raise ``DeclarationError``.
    ``whole_rows``: trinbox's own handler of a relay, which takes the row, and its headers
    where the record table has a Headers field."""
    if whole_rows:
        own = ("headers",) if spec.headers is not None else ()
        return HandlerPlan(message_type=spec.row_type, row_mode=True, batch=False, keys=own)
    try:
        hints = typing.get_type_hints(fn, include_extras=False)
    except NameError as exc:
        msg = f"{where}: a handler's annotations are read at startup, found {exc}; import the name"
        raise DeclarationError(msg) from exc
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        msg = f"{where}: a handler takes the message first, found no parameters; add one"
        raise DeclarationError(msg)
    first = hints.get(params[0].name, bytes)
    row_mode = spec.payload is None
    if batch:
        if get_origin(first) not in _LISTS:
            msg = (
                f"{where}: a batch handler takes a list, found {_show(first)}; annotate the "
                f"first parameter as list[...]"
            )
            raise DeclarationError(msg)
        (first,) = get_args(first) or (bytes,)
    else:
        _check_single(where, first, hints.get("return"), spec)
    if not row_mode and _is_row_class(first):
        msg = (
            f"{where}: {spec.label} has a Payload field, so its handler takes the decoded "
            f"payload, found the row class {_show(first)}; annotate the message with the "
            f"payload's type (a dataclass, msgspec Struct, pydantic model, TypedDict or bytes)"
        )
        raise DeclarationError(msg)
    if row_mode and first is not spec.row_type:
        row_name = spec.row_type.__qualname__ if spec.row_type else "the row"
        msg = (
            f"{where}: {spec.label} has no Payload field, so its handler takes the row itself, "
            f"found {_show(first)}; annotate the message as {row_name}"
        )
        raise DeclarationError(msg)
    keys: list[str] = []
    for param in params[1:]:
        hint = hints.get(param.name)
        key = _KEYS.get(get_origin(hint) or hint)  # keys.Tx is Tx[...]
        if key is None:
            msg = (
                f"{where}: a handler's further parameters are context keys (keys.Attempt, "
                f"keys.RowId, keys.Headers, keys.Pool, keys.Tx, keys.CancelRequested, "
                f"keys.Progress, keys.Out), found {param.name}: "
                f"{_show(hint)}; annotate it with one"
            )
            raise DeclarationError(msg)
        if key == "tx" and not transactional:
            msg = (
                f"{where}: keys.Tx, the delivery's transaction, is lent only in transactional "
                f"mode; subscribe with InboxQueue(Row, name).transactional()"
            )
            raise DeclarationError(msg)
        if key == "out" and batch:
            msg = (
                f"{where}: a batch handler replies in no form (its follow-ups would belong "
                f"to no one row), found keys.Out; publish them with broker.publish_named "
                f"(keys.Pool's work, committed on its own), or drop .batch(..)"
            )
            raise DeclarationError(msg)
        if key in _PER_ROW and batch:
            msg = (
                f"{where}: a batch handler takes no per-row key, found keys.{_KEY_NAMES[key]}; "
                f"read it from the rows or drop .batch(..)"
            )
            raise DeclarationError(msg)
        if key == "attempt" and spec.attempt is None:
            msg = (
                f"{where}: keys.Attempt reads the table's Attempt field, found none on "
                f"{spec.label}; add one, like attempt: Annotated[int, Attempt()]"
            )
            raise DeclarationError(msg)
        if keys and keys[-1] == "out" and key != "out":
            msg = (
                f"{where}: keys.Out is a handler's last parameter, found {param.name}: "
                f"keys.{_KEY_NAMES[key]} after it; move the keys.Out parameter to the end"
            )
            raise DeclarationError(msg)
        if key == "headers" and spec.headers is None:
            msg = (
                f"{where}: keys.Headers reads the table's Headers field, found none on "
                f"{spec.label}; add one, like headers: Annotated[dict[str, str], Headers()]"
            )
            raise DeclarationError(msg)
        if key in keys:
            msg = (
                f"{where}: a handler takes each context key once, found keys.{_KEY_NAMES[key]} "
                f"twice; drop {param.name}"
            )
            raise DeclarationError(msg)
        keys.append(key)
    return HandlerPlan(message_type=first, row_mode=row_mode, batch=batch, keys=tuple(keys))


def _check_single(where: str, first: object, returns: object, spec: TableSpec) -> None:
    """Outside a batch a handler takes one message and returns one outcome."""
    if get_origin(first) in _LISTS and any(_is_row_class(a) for a in get_args(first)):
        msg = (
            f"{where}: a handler takes one row per call unless its queue batches them, found "
            f"{_show(first)}; add .batch(n) to the queue or take one {_row_name(spec)}"
        )
        raise DeclarationError(msg)
    if get_origin(returns) in (*_LISTS, tuple) or returns in (list, tuple):
        msg = (
            f"{where}: a handler returns one outcome per delivery unless its queue batches, "
            f"found -> {_show(returns)}; return a HandlerOutcome (or None), or add .batch(n)"
        )
        raise DeclarationError(msg)


def _row_name(spec: TableSpec) -> str:
    return spec.row_type.__qualname__ if spec.row_type else "row"


def _is_row_class(hint: object) -> bool:
    return isinstance(hint, type) and isinstance(getattr(hint, "__inbox_spec__", None), TableSpec)


def _show(hint: object) -> str:
    if hint is None:
        return "no annotation"
    origin, args = get_origin(hint), get_args(hint)
    if origin is not None and args and not isinstance(hint, types.UnionType):
        return f"{_show(origin)}[{', '.join(_show(a) for a in args)}]"
    return getattr(hint, "__qualname__", None) or repr(hint)


def decode_message(
    plan: HandlerPlan, spec: TableSpec, values: Mapping[str, object], codec: Codec
) -> object:
    """The handler's message for one row: the decoded payload, or the row itself."""
    if plan.row_mode:
        return decode_row(spec, values)
    payload_col = spec.payload
    assert payload_col is not None
    raw = values[payload_col.column]
    if isinstance(raw, str):
        raw = raw.encode()
    if raw is None:
        raw = b""
    data = as_bytes(raw)
    assert data is not None
    return codec.decode(data, plan.message_type)


def row_id(spec: TableSpec, value: object) -> RowId:
    """``keys.RowId`` of a delivery: its id as the row class types it (as ``decode_row``)."""
    return RowId(_convert(value, spec.id.python_type))


def decode_row(spec: TableSpec, values: Mapping[str, object]) -> object:
    """The row class built from its column values (SQLite text times become datetimes). The
    headers are the delivery's (``keys.Headers``), not the message's: the row's Headers
    field holds none."""
    assert spec.row_type is not None
    kwargs: dict[str, object] = {
        col.field: (
            {} if col.role == "headers" else _convert(values.get(col.column), col.python_type)
        )
        for col in spec.columns
    }
    return spec.row_type(**kwargs)


def _convert(value: object, hint: object) -> object:
    if value is None:
        return None
    targets = (
        get_args(hint)
        if isinstance(hint, types.UnionType) or get_origin(hint) is typing.Union
        else (hint,)
    )
    if datetime in targets and isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if datetime in targets and isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if bool in targets and isinstance(value, int):
        return bool(value)
    if bytes in targets and (raw := as_bytes(value)) is not None:
        return raw
    # JSON columns come back as their text from every driver; SQLite's NUMERIC and the UUID
    # columns of MySQL and SQLite as numbers and text.
    if isinstance(value, str) and any(
        get_origin(t) in (dict, list) or t in (dict, list) for t in targets
    ):
        return json.loads(value)
    if Decimal in targets and isinstance(value, str | int | float):
        return Decimal(str(value))
    if UUID in targets and isinstance(value, str):
        return UUID(value)
    return value
