"""``subscriber(queue)``: the decorator that binds a handler to its queue, and the handler
rules as types.

``subscriber(queue)`` returns one factory per kind of queue (plain, transactional, batched;
``InboxQueue._subscribe`` picks it by the queue's type); each factory's overloads are the static
half of handler.py's rules. They are tried in order and the
first that matches wins: the refusals of a mistake come before the shapes that accept, and each
refusal returns the named type of its rule (refusals.py), which ``App.include`` does not mount.
An accepted handler becomes a ``Subscriber`` that keeps its type.

The order is the design: a handler that matches a refusal and a later shape is meant to get
the refusal, so mypy's ``overload-overlap`` and pyright's ``reportOverlappingOverload`` reports
are off in this module.
"""

# mypy: disable-error-code="overload-overlap"
# pyright: reportOverlappingOverload=false

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, Generic, Protocol, TypeAlias, cast, final, overload

from typing_extensions import TypeVar

from .._declare._inbox import Inbox
from .._declare._markers import Form, Opening, Plain, Transactional
from .handles import AnyTx, Attempt, Pool, RowId
from .outcome import HandlerOutcome
from .queue import InboxQueue
from .refusals import (
    BatchTakesAList,
    BatchTakesNoRowKeys,
    ContextKeyNotOptional,
    HandlerTakesAnotherRow,
    ListNeedsBatch,
    NotAContextKey,
    NotAHandler,
    OutcomeListNeedsBatch,
    PayloadHandlerTakesTheMessage,
    PayloadRow,
    Row,
    TxNeedsTransactional,
)
from .subscribers import Needs, Subscriber, bind

__all__ = [
    "BatchSubscriberFactory",
    "Subscribable",
    "SubscriberFactory",
    "TransactionalSubscriberFactory",
    "factory_for",
    "subscriber",
]

R = TypeVar("R", bound=Row, covariant=True)
T = TypeVar("T")
# Another row class (a nominal bound: mypy's notes print it, "def [S: Inbox[Any, Any]] ...").
S = TypeVar("S", bound=Inbox[Any, Any])
PR = TypeVar("PR", bound=PayloadRow)
X1 = TypeVar("X1", bound=HandlerOutcome | None)
XN = TypeVar("XN", bound=HandlerOutcome | Sequence[HandlerOutcome] | None)
HH = TypeVar("HH")
F = TypeVar("F", bound=Form, covariant=True)
O = TypeVar("O", bound=Opening, covariant=True)  # noqa: E741
Made = TypeVar("Made", covariant=True)
G = TypeVar("G")

# The context keys a handler takes (each may repeat for mypy; handler.py refuses a repeat).
K1 = TypeVar("K1", Attempt, Pool, RowId)
K2 = TypeVar("K2", Attempt, Pool, RowId)
K3 = TypeVar("K3", Attempt, Pool, RowId)
X1K = TypeVar("X1K", Attempt, Pool, RowId, AnyTx)
X2K = TypeVar("X2K", Attempt, Pool, RowId, AnyTx)
X3K = TypeVar("X3K", Attempt, Pool, RowId, AnyTx)
X4K = TypeVar("X4K", Attempt, Pool, RowId, AnyTx)

# What a decorated handler becomes: its row, mode and handler, and what it needs of a dialect,
# the row's form and opening included (F, O: InboxQueue._subscribe reads them off the row).
_Plain: TypeAlias = Subscriber[R, Plain, HH, Needs[R, F, O, Plain] | None]
_InTx: TypeAlias = Subscriber[R, Transactional, HH, Needs[R, F, O, Transactional] | None]


class _Factory(Generic[R, F, O]):
    def __init__(self, queue: InboxQueue[Any, Any, Any]) -> None:
        self._queue = queue


@final
class SubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns for a plain queue: decorate the handler with it."""

    # further parameters: context keys, never optional
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    # keys.Tx only in transactional mode
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, AnyTx, ...], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, AnyTx, ...], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, AnyTx, ...], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Any, AnyTx, ...], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    # one outcome per delivery
    @overload
    def __call__(
        self, fn: Callable[..., Awaitable[Sequence[HandlerOutcome]]]
    ) -> OutcomeListNeedsBatch: ...
    # the message: the row (row mode) or the decoded payload (any type, object too)
    @overload
    def __call__(
        self, fn: Callable[[object], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, K2], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, K2, K3], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2, K3], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self: SubscriberFactory[PayloadRow, Any, Any], fn: Callable[Concatenate[PR, ...], object]
    ) -> PayloadHandlerTakesTheMessage: ...
    @overload
    def __call__(
        self, fn: Callable[[R], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, K2], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, K2, K3], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2, K3], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[R, ...], object]) -> NotAHandler: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[list[S], ...], object]) -> ListNeedsBatch: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[S, ...], object]) -> HandlerTakesAnotherRow: ...
    @overload
    def __call__(
        self, fn: Callable[[T], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, K3], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2, K3], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> NotAHandler: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return bind(self._queue, fn)


@final
class TransactionalSubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns for a ``.transactional()`` queue: its handler may
    take ``keys.Tx``."""

    # further parameters: context keys, never optional
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    # one outcome per delivery
    @overload
    def __call__(
        self, fn: Callable[..., Awaitable[Sequence[HandlerOutcome]]]
    ) -> OutcomeListNeedsBatch: ...
    # the message: the row (row mode) or the decoded payload (any type, object too)
    @overload
    def __call__(
        self, fn: Callable[[object], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, X3K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, X3K, X4K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K, X4K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self: TransactionalSubscriberFactory[PayloadRow, Any, Any],
        fn: Callable[Concatenate[PR, ...], object],
    ) -> PayloadHandlerTakesTheMessage: ...
    @overload
    def __call__(
        self, fn: Callable[[R], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K, X4K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K, X4K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[R, ...], object]) -> NotAHandler: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[list[S], ...], object]) -> ListNeedsBatch: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[S, ...], object]) -> HandlerTakesAnotherRow: ...
    @overload
    def __call__(
        self, fn: Callable[[T], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K, X4K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K, X4K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> NotAHandler: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return bind(self._queue, fn)


@final
class BatchSubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns after ``.batch(n)``: the handler takes a list and no
    per-row key."""

    # further parameters: context keys, never optional
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, None, ...], Awaitable[object]]
    ) -> ContextKeyNotOptional: ...
    # no per-row key in a batch
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Attempt, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Attempt, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, RowId, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, RowId, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, AnyTx, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, AnyTx, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    # the message: a list of rows or messages
    @overload
    def __call__(self, fn: Callable[Concatenate[object, ...], object]) -> BatchTakesAList: ...
    @overload
    def __call__(
        self: BatchSubscriberFactory[PayloadRow, Any, Any],
        fn: Callable[Concatenate[list[PR], ...], object],
    ) -> PayloadHandlerTakesTheMessage: ...
    @overload
    def __call__(
        self, fn: Callable[[list[R]], Awaitable[XN]]
    ) -> _Plain[R, Callable[[list[R]], Awaitable[XN]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[list[R], Pool], Awaitable[XN]]
    ) -> _Plain[R, Callable[[list[R], Pool], Awaitable[XN]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[list[R], ...], object]) -> NotAHandler: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[list[S], ...], object]
    ) -> HandlerTakesAnotherRow: ...
    @overload
    def __call__(
        self, fn: Callable[[list[T]], Awaitable[XN]]
    ) -> _Plain[R, Callable[[list[T]], Awaitable[XN]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[list[T], Pool], Awaitable[XN]]
    ) -> _Plain[R, Callable[[list[T], Pool], Awaitable[XN]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[list[Any], ...], object]) -> NotAHandler: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> BatchTakesAList: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return bind(self._queue, fn)


class Subscribable(Protocol[Made]):
    """A queue, as ``subscriber`` reads it: ``InboxQueue._subscribe`` names its factory by the
    queue's mode and shape (a method's self type, so that a queue typed ``InboxQueue[Any, Any]``
    gets the plain factory rather than ``Any``)."""

    def _subscribe(self) -> Made: ...


def subscriber(queue: Subscribable[G]) -> G:
    """Bind the decorated handler to ``queue``.

    The handler's first parameter is the message: the payload decoded into its annotation (a
    dataclass, msgspec Struct, pydantic model, TypedDict or ``bytes``), the row itself in row
    mode (no ``Payload`` field), or a ``list`` of either with ``.batch(n)``. Further
    parameters are context keys: ``keys.Attempt``, ``keys.RowId``, ``keys.Pool``, and in
    transactional mode ``keys.Tx``, each once (a batch takes ``keys.Pool`` only). It returns a
    ``HandlerOutcome`` (``None`` is ack; a batch may return one per row).
    """
    # At runtime the queue's kind is read off its settings (factory_for), for any caller.
    return cast("G", factory_for(cast("InboxQueue[Any, Any, Any]", queue)))


def factory_for(queue: InboxQueue[Any, Any, Any]) -> _Factory[Any, Any, Any]:
    """The factory of ``queue``'s kind (what ``InboxQueue._subscribe`` returns at runtime)."""
    if not isinstance(queue, InboxQueue):  # pyright: ignore[reportUnnecessaryIsInstance]
        msg = (
            f"subscriber takes an InboxQueue, found {queue!r}; write "
            f"subscriber(InboxQueue(Row, name))"
        )
        raise TypeError(msg)
    if queue.batch_size is not None:
        return BatchSubscriberFactory(queue)
    if queue.mode is Transactional:
        return TransactionalSubscriberFactory(queue)
    return SubscriberFactory(queue)
