"""What type checkers see a handler that breaks a rule become: a named type nothing mounts.

``subscriber(queue)(handler)`` has one overload per handler rule (queue.py); a handler that
breaks one gets back the type below that names the rule instead of a ``Subscriber``, and no
overload of ``App.include`` takes it (mypy: No overload variant of "include" of "App" matches
argument types "SqlBroker[Sqlite]", "BatchTakesNoRowKeys"). Nothing is ever of these types: at
runtime the same handlers fail where they are bound or when the app starts (handler.py).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias, final

from .._declare._capabilities import RowOf

__all__ = [
    "BatchTakesAList",
    "BatchTakesNoRowKeys",
    "ContextKeyNotOptional",
    "DecorateWithSubscriber",
    "HandlerTakesAnotherRow",
    "ListNeedsBatch",
    "NotAContextKey",
    "NotAHandler",
    "OutcomeListNeedsBatch",
    "PayloadHandlerTakesTheMessage",
    "PayloadRow",
    "Row",
    "TxNeedsTransactional",
]


class _Refusal:
    def __new__(cls) -> _Refusal:
        msg = f"{cls.__name__} names a handler rule for type checkers and is never instantiated"
        raise TypeError(msg)


@final
class TxNeedsTransactional(_Refusal):
    """A handler taking ``keys.Tx`` on a plain queue: the delivery's transaction is lent only
    in transactional mode; subscribe with ``InboxQueue(Row, name).transactional()``."""


@final
class BatchTakesNoRowKeys(_Refusal):
    """A batch handler taking ``keys.Attempt``, ``keys.RowId`` or ``keys.Tx``: a batch has an
    attempt, an id and a transaction per row, not per call; read them from the rows (row mode),
    or drop ``.batch(n)``."""


@final
class BatchTakesAList(_Refusal):
    """A batch handler whose message is not a list: after ``.batch(n)`` the handler takes
    ``list[Row]`` (row mode) or ``list[Message]`` (payload mode)."""


@final
class ListNeedsBatch(_Refusal):
    """A handler taking ``list[Row]`` on a queue without ``.batch(n)``: rows come one by one
    unless the queue batches them; add ``.batch(n)`` or take one row."""


@final
class OutcomeListNeedsBatch(_Refusal):
    """A handler returning a list of outcomes on a queue without ``.batch(n)``: one delivery
    has one outcome; return a ``HandlerOutcome`` (or ``None``)."""


@final
class HandlerTakesAnotherRow(_Refusal):
    """A handler whose message is a row class other than its queue's: a row-mode handler takes
    its queue's row class, a payload-mode one the decoded message."""


@final
class PayloadHandlerTakesTheMessage(_Refusal):
    """A handler taking the row class on a table with a ``payload`` field: its handler takes
    the decoded payload (a dataclass, msgspec Struct, pydantic model, TypedDict or ``bytes``),
    never the row. (A type checker sees a payload field by its name and type, ``payload: bytes``;
    handler.py checks it at runtime by its ``Payload()`` role.)"""


@final
class ContextKeyNotOptional(_Refusal):
    """A context key annotated ``keys.X | None`` (or with a ``None`` default): trinbox always
    passes the keys a handler takes; annotate it ``keys.X``."""


@final
class NotAContextKey(_Refusal):
    """A further parameter annotated ``int`` or ``object``: a handler's parameters after the
    message are context keys, ``keys.Attempt``, ``keys.RowId``, ``keys.Pool`` or
    ``keys.Tx``."""


@final
class NotAHandler(_Refusal):
    """Anything else: a handler is an ``async def`` taking the message, then context keys
    (``keys.Attempt``, ``keys.RowId``, ``keys.Pool``, ``keys.Tx`` in transactional mode,
    each once), and
    returning a ``HandlerOutcome`` or ``None`` (a list of them in a batch)."""


@final
class DecorateWithSubscriber(_Refusal):
    """What ``Subscriber(..)`` takes for type checkers: a subscriber is made by decorating its
    handler, ``@subscriber(InboxQueue(Row, name))``, which checks the handler against its
    queue."""


Row: TypeAlias = RowOf[Any, Any]
"""A row class's instance (every ``Inbox`` subclass's)."""


class PayloadRow(RowOf[Any, Any], Protocol):
    """A row with a ``bytes`` field named ``payload``: the name every payload table in the docs
    uses, and the only sign of payload mode a type checker can see (``Payload()`` is
    ``Annotated`` metadata, which type checkers do not read). A payload field of another name is
    checked at startup only; a data field ``payload: bytes`` in row mode would be taken for
    one (declare it ``Payload()``, or name it otherwise)."""

    @property
    def payload(self) -> bytes: ...
