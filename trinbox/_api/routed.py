"""Subscriptions by name: ``RoutedQueue("orders.created")`` serves the rows of that name in
the table the broker's routes lead it into, as ``InboxQueue(Row, "orders.created")`` would.

The queue names no row class, so its handler and settings are checked against the table when
``App.include(broker, subscriber)`` mounts it: the broker's routes lead the name to its row
class there (declare the route first), and the ``RoutedSubscriber`` becomes the
``Subscriber`` of that ``InboxQueue``, which serves like any other. The table must have a
``Group`` field (the name is its group) and a ``Payload`` field (routes lead only into such
tables). As the reference does, a subscription by name is never transactional and has no dead
letter destination: subscribe with ``InboxQueue`` for those.

The decorator's overloads are the static half of the handler rules (queue.py): the handler
takes the decoded message, then context keys (``keys.Out`` last), never ``keys.Tx``.
"""

# mypy: disable-error-code="overload-overlap"
# pyright: reportOverlappingOverload=false

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Generic, NoReturn, final, overload

from typing_extensions import TypeVar

from .._declare._inbox import Inbox
from .._util import evolve, positive_duration
from ..errors import DeclarationError
from .backoff import Backoff, require_backoff
from .codecs import Codec, JsonCodec
from .handles import AnyTx, Attempt, Out, Pool, RowId
from .outcome import HandlerOutcome, OnFailure
from .queue import Batched, InboxQueue, Single, Subscriber, bind, check_handler
from .refusals import (
    BatchTakesAList,
    BatchTakesNoRowKeys,
    ContextKeyNotOptional,
    DecorateWithSubscriber,
    ListNeedsBatch,
    NotAContextKey,
    NotAHandler,
    OutcomeListNeedsBatch,
    PayloadHandlerTakesTheMessage,
    TxNeedsTransactional,
)
from .routes import Routes, check_name

__all__ = [
    "ByNameNeverTransactional",
    "RoutedBatchSubscriberFactory",
    "RoutedQueue",
    "RoutedSubscriber",
    "RoutedSubscriberFactory",
]

B = TypeVar("B", bound=Single | Batched, covariant=True, default=Single)
H = TypeVar("H", covariant=True, default=Callable[..., Awaitable[object]])
T = TypeVar("T")
S = TypeVar("S", bound=Inbox[Any, Any])
X1 = TypeVar("X1", bound=HandlerOutcome | None)
XN = TypeVar("XN", bound=HandlerOutcome | Sequence[HandlerOutcome] | None)
K1 = TypeVar("K1", Attempt, Pool, RowId)
K2 = TypeVar("K2", Attempt, Pool, RowId)
K3 = TypeVar("K3", Attempt, Pool, RowId)


@final
class ByNameNeverTransactional:
    """What ``RoutedQueue.transactional()`` asks for, for type checkers, so that mypy reads:
    Missing positional argument "never" in call to "transactional" of "RoutedQueue". A
    subscription by name lends no delivery transaction: subscribe with
    ``InboxQueue(Row, name).transactional()``. Nothing is of this type."""


@final
@dataclass(frozen=True, slots=True, init=False)
class RoutedQueue(Generic[B]):
    """A subscription to the rows of the message name ``name``, in the table the broker's
    routes lead it into (its group ``name``). The settings are ``InboxQueue``'s; each returns
    a new queue."""

    name: str
    poll_every: timedelta | None
    lease_for: timedelta | None
    batch_size: int | None
    worker_count: int
    codec_used: Codec
    failure: OnFailure
    backoff_policy: Backoff | None

    def __init__(self, name: str) -> None:
        check_name(name, what="a subscription by name (RoutedQueue) names one message; its name")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "poll_every", None)
        object.__setattr__(self, "lease_for", None)
        object.__setattr__(self, "batch_size", None)
        object.__setattr__(self, "worker_count", 1)
        object.__setattr__(self, "codec_used", JsonCodec())
        object.__setattr__(self, "failure", OnFailure())
        object.__setattr__(self, "backoff_policy", None)

    def poll_interval(self, interval: timedelta | float) -> RoutedQueue[B]:
        """How long to wait after a claim that found fewer rows than it could take."""
        return evolve(self, poll_every=positive_duration("a poll interval", interval))

    def lease(self, lease: timedelta | float) -> RoutedQueue[B]:
        """How long a claim leases each row; the routed table must be a lease table (checked
        when the subscription is mounted)."""
        return evolve(self, lease_for=positive_duration("a lease", lease))

    def batch(self, size: int) -> RoutedQueue[Batched]:
        """Claim up to ``size`` rows at once and hand them to the handler as one list."""
        found: object = size  # untyped callers pass anything
        if not isinstance(found, int) or size < 1:
            msg = f"a batch holds one row or more, found batch({size!r}); pass a size >= 1"
            raise ValueError(msg)
        batched: RoutedQueue[Batched] = evolve(self, batch_size=size)  # type: ignore[arg-type]
        return batched

    def workers(self, count: int) -> RoutedQueue[B]:
        """How many deliveries (or batches) are in work at once."""
        if count < 1:
            msg = f"a subscription has one worker or more, found workers({count})"
            raise ValueError(msg)
        return evolve(self, worker_count=count)

    def codec(self, codec: Codec) -> RoutedQueue[B]:
        """The codec that decodes payloads (JSON unless set)."""
        return evolve(self, codec_used=codec)

    def on_failure(self, policy: OnFailure) -> RoutedQueue[B]:
        """What handler exceptions and undecodable rows become."""
        return evolve(self, failure=policy)

    def backoff(self, policy: Backoff) -> RoutedQueue[B]:
        """How long a row whose handler raised waits before it is claimable again."""
        return evolve(self, backoff_policy=require_backoff(policy))

    if TYPE_CHECKING:

        def transactional(self, never: ByNameNeverTransactional) -> ByNameNeverTransactional:
            """Refused: a subscription by name lends no delivery transaction."""
            ...

    else:

        def transactional(self, *_: object) -> NoReturn:
            msg = (
                f"a subscription by name is never transactional, found "
                f"RoutedQueue({self.name!r}).transactional(); subscribe with "
                f"InboxQueue(Row, {self.name!r}).transactional() instead"
            )
            raise DeclarationError(msg)

    @overload
    def _subscribe(self: RoutedQueue[Single]) -> RoutedSubscriberFactory: ...
    @overload
    def _subscribe(self: RoutedQueue[Batched]) -> RoutedBatchSubscriberFactory: ...
    def _subscribe(self) -> object:
        """The factory ``subscriber(self)`` returns, by the queue's shape."""
        if self.batch_size is not None:
            return RoutedBatchSubscriberFactory(self)
        return RoutedSubscriberFactory(self)

    def resolve(self, routes: Routes, *, where: str) -> InboxQueue[Any, Any, Any]:
        """The ``InboxQueue`` this queue is on a broker with these routes: its name's group of
        the table they lead it into, with this queue's settings."""
        name, route = routes.lead(self.name, where=where)
        spec = route.spec
        if spec.group is None:
            msg = (
                f"{where}: a subscription by name serves the rows of its name, found the name "
                f"{name!r} routed into {spec.label}, which has no Group field to tell them "
                f"from the rows of other names; subscribe with "
                f"InboxQueue({route.row.__qualname__}, {name!r}) to serve the whole table, or "
                f"route the name into a table with a Group field"
            )
            raise DeclarationError(msg)
        queue: InboxQueue[Any, Any, Any] = InboxQueue(route.row, name)
        if self.lease_for is not None:
            queue = queue.lease(self.lease_for)
        return evolve(
            queue,
            poll_every=self.poll_every,
            batch_size=self.batch_size,
            worker_count=self.worker_count,
            codec_used=self.codec_used,
            failure=self.failure,
            backoff_policy=self.backoff_policy,
        )


@final
class RoutedSubscriber(Generic[H]):
    """A handler bound to a subscription by name; ``App.include(broker, subscriber)`` mounts
    it on the table the broker's routes lead its name into. Made by decorating the handler,
    ``@subscriber(RoutedQueue(name))``."""

    queue: RoutedQueue[Any]
    handler: H

    def __init__(self, queue: DecorateWithSubscriber, handler: DecorateWithSubscriber) -> None:
        msg = (
            f"a RoutedSubscriber is made by decorating its handler, found "
            f"RoutedSubscriber({queue!r}, {getattr(handler, '__qualname__', handler)!r}); "
            f"write @subscriber(RoutedQueue(name)) above the async def"
        )
        raise TypeError(msg)

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<Subscriber {name} by name {self.queue.name!r}>"

    def mounted(self, routes: Routes, *, where: str) -> Subscriber[Any, Any]:
        """The subscriber of the ``InboxQueue`` this subscription is on a broker with these
        routes (what ``App.include`` mounts)."""
        made = bind(self.queue.resolve(routes, where=where), self.handler)
        made.routed = self
        return made


def _bind(queue: RoutedQueue[Any], handler: object) -> RoutedSubscriber[Any]:
    check_handler(handler, f"the subscription by name {queue.name!r}")
    made: RoutedSubscriber[Any] = object.__new__(RoutedSubscriber)
    made.queue = queue
    made.handler = handler
    return made


class _Factory:
    def __init__(self, queue: RoutedQueue[Any]) -> None:
        self._queue = queue


@final
class RoutedSubscriberFactory(_Factory):
    """What ``subscriber(RoutedQueue(name))`` returns: decorate the handler with it."""

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
    # keys.Tx only on a transactional InboxQueue
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
    # the message: decoded, never a row (routes lead into payload tables only)
    @overload
    def __call__(self, fn: Callable[Concatenate[list[S], ...], object]) -> ListNeedsBatch: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[S, ...], object]
    ) -> PayloadHandlerTakesTheMessage: ...
    @overload
    def __call__(
        self, fn: Callable[[T], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1, K2], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, K3], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1, K2, K3], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, Out], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, Out], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, Out], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1, Out], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, Out], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1, K2, Out], Awaitable[X1]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, K3, Out], Awaitable[X1]]
    ) -> RoutedSubscriber[Callable[[T, K1, K2, K3, Out], Awaitable[X1]]]: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> NotAHandler: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return _bind(self._queue, fn)


@final
class RoutedBatchSubscriberFactory(_Factory):
    """What ``subscriber(RoutedQueue(name).batch(n))`` returns: the handler takes a list of
    messages and no per-row key."""

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
    # no per-row key in a batch, and no follow-ups
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Attempt, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, RowId, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, AnyTx, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Out, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Attempt | RowId | AnyTx | Out, ...], object]
    ) -> BatchTakesNoRowKeys: ...
    # the message: a list of decoded messages
    @overload
    def __call__(self, fn: Callable[Concatenate[object, ...], object]) -> BatchTakesAList: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[list[S], ...], object]
    ) -> PayloadHandlerTakesTheMessage: ...
    @overload
    def __call__(
        self, fn: Callable[[list[T]], Awaitable[XN]]
    ) -> RoutedSubscriber[Callable[[list[T]], Awaitable[XN]]]: ...
    @overload
    def __call__(
        self, fn: Callable[[list[T], Pool], Awaitable[XN]]
    ) -> RoutedSubscriber[Callable[[list[T], Pool], Awaitable[XN]]]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[list[Any], ...], object]) -> NotAHandler: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> BatchTakesAList: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return _bind(self._queue, fn)
