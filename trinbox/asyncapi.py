"""The AsyncAPI 3.0.0 document of an app: its brokers as servers, its queues as channels, its
subscribers as ``receive`` operations and their message types as payload schemas.

Rendering needs no database: everything comes from the declarations. Servers are described by
host and port only (never a user, a password or a database name, nor a SQLite file's path).
trinbox's own facts live in ``x-trinbox`` bindings (AsyncAPI accepts ``x-`` keys in every
bindings object): the channel binding names the table and group a publisher writes to, the
operation binding the subscription's settings, the server binding how trinbox reaches it.

Payload schemas come from msgspec (dataclasses, msgspec Structs, TypedDicts, plain types) and
pydantic (pydantic models, and whatever msgspec cannot describe); named types go into
``components.schemas`` behind ``$ref``s.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from datetime import timedelta
from types import ModuleType
from typing import Any, cast
from urllib.parse import urlsplit

from ._api.codecs import JsonCodec, RawCodec
from ._api.handler import HandlerPlan, plan_handler
from ._broker.broker import SqlBroker
from ._declare._inbox import spec_of
from ._declare._markers import Advisory, Lease, Transactional
from ._declare._spec import TableSpec
from ._drivers._urls import port_of
from ._engine.app import App, Mount
from ._engine.tracking import consumer_of

__all__ = ["ASYNCAPI_VERSION", "BINDING", "BINDING_VERSION", "UndescribableType", "document"]

ASYNCAPI_VERSION = "3.0.0"
BINDING = "x-trinbox"
"""The key of trinbox's bindings on servers, channels and operations."""
BINDING_VERSION = "0.1.0"
"""The version of the ``x-trinbox`` bindings' fields (README: "The AsyncAPI document")."""

SQLITE_HOST = "localhost"
"""What a SQLite server's ``host`` reads: the database is a file the app's own process opens,
and its path is never shown."""


class UndescribableType(TypeError):
    """A handler's message type that neither msgspec nor pydantic can describe."""


_REF = "#/components/schemas/{name}"
_BINARY = {"type": "string", "format": "binary"}
_JSON = "application/json"
# A table's Headers field: names and values of text beside the payload (keys.Headers).
_HEADERS = {
    "type": "object",
    "description": "The row's Headers field: names and values of text, read by keys.Headers.",
    "additionalProperties": {"type": "string"},
}
_OCTETS = "application/octet-stream"


def document(app: App) -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document of ``app``, as JSON-ready dicts and lists.

    One server per broker, one channel per queue (table and group) of each broker, one
    ``receive`` operation per mounted subscriber. Raises ``DeclarationError`` for a handler
    the app would refuse at startup, ``ImportError`` when a payload type needs msgspec or
    pydantic and neither is installed, and ``UndescribableType`` for a type neither can
    describe.
    """
    info: dict[str, Any] = {"title": app.info.name, "version": app.info.version}
    if app.info.description:
        info["description"] = app.info.description
    parts = _Parts(_server_names(app.brokers))
    for mount in app.mounts:
        parts.add(mount, where=f"the AsyncAPI document of {app.info.name}: {mount.subscriber!r}")
    doc: dict[str, Any] = {"asyncapi": ASYNCAPI_VERSION, "info": info}
    if app.brokers:
        doc["servers"] = {parts.servers[id(b)]: _server(b) for b in app.brokers}
    if parts.channels:
        doc["channels"] = parts.channels
    if parts.operations:
        doc["operations"] = parts.operations
    components: dict[str, Any] = {}
    if parts.book.schemas:
        components["schemas"] = parts.book.schemas
    if parts.messages:
        components["messages"] = parts.messages
    if components:
        doc["components"] = components
    return doc


class _Parts:
    """The channels, operations, messages and schemas of the mounts added so far."""

    def __init__(self, servers: dict[int, str]) -> None:
        self.servers = servers
        self.book = _SchemaBook()
        self.channels: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, Any]] = {}
        self._channel_of: dict[tuple[int, str, str | None], str] = {}
        self._message_of: dict[tuple[object, str | None, bool], str] = {}

    def add(self, mount: Mount, *, where: str) -> None:
        queue = mount.subscriber.queue
        spec = spec_of(queue.row)
        plan = plan_handler(
            mount.subscriber.handler,
            spec,
            batch=queue.batch_size is not None,
            transactional=queue.mode is Transactional,
            where=where,
            whole_rows=queue.whole_rows,
        )
        message = self._message(spec, plan, queue.codec_used)
        channel = self._channel(mount.broker, spec, queue.group, every=queue.serves_every_group)
        self.channels[channel]["messages"][message] = {"$ref": f"#/components/messages/{message}"}
        name = _safe(_handler_name(mount.subscriber.handler, qualified=False))
        self.operations[_unique(name, self.operations)] = _operation(mount, spec, channel, message)

    def _message(self, spec: TableSpec, plan: HandlerPlan, codec: object) -> str:
        """One message per (type, content type), shared by every channel that carries it."""
        content_type = None if plan.row_mode else _content_type(codec, plan)
        headers = spec.headers is not None
        key = (plan.message_type, content_type, headers)
        if key not in self._message_of:
            name = _unique(_type_name(plan.message_type), self.messages)
            message: dict[str, Any] = {"name": name}
            if content_type is not None:
                message["contentType"] = content_type
            if headers:
                message["headers"] = dict(_HEADERS)
            message["payload"] = (
                self.book.row(spec) if plan.row_mode else self.book.payload(plan.message_type)
            )
            self.messages[name] = message
            self._message_of[key] = name
        return self._message_of[key]

    def _channel(
        self, broker: SqlBroker[Any], spec: TableSpec, group: str | None, *, every: bool
    ) -> str:
        """One channel per (broker, table, group): a group-less table is one queue, whatever
        its subscriptions' labels, and so is every group of a FIFO table."""
        key = (id(broker), spec.qualified_name, group)
        if key not in self._channel_of:
            base = spec.qualified_name if group is None else f"{spec.qualified_name}.{group}"
            name = _unique(_safe(base), self.channels)
            self.channels[name] = _channel(
                spec,
                group,
                self.servers[id(broker)],
                every=every,
                routes=_routes(broker, spec, group),
            )
            self._channel_of[key] = name
        return self._channel_of[key]


# -- servers ------------------------------------------------------------------------------------


def _server_names(brokers: tuple[SqlBroker[Any], ...]) -> dict[int, str]:
    """``postgres``, ``mysql``, ``sqlite``; numbered from 1 when an app has several of a kind."""
    kinds = [b.kind for b in brokers]
    names: dict[int, str] = {}
    seen: dict[str, int] = {}
    for broker in brokers:
        seen[broker.kind] = seen.get(broker.kind, 0) + 1
        several = kinds.count(broker.kind) > 1
        names[id(broker)] = f"{broker.kind}-{seen[broker.kind]}" if several else broker.kind
    return names


def _server(broker: SqlBroker[Any]) -> dict[str, Any]:
    """Host and port from the URL, nothing else of it: no user, password, database or path."""
    binding: dict[str, Any] = {"bindingVersion": BINDING_VERSION}
    backend = broker.backend
    if backend.port is None:
        binding["inProcess"] = True
        return {
            "host": SQLITE_HOST,
            "protocol": backend.system,
            "description": "SQLite: a database file opened by the app's own process.",
            "bindings": {BINDING: binding},
        }
    port = port_of(broker.url, server=backend.server, default=backend.port)
    hostname = urlsplit(broker.url).hostname or "localhost"  # no host: a local socket
    host = f"[{hostname}]" if ":" in hostname else hostname
    binding["inProcess"] = False
    if backend.notify:
        binding["listenNotify"] = broker.listen_notify
        if broker.pgbouncer is not None:
            binding["pgbouncer"] = broker.pgbouncer
    return {
        "host": f"{host}:{port}",
        "protocol": backend.system,
        "bindings": {BINDING: binding},
    }


# -- channels and operations ----------------------------------------------------------------------


def _routes(broker: SqlBroker[Any], spec: TableSpec, group: str | None) -> list[str]:
    """The route patterns whose publishes land in the channel: the route its group's name
    takes, when it leads into this table; into a table without groups, every one into it."""
    if group is None:
        return [r.pattern for r in broker.routes.into(spec)]
    route = broker.routes.find(group)
    if route is None or route.spec.qualified_name != spec.qualified_name:
        return []
    return [route.pattern]


def _channel(
    spec: TableSpec, group: str | None, server: str, *, every: bool, routes: list[str]
) -> dict[str, Any]:
    binding: dict[str, Any] = {"bindingVersion": BINDING_VERSION, "table": spec.qualified_name}
    if group is not None:
        binding["group"] = group
    binding["form"] = spec.form.name
    binding["isolation"] = spec.isolation.name
    binding["mode"] = "payload" if spec.payload is not None else "row"
    if spec.form is Advisory:
        binding["advisoryLock"] = spec.key_template
    if spec.fifo:
        binding["fifo"] = True
    if every:
        binding["everyGroup"] = True
    if routes:
        binding["routes"] = routes
    binding["columns"] = {col.column: col.role or "data" for col in spec.columns}
    if spec.unique is not None:
        # The dedup key: one unfinished row of the table holds each (README "Unique jobs").
        unique: dict[str, Any] = {"column": spec.unique.column}
        if spec.unique_window is not None:
            unique["window"] = int(spec.unique_window.total_seconds())
        binding["unique"] = unique
    title = spec.qualified_name if group is None else f"{spec.qualified_name}, group {group}"
    if every:
        title = f"{spec.qualified_name}, every group"
    channel: dict[str, Any] = {"address": spec.qualified_name, "title": title}
    doc = _own_doc(spec.row_type)
    if doc:
        channel["description"] = doc
    channel["servers"] = [{"$ref": f"#/servers/{server}"}]
    channel["messages"] = {}
    channel["bindings"] = {BINDING: binding}
    return channel


def _operation(mount: Mount, spec: TableSpec, channel: str, message: str) -> dict[str, Any]:
    queue = mount.subscriber.queue
    handler = mount.subscriber.handler
    binding: dict[str, Any] = {
        "bindingVersion": BINDING_VERSION,
        "handler": _handler_name(handler, qualified=True),
        "workers": queue.worker_count,
    }
    if queue.batch_size is not None:
        binding["batch"] = queue.batch_size
    binding["transactional"] = queue.mode is Transactional
    if mount.subscriber.routed is not None:
        binding["byName"] = True
    binding["pollInterval"] = _seconds(queue.poll_every or mount.broker.poll_interval)
    if spec.form is Lease:
        binding["lease"] = _seconds(queue.lease_for or mount.broker.lease)
    if mount.attempts is not None:
        binding["maxAttempts"] = mount.attempts
    if mount.dead_letter_to is not None:
        binding["deadLetter"] = mount.dead_letter_to
    if queue.group_names is not None:
        binding["relay"] = list(queue.group_names.written)
    if queue.tracker is not None:
        # The seen-records table its handler runs once per outbox record by, and its name there.
        binding["tracked"] = {
            "table": queue.tracker.label,
            "consumer": consumer_of(queue.tracker, spec, queue.name),
        }
    if queue.custom is not None:
        binding["customClaim"] = _handler_name(queue.custom.claim, qualified=True)
        if queue.custom.fetch is not None:
            binding["customFetch"] = _handler_name(queue.custom.fetch, qualified=True)
    operation: dict[str, Any] = {
        "action": "receive",
        "channel": {"$ref": f"#/channels/{channel}"},
        "title": _handler_name(handler, qualified=False),
    }
    doc = inspect.getdoc(handler)
    if doc:
        operation["description"] = doc
    operation["messages"] = [{"$ref": f"#/channels/{channel}/messages/{message}"}]
    operation["bindings"] = {BINDING: binding}
    return operation


def _content_type(codec: object, plan: HandlerPlan) -> str | None:
    """What the payload column holds: JSON, raw bytes, or what a custom codec's
    ``content_type`` attribute says (left out when it has none)."""
    if isinstance(codec, RawCodec) or plan.message_type is bytes:
        return _OCTETS
    if isinstance(codec, JsonCodec):
        return _JSON
    found = getattr(codec, "content_type", None)
    return found if isinstance(found, str) else None


def _seconds(value: timedelta) -> float | int:
    seconds = value.total_seconds()
    return int(seconds) if seconds.is_integer() else seconds


def _handler_name(handler: object, *, qualified: bool) -> str:
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    if not qualified:
        return str(getattr(target, "__name__", name))
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def _own_doc(cls: type | None) -> str:
    """A class's own docstring: not one a base class would lend it, nor the signature a
    dataclass-like class writes when it has none."""
    if cls is None:
        return ""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or doc.startswith(f"{cls.__name__}("):
        return ""
    return inspect.cleandoc(doc)


# -- names ----------------------------------------------------------------------------------------


def _safe(text: str) -> str:
    """A components or channels key: AsyncAPI keys match ``^[\\w\\d.\\-_]+$``."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", text) or "_"


def _unique(name: str, taken: dict[str, Any]) -> str:
    found, n = name, 2
    while found in taken:
        found, n = f"{name}_{n}", n + 1
    return found


def _type_name(tp: object) -> str:
    if isinstance(tp, type):
        return _safe(tp.__name__)
    return _safe(str(tp).replace("typing.", ""))


# -- payload schemas ------------------------------------------------------------------------------


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _is_pydantic_model(tp: object) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema")


class _SchemaBook:
    """The document's ``components.schemas``: each library's definitions merged in, a name
    taken twice by different schemas renamed (and the ``$ref``s to it rewritten)."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def payload(self, tp: object) -> dict[str, Any]:
        """The schema of a message type: a ``$ref`` for named types, inline for the rest."""
        if tp in (bytes, bytearray, memoryview):
            return dict(_BINARY)
        schema = self._schema(tp)
        if "$ref" not in schema and isinstance(tp, type) and schema.get("type") == "object":
            return self._named(_type_name(tp), schema)
        return schema

    def row(self, spec: TableSpec) -> dict[str, Any]:
        """Row mode: the row's columns (those the publish leaves out read-only: the generated
        ones, an OriginGroup and a Result); a nullable column is there with a null value. A Headers
        column is the message's headers, not its payload (the handler's row holds none)."""
        properties: dict[str, Any] = {}
        for col in spec.columns:
            if col.role == "headers":
                continue
            column = _BINARY if col.python_type is bytes else self._schema(col.python_type)
            if col.generated or col.role in ("origin_group", "result"):
                # Draft 7 ignores the siblings of a $ref, so a referenced type is wrapped.
                column = (
                    {"allOf": [column], "readOnly": True}
                    if "$ref" in column
                    else {**column, "readOnly": True}
                )
            properties[col.column] = dict(column)
        row_type = spec.row_type
        name = row_type.__name__ if row_type is not None else spec.table
        schema: dict[str, Any] = {"title": name, "type": "object"}
        doc = _own_doc(row_type)
        if doc:
            schema["description"] = doc
        schema["properties"] = properties
        schema["required"] = list(properties)
        return self._named(_safe(name), schema)

    def _named(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        renames = self._merge({name: schema})
        return {"$ref": _REF.format(name=renames[name])}

    def _schema(self, tp: object) -> dict[str, Any]:
        """A type's schema through msgspec (pydantic models, and what msgspec cannot
        describe, through pydantic), its definitions merged into the book."""
        if tp is None:
            return {}
        what = getattr(tp, "__qualname__", None) or repr(tp)
        msgspec = None if _is_pydantic_model(tp) else _optional("msgspec")
        pydantic = _optional("pydantic")
        refused = ""
        if msgspec is not None:
            try:
                (found,), defs = msgspec.json.schema_components([tp], ref_template=_REF)
            except TypeError as exc:
                refused = f"msgspec cannot describe it ({str(exc).splitlines()[-1]})"
            else:
                return dict(_rewrite(found, self._merge(defs)))
        if pydantic is None:
            if refused:
                msg = (
                    f"the AsyncAPI document describes the payload type {what}, but {refused} "
                    f"and pydantic is not installed; install pydantic or use a type msgspec "
                    f"describes"
                )
                raise UndescribableType(msg)
            msg = (
                f"the AsyncAPI document describes payloads through msgspec or pydantic, found "
                f"neither installed to describe {what}; pip install msgspec (or pydantic)"
            )
            raise ImportError(msg, name="msgspec")
        try:
            schema: dict[str, Any] = pydantic.TypeAdapter(tp).json_schema(
                ref_template=_REF.replace("{name}", "{model}")
            )
        except pydantic.PydanticUserError as exc:
            reason = str(exc).splitlines()[0]  # pydantic's first line; the rest is advice
            msg = (
                f"the AsyncAPI document describes the payload type {what}, but "
                f"{refused + ' and ' if refused else ''}pydantic cannot describe it ({reason}); "
                f"use a dataclass, msgspec Struct, pydantic model or TypedDict"
            )
            raise UndescribableType(msg) from exc
        defs = schema.pop("$defs", {})
        return dict(_rewrite(schema, self._merge(defs)))

    def _merge(self, defs: dict[str, Any]) -> dict[str, str]:
        renames: dict[str, str] = {}
        for name, schema in defs.items():
            target = _safe(name)
            n = 2
            while target in self.schemas and self.schemas[target] != schema:
                target, n = f"{_safe(name)}_{n}", n + 1
            renames[name] = target
        for name, schema in defs.items():
            self.schemas[renames[name]] = _rewrite(schema, renames)
        return renames


def _rewrite(node: Any, renames: dict[str, str]) -> Any:
    """``node`` with every ``$ref`` to a renamed definition pointing at its new name."""
    if isinstance(node, dict):
        items = cast("dict[str, Any]", node).items()
        out = {k: _rewrite(v, renames) for k, v in items}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF.format(name="")):
            old = ref[len(_REF.format(name="")) :]
            out["$ref"] = _REF.format(name=renames.get(old, old))
        return out
    if isinstance(node, list):
        # mypy narrows node to list[Any], pyright to list[Unknown]: the cast is for pyright.
        return [_rewrite(v, renames) for v in cast("list[Any]", node)]  # type: ignore[redundant-cast]
    return node
