"""``Publisher``: a queue's publishing end, typed by its message.

``broker.publish(Row, message, **columns)`` checks the row class and the broker's dialect, but
not the message: the message type of a queue is its handler's parameter, which no row class
carries. A ``Publisher`` names it once, beside the queue, so that type checkers refuse a message
of another type on every publish::

    emails = Publisher(InboxQueue(Outbox, "emails"), Email)
    await emails.publish(broker, Email(to="a@example.com"))   # fills the Group field: "emails"
    await emails.publish(broker, "hello")                     # mypy: Argument 2 ... "Email"

Publishing goes through ``broker.publish`` / ``tx.publish`` (``publish_many``: their
``publish_many``), so it behaves as they do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, Generic, TypeVar, final, is_typeddict

from .._api.handles import Tx
from .._api.message import Message
from .._api.published import OnDuplicate, Published
from .._api.queue import InboxQueue
from .._declare._capabilities import RowOf, Serves
from .._declare._inbox import spec_of
from .._declare._markers import Form
from ..errors import DeclarationError
from .broker import SqlBroker
from .many import CHUNK

__all__ = ["Publisher"]

R = TypeVar("R", bound=RowOf[Any, Any], covariant=True)
T = TypeVar("T")
F = TypeVar("F", bound=Form)


@final
class Publisher(Generic[R, T]):
    """Publishes messages of type ``T`` into ``queue``: its row class's table and, with a
    ``Group`` field, its name as the group."""

    def __init__(self, queue: InboxQueue[R, Any], message: type[T]) -> None:
        spec = spec_of(queue.row)
        if spec.payload is None:
            msg = (
                f"a Publisher encodes its message into the table's Payload field, found "
                f"{spec.label} without one; publish its rows with "
                f"broker.publish({queue.row.__qualname__}, field=...) or "
                f"broker.publish_row({queue.row.__qualname__}(...))"
            )
            raise DeclarationError(msg)
        self.queue = queue
        self.message = message
        self._group = None if spec.group is None else spec.group.field

    def __repr__(self) -> str:
        name = getattr(self.message, "__qualname__", repr(self.message))
        return f"<Publisher of {name} into {self.queue.name!r} of {self.queue.row.__qualname__}>"

    async def publish(
        self: Publisher[RowOf[F, Any], T],
        to: SqlBroker[Serves[tuple[F, Any]]] | Tx[Serves[tuple[F, Any]]],
        message: T,
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        unique: str | None = None,
        on_duplicate: OnDuplicate = "return",
        **columns: object,
    ) -> Published:
        """Write ``message`` into the queue, through ``broker.publish`` or, inside a
        transaction, ``tx.publish``; ``columns`` give the row's other fields by name,
        ``headers`` go into its Headers field, ``unique`` into its Unique field (the row
        holding the key comes back, as ``publish`` returns it)."""
        self._check_message(message)
        fields = self._columns(columns)
        if isinstance(to, Tx):
            return await to.publish(
                self.queue.row,
                message,
                delay=delay,
                headers=headers,
                unique=unique,
                on_duplicate=on_duplicate,
                **fields,
            )
        return await to.publish(
            self.queue.row,
            message,
            delay=delay,
            headers=headers,
            unique=unique,
            on_duplicate=on_duplicate,
            **fields,
        )

    async def publish_many(
        self: Publisher[RowOf[F, Any], T],
        to: SqlBroker[Serves[tuple[F, Any]]] | Tx[Serves[tuple[F, Any]]],
        messages: Iterable[T | Message],
        *,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
        on_duplicate: OnDuplicate = "return",
        chunk: int = CHUNK,
        **columns: object,
    ) -> list[Published]:
        """Write ``messages`` into the queue in one batch, through ``broker.publish_many``
        or, inside a transaction, ``tx.publish_many``: one row per message, with what the call
        shares, or a ``Message`` wrapping one with fields of its own (never another group)."""
        items = [self._item(message) for message in messages]
        fields = self._columns(columns)
        if isinstance(to, Tx):
            return await to.publish_many(
                self.queue.row,
                items,
                delay=delay,
                headers=headers,
                on_duplicate=on_duplicate,
                chunk=chunk,
                **fields,
            )
        return await to.publish_many(
            self.queue.row,
            items,
            delay=delay,
            headers=headers,
            on_duplicate=on_duplicate,
            chunk=chunk,
            **fields,
        )

    def _item(self, item: object) -> object:
        """A batch item checked as a publish checks its message: a ``Message``'s message
        and its own columns too."""
        if not isinstance(item, Message):
            self._check_message(item)
            return item
        self._check_message(item.message)
        self._columns(item.columns)
        return item

    def _check_message(self, message: object) -> None:
        """What type checkers check, checked at runtime too where ``isinstance`` can (not for a
        TypedDict or a protocol)."""
        kind: object = self.message
        if not isinstance(kind, type) or is_typeddict(kind):  # pyright: ignore[reportUnnecessaryIsInstance]
            return
        try:
            fits = isinstance(message, kind)
        except TypeError:
            return
        if not fits:
            msg = (
                f"a Publisher of {kind.__qualname__} publishes {kind.__qualname__} messages "
                f"into {self.queue.name!r} of {self.queue.row.__qualname__}, found "
                f"{type(message).__qualname__}; publish an instance of {kind.__qualname__}, "
                f"or make a Publisher of the queue's message type"
            )
            raise DeclarationError(msg)

    def _columns(self, columns: dict[str, object]) -> dict[str, object]:
        """The given fields and the queue's group (the queue's name)."""
        if self._group is None:
            return columns
        given = columns.get(self._group, self.queue.name)
        if given != self.queue.name:
            msg = (
                f"a Publisher writes into its queue's group, found {self._group}={given!r} "
                f"for the queue {self.queue.name!r}; leave {self._group}= out, or publish "
                f"with a Publisher of InboxQueue({self.queue.row.__qualname__}, {given!r})"
            )
            raise DeclarationError(msg)
        return {**columns, self._group: self.queue.name}
