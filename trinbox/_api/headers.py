"""A message's headers: names and values of text beside its payload, never through the codec.

A publish gives them as a mapping (``publish(..., headers={...})``), checked here by the rule of
the row's ``Headers`` field: a table without one holds no header, and one holds names and
values of text, at most ``HEADERS_LIMIT`` bytes of JSON in all, none named under trinbox's own
prefix (``trinbox-``). A header the row cannot hold is refused (``HeaderRefused``), never
dropped. A delivery reads them back from the column into a read-only ``Headers``, what
``keys.Headers`` lends a handler; a column that does not hold a JSON object of text to text
fails to decode, and the row settles by the decode policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import cast, final

from .._declare._spec import TableSpec
from ..errors import HeaderRefused
from .codecs import DecodeError

__all__ = [
    "HEADERS_LIMIT",
    "ID_HEADER",
    "NO_HEADERS",
    "RESERVED_PREFIX",
    "Carried",
    "Headers",
    "checked_headers",
    "decode_headers",
    "within_limit",
]

RESERVED_PREFIX = "trinbox-"
"""Header names trinbox keeps for its own (compared without case): a publish refuses them."""

ID_HEADER = "trinbox-outbox-id"
"""The header that carries an outbox record's id (its text) from a relay to its sink, and into
another broker's row (``trinbox.outbox.into``): under trinbox's own prefix, so no header of the
service's takes its name."""

HEADERS_LIMIT = 65_536
"""Bytes of JSON text a row's headers take at most: headers are metadata (a tenant, a trace
context); what is bigger belongs in the payload."""


@final
class Headers(Mapping[str, str]):
    """A delivery's headers, read-only: ``headers["tenant"]``, ``headers.get("tenant")``,
    ``dict(headers)``. Empty for a row published without headers."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, str] = dict(items or {})

    def __getitem__(self, name: str) -> str:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


NO_HEADERS = Headers()


@final
@dataclass(frozen=True, slots=True)
class Carried:
    """Headers a relay carries into another broker's row as the record had them: the
    record's own and its id under ``ID_HEADER``, the one trinbox name a publish may write
    (checked as any header otherwise)."""

    items: Mapping[str, str]


def checked_headers(where: str, spec: TableSpec, headers: object) -> dict[str, str] | None:
    """The headers a publish gives, as the table's Headers field holds them (``None`` for
    none), or ``HeaderRefused`` naming the first one it cannot hold."""
    if headers is None:
        return None
    carried = isinstance(headers, Carried)
    if isinstance(headers, Carried):
        headers = headers.items
    if not isinstance(headers, Mapping):
        msg = (
            f"{where}: headers are a mapping of names to values, both str, found "
            f"{type(headers).__name__} {headers!r}; pass a dict, like "
            f'headers={{"tenant": "acme"}}'
        )
        raise HeaderRefused(msg)
    given = dict(cast("Mapping[object, object]", headers))
    if not given:
        return None
    if spec.headers is None:
        names = ", ".join(repr(name) for name in list(given)[:3])
        more = f" and {len(given) - 3} more" if len(given) > 3 else ""
        msg = (
            f"{where}: a header goes into the table's Headers field (one the row cannot hold "
            f"is refused, never dropped), found the headers {names}{more} and a table without "
            f"one; add one, like headers: Annotated[dict[str, str], Headers()], or publish "
            f"without headers"
        )
        raise HeaderRefused(msg, header=next(iter(given)))
    found: dict[str, str] = {}
    for name, value in given.items():
        text = _name(where, name, carried=carried)
        found[text] = _value(where, text, value)
    return found


def _name(where: str, name: object, *, carried: bool = False) -> str:
    if not isinstance(name, str):
        msg = (
            f"{where}: a header's name is a str, found {type(name).__name__} {name!r}; name "
            f"it with text, like {str(name)!r}"
        )
        raise HeaderRefused(msg, header=name)
    if not name:
        msg = f"{where}: a header has a name, found the empty name ''; give it one"
        raise HeaderRefused(msg, header=name)
    if name.casefold().startswith(RESERVED_PREFIX) and not (carried and name == ID_HEADER):
        msg = (
            f"{where}: header names beginning {RESERVED_PREFIX!r} (in any case) are trinbox's "
            f"own, found {name!r}; name it without the prefix"
        )
        raise HeaderRefused(msg, header=name)
    _text(where, f"the name {name!r}", name, name)
    return name


def _value(where: str, name: str, value: object) -> str:
    if value is None:
        msg = (
            f"{where}: a header's value is a str, found None for the header {name!r}; leave "
            f"the header out, or give it a str"
        )
        raise HeaderRefused(msg, header=name)
    if not isinstance(value, str):
        msg = (
            f"{where}: a header's value is a str, found {type(value).__name__} {value!r} for "
            f"the header {name!r}; pass it as text, like {name!r}: {str(value)!r}"
        )
        raise HeaderRefused(msg, header=name)
    _text(where, f"the value of {name!r}", value, name)
    return value


def _text(where: str, what: str, text: str, name: str) -> None:
    """Refuse text some database cannot keep as given: a NUL (PostgreSQL's jsonb holds
    none), or a lone surrogate (no UTF-8 encoding)."""
    if "\x00" in text:
        msg = (
            f"{where}: a header is text every database keeps as given, found a NUL character "
            f"in {what} (PostgreSQL's jsonb holds none); remove it"
        )
        raise HeaderRefused(msg, header=name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"{where}: a header is text that encodes as UTF-8, found the lone surrogate "
            f"{text[exc.start]!r} in {what}; write the character it stands for, or remove it"
        )
        raise HeaderRefused(msg, header=name) from None


def within_limit(where: str, text: str) -> str:
    """``text``, the headers' JSON, when it is at most ``HEADERS_LIMIT`` bytes."""
    size = len(text.encode("utf-8"))
    if size > HEADERS_LIMIT:
        msg = (
            f"{where}: a row's headers take at most {HEADERS_LIMIT:,} bytes of JSON, found "
            f"{size:,}; put what is big into the payload, and keep headers for metadata"
        )
        raise HeaderRefused(msg)
    return text


def decode_headers(raw: object) -> Headers:
    """The headers a row's Headers column holds (NULL: none), or ``DecodeError`` saying why
    they are not a JSON object of text to text."""
    if raw is None:
        return NO_HEADERS
    data: object
    if isinstance(raw, Mapping):
        data = cast("Mapping[object, object]", raw)  # a driver that read the JSON itself
    else:
        if isinstance(raw, bytes | bytearray | memoryview):
            try:
                raw = bytes(cast("bytes", raw)).decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = f"the Headers column holds no UTF-8 text ({exc})"
                raise DecodeError(msg) from None
        if not isinstance(raw, str):
            msg = f"the Headers column holds JSON text, found {type(raw).__name__} {raw!r}"
            raise DecodeError(msg)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            msg = f"the Headers column holds no JSON ({exc}): {raw[:80]!r}"
            raise DecodeError(msg) from None
    if not isinstance(data, Mapping):
        msg = (
            f"the Headers column holds a JSON object of text to text, found "
            f"{type(data).__name__} {data!r:.80}"
        )
        raise DecodeError(msg)
    found: dict[str, str] = {}
    for name, value in sorted(cast("Mapping[str, object]", data).items()):
        if not isinstance(value, str):
            msg = (
                f"the Headers column holds a JSON object of text to text, found "
                f"{type(value).__name__} {value!r:.80} for the header {name!r}"
            )
            raise DecodeError(msg)
        found[name] = value
    return Headers(found)
