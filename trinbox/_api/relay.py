"""A relay: trinbox's own lease subscription of an outbox record table, which hands each
record to a sink the service gives (an async callable: a Kafka or AMQP producer, an HTTP
client) and marks it processed, or deletes it, once the sink returned.

    @relay(InboxQueue(OrderEvents, "kafka").workers(4), names=["orders.*"])
    async def to_kafka(record: Record) -> None:
        await producer.send(record.name, record.payload, headers=record.headers)

    app.include(broker, to_kafka)

A relay is a ``Subscriber``, mounted as any other: its claim is the lease form's over the
groups it names (every name unless ``names=`` says), so relays in many processes take each
record once while it is in work, a sink that raises is retried after the queue's backoff, a
process that dies mid-send leaves its records to the next claim once their lease ends, and
statistics, events and shutdown are a subscription's. At least once: the sink may see a
record again (a process that died after the send, before the mark committed), and the
record's id travels in its headers (``ID_HEADER``) for the receiver to tell.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeAlias, final

from typing_extensions import TypeVar

from .._declare._group_names import group_names
from .._declare._inbox import spec_of
from .._declare._markers import Default, Lease, Plain, Transactional
from .._declare._outbox import Outbox
from .._declare._spec import TableSpec
from .._util import evolve
from ..errors import DeclarationError
from .headers import ID_HEADER
from .outcome import HandlerOutcome
from .queue import InboxQueue, Needs, Single, Subscriber, bind

__all__ = [
    "ID_HEADER",
    "Forwarding",
    "Record",
    "RelayFactory",
    "RelayHandler",
    "Sink",
    "into",
    "relay",
]


@final
@dataclass(frozen=True, slots=True)
class Record:
    """One outbox record, as its sink receives it: its ``id``, typed as the row class types
    its ``Id`` field; its ``name`` (the Group field); its ``payload``, the bytes the publish
    wrote (the codec's encoding of the message); ``headers``, what the receiver should get
    with it: the record's own (its ``Headers`` field, where the table has one) and its id
    under ``ID_HEADER``; and ``attempt``, 1 on the record's first
    delivery (always 1 on a table without an ``Attempt`` field)."""

    id: object
    name: str
    payload: bytes
    headers: Mapping[str, str]
    attempt: int


class Sink(Protocol):
    """What a relay serves its records to: an async callable taking a ``Record``, returning
    ``None`` (sent: the record is marked processed, or deleted) or a ``HandlerOutcome``
    (``retry_after(d)`` to try again later, ``drop()`` to give the record up, marked as
    sent); an exception retries it after the queue's backoff."""

    def __call__(self, record: Record, /) -> Awaitable[HandlerOutcome | None]: ...


class Forwarding(Protocol):
    """What ``into`` relays records into: a ``SqlBroker`` (of any database)."""

    async def forward(self, name: str, payload: bytes, headers: Mapping[str, str]) -> None: ...


def into(broker: Forwarding) -> Sink:
    """A sink that writes each record into another trinbox broker (another database, or the
    same one's other queue): by the record's name, where that broker's routes lead it
    (``broker.route(Row, "orders.*")``; an unrouted name raises ``NoRoute``, and the record
    is tried again after the relay's backoff), its payload's bytes as they are, its headers
    with its id under ``ID_HEADER``, which the receiving subscription's ``.tracked(...)``
    reads to run its handler once per record. The receiving table needs a Headers field."""
    forward = broker.forward  # a missing method fails here, not at the first record

    async def into_broker(record: Record) -> None:
        await forward(record.name, record.payload, record.headers)

    return into_broker


OB = TypeVar("OB", bound=Outbox)

RelayHandler: TypeAlias = Callable[[OB], Awaitable[HandlerOutcome | None]]
"""A relay's handler: trinbox's, taking the claimed row, handing its sink the ``Record``."""


def relay(
    queue: InboxQueue[OB, Plain, Single], *, names: Sequence[str] | None = None
) -> RelayFactory[OB]:
    """A relay of ``queue``'s outbox records to the sink it decorates (or is called with):
    the records of every name, or those of ``names`` (a name as written, or a prefix ending
    in ``*``: ``"orders.*"``); the queue's name is then a label. The queue's settings
    (``workers``, ``lease``, ``poll_interval``, ``backoff``, ``on_failure``) are the relay's;
    a relay hands one record at a time outside the database, so ``.transactional()``,
    ``.batch(n)`` and ``.custom_claim()`` are refused."""
    if not isinstance(queue, InboxQueue):  # pyright: ignore[reportUnnecessaryIsInstance]
        msg = (
            f"relay takes an InboxQueue of an outbox record table, found {queue!r}; write "
            f"relay(InboxQueue(Records, 'label'))"
        )
        raise TypeError(msg)
    where = f"relay {queue.name!r} of {queue.row.__qualname__}"
    if not issubclass(queue.row, Outbox):
        spec = spec_of(queue.row)
        msg = (
            f"{where}: a relay serves the records of an outbox record table, found "
            f"{spec.label}, an Inbox[{spec.form.__name__}] table; declare "
            f"class {queue.row.__qualname__}(Outbox, table={spec.table!r})"
        )
        raise DeclarationError(msg)
    _refuse_options(where, queue)
    chosen = group_names(where, names)
    return RelayFactory(evolve(queue, group_names=chosen, whole_rows=True))


def _refuse_options(where: str, queue: InboxQueue[Any, Any, Any]) -> None:
    """The queue options a relay cannot serve (untyped callers reach here with them)."""
    found: tuple[str, str] | None = None
    if queue.mode is Transactional:
        rule = "a relay sends each record outside the database, in no transaction of its own"
        found = (rule, ".transactional()")
    elif queue.batch_size is not None:
        found = ("a relay hands its sink one record at a time", f".batch({queue.batch_size})")
    elif queue.custom is not None:
        found = ("a relay claims an outbox's records by name", ".custom_claim()")
    if found is not None:
        rule, option = found
        msg = f"{where}: {rule}, found {option}; drop it"
        raise DeclarationError(msg)


@final
class RelayFactory(Generic[OB]):
    """What ``relay(queue)`` returns: call it with the sink (or decorate the sink with it)."""

    def __init__(self, queue: InboxQueue[OB, Any, Any]) -> None:
        self._queue = queue

    def __call__(
        self, sink: Sink
    ) -> Subscriber[OB, Plain, RelayHandler[OB], Needs[OB, Lease, Default, Plain] | None]:
        queue = self._queue
        _check_sink(sink, queue)
        made: Subscriber[OB, Plain, RelayHandler[OB], Needs[OB, Lease, Default, Plain] | None]
        made = bind(queue, _relaying(spec_of(queue.row), sink))
        return made


def _check_sink(sink: object, queue: InboxQueue[Any, Any, Any]) -> None:
    """A sink is an async callable: a plain function would fail on every record."""
    target: object = sink
    while isinstance(target, functools.partial):
        target = target.func
    if not callable(sink) or not (
        inspect.iscoroutinefunction(target)
        or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004
    ):
        shown = getattr(sink, "__qualname__", repr(sink))
        msg = (
            f"relay {queue.name!r} of {queue.row.__qualname__}: a sink is an async callable "
            f"taking a Record, found {shown}; declare it `async def`"
        )
        raise TypeError(msg)


_NONE: Mapping[str, str] = MappingProxyType({})


def _relaying(spec: TableSpec, sink: Sink) -> RelayHandler[Any]:
    """trinbox's handler of a relay: the claimed row as a ``Record``, handed to the sink; what
    the sink returns is the delivery's outcome. It names itself as the sink does, so logs,
    statistics and the AsyncAPI document name the sink."""
    ident, name, payload = spec.id.field, spec.group, spec.payload
    assert name is not None and payload is not None  # check_record
    attempt = spec.attempt.field if spec.attempt is not None else None

    async def relay_record(row: Any, own: Mapping[str, str] = _NONE) -> HandlerOutcome | None:
        record_id = getattr(row, ident)
        # The record's own headers (its Headers field, read as keys.Headers reads them), then
        # its id: a publish refuses the reserved trinbox- prefix, so no header of its is that.
        headers = {**own, ID_HEADER: str(record_id)}
        record = Record(
            id=record_id,
            name=getattr(row, name.field),
            payload=getattr(row, payload.field) or b"",
            headers=MappingProxyType(headers),
            attempt=getattr(row, attempt) if attempt is not None else 1,
        )
        return await sink(record)

    return functools.update_wrapper(
        relay_record,
        sink,
        assigned=("__module__", "__name__", "__qualname__", "__doc__"),
        updated=(),
    )
