"""Payload codecs: message object <-> the bytes of the payload column.

The JSON codec decodes into the handler's annotated type: a dataclass, a msgspec Struct, a
pydantic model, a TypedDict, plain JSON values, or ``bytes`` (passed through untouched).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
from typing import Any, Protocol, TypeVar, cast, final, is_typeddict

from .._util import as_bytes

__all__ = ["Codec", "DecodeError", "Encoded", "JsonCodec", "RawCodec"]

T = TypeVar("T")


class DecodeError(ValueError):
    """A payload does not decode into the handler's type."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Encoded:
    """A message already encoded, written into the Payload field as it is, never through the
    codec: an outbox record's bytes, relayed into another broker (``trinbox.outbox.into``)."""

    data: bytes


class Codec(Protocol):
    """Turns messages into payload bytes and back."""

    def encode(self, message: object) -> bytes: ...

    def decode(self, data: bytes, into: type[T]) -> T: ...


@functools.cache
def _msgspec() -> Any:
    try:
        return importlib.import_module("msgspec")
    except ImportError:  # pragma: no cover - msgspec is optional
        return None


def _is_pydantic(tp: object) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_validate_json")


_DECODERS: dict[object, Any] = {}


def _msgspec_decoder(into: object) -> Any:
    """One decoder per message type: msgspec compiles the type once."""
    decoder = _DECODERS.get(into)
    if decoder is None:
        decoder = _DECODERS[into] = _msgspec().json.Decoder(type=into)
    return decoder


class JsonCodec:
    """JSON, the default codec."""

    def encode(self, message: object) -> bytes:
        raw = as_bytes(message)
        if raw is not None:
            return raw
        dump = getattr(message, "model_dump_json", None)  # a pydantic model
        if dump is not None:
            return cast("str", dump()).encode()
        msgspec = _msgspec()
        if msgspec is not None:
            return cast("bytes", msgspec.json.encode(message))
        if dataclasses.is_dataclass(message) and not isinstance(message, type):
            message = dataclasses.asdict(message)
        return json.dumps(message, separators=(",", ":")).encode()

    def decode(self, data: bytes, into: type[T]) -> T:
        if into is bytes:
            return cast("T", bytes(data))
        try:
            if _is_pydantic(into):
                return cast("T", into.model_validate_json(data))  # type: ignore[attr-defined]
            if _msgspec() is not None:
                return cast("T", _msgspec_decoder(into).decode(data))
            value = json.loads(data)
            if dataclasses.is_dataclass(into):
                return cast("T", into(**value))
            if is_typeddict(into) or into in (dict, list, str, int, float, bool, object):
                return cast("T", value)
            return into(value)  # type: ignore[call-arg]  # a scalar type from its JSON value
        except Exception as exc:
            msg = f"the payload does not decode into {getattr(into, '__qualname__', into)}: {exc}"
            raise DecodeError(msg) from exc


class RawCodec:
    """Bytes in, bytes out: the handler takes ``bytes``."""

    def encode(self, message: object) -> bytes:
        raw = as_bytes(message)
        if raw is None:
            msg = f"the raw codec publishes bytes, found {type(message).__name__}; encode it first"
            raise TypeError(msg)
        return raw

    def decode(self, data: bytes, into: type[T]) -> T:
        return cast("T", bytes(data))
