"""``InboxQueue`` (a subscription's source and settings) and the ``subscriber`` decorator.

The overloads of ``SubscriberFactory.__call__`` are the static half of the handler rules: a
handler's parameters after the message are context keys, and ``keys.Tx`` is only lent in
transactional mode.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar, cast, final, overload

from typing_extensions import TypeVar as DefaultTypeVar
from typing_extensions import deprecated

from .._declare._inbox import Inbox, spec_of
from .._declare._markers import Advisory, Lease, Mode, Plain, RowLock, Transactional
from .._errors import DeclarationError
from .._util import evolve, positive_duration
from .backoff import Backoff, require_backoff
from .codecs import Codec, JsonCodec
from .handles import Attempt, Database, Tx
from .outcome import HandlerOutcome, OnFailure

__all__ = ["InboxQueue", "Subscriber", "SubscriberFactory", "subscriber"]

R = TypeVar("R", bound=Inbox[Any, Any], covariant=True)
M = DefaultTypeVar("M", bound=Mode, covariant=True, default=Plain)
T = TypeVar("T")

Result = HandlerOutcome | Sequence[HandlerOutcome] | None
Handler = Callable[..., Awaitable[Result]]

# The context keys a plain handler may take, and those a transactional one may take.
K1 = TypeVar("K1", Attempt, Database)
K2 = TypeVar("K2", Attempt, Database)
X1 = TypeVar("X1", Attempt, Database, Tx)
X2 = TypeVar("X2", Attempt, Database, Tx)
X3 = TypeVar("X3", Attempt, Database, Tx)


@final
class TxNeedsTransactional:
    """What mypy sees a handler taking ``keys.Tx`` on a plain queue become: mounting it fails.

    The ``@deprecated`` overloads of ``SubscriberFactory.__call__`` say why on the decorator's
    line where mypy reports deprecations as errors (``enable_error_code = deprecated``);
    elsewhere ``App.include`` refuses this type.
    """


@final
class LeaseNeedsLockedUntil:
    """What ``InboxQueue.lease(..)`` expects on a table without a ``LockedUntil`` field, so that
    mypy reads: Argument 1 to "lease" of "InboxQueue" has incompatible type "float"; expected
    "LeaseNeedsLockedUntil". Nothing is of this type: declare ``Inbox[Lease]`` with a
    ``LockedUntil`` field, or drop ``.lease(..)``."""


@final
@dataclass(frozen=True, slots=True, init=False)
class InboxQueue(Generic[R, M]):
    """A subscription to the queue ``name`` of ``row``'s table.

    With a ``Group`` field the name selects the group; without one the table is a single queue
    and the name is a label. The per-subscription settings return a new queue.
    """

    row: type[R]
    name: str
    mode: type[Mode]
    poll_every: timedelta | None
    lease_for: timedelta | None
    batch_size: int | None
    worker_count: int
    codec_used: Codec
    failure: OnFailure
    backoff_policy: Backoff | None

    def __init__(self: InboxQueue[R, Plain], row: type[R], name: str) -> None:
        spec_of(row)  # a clear error now for anything but a row class
        object.__setattr__(self, "row", row)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "mode", Plain)
        object.__setattr__(self, "poll_every", None)
        object.__setattr__(self, "lease_for", None)
        object.__setattr__(self, "batch_size", None)
        object.__setattr__(self, "worker_count", 1)
        object.__setattr__(self, "codec_used", JsonCodec())
        object.__setattr__(self, "failure", OnFailure())
        object.__setattr__(self, "backoff_policy", None)

    def transactional(self) -> InboxQueue[R, Transactional]:
        """Lend the handler the delivery's transaction (``keys.Tx``): ack commits the
        handler's writes with the settlement; every other outcome discards them first."""
        # The mode is the type argument that changes.
        changed: InboxQueue[R, Transactional] = evolve(self, mode=Transactional)  # type: ignore[arg-type]
        return changed

    def poll_interval(self, interval: timedelta | float) -> InboxQueue[R, M]:
        """How long to wait after a claim that found fewer rows than it could take."""
        return evolve(self, poll_every=positive_duration("a poll interval", interval))

    @overload
    def lease(
        self: InboxQueue[Inbox[Lease, Any], M], lease: timedelta | float
    ) -> InboxQueue[R, M]: ...
    @overload
    def lease(
        self: InboxQueue[Inbox[RowLock | Advisory, Any], M], lease: LeaseNeedsLockedUntil
    ) -> InboxQueue[R, M]: ...
    def lease(self, lease: timedelta | float | LeaseNeedsLockedUntil) -> InboxQueue[R, M]:
        """How long a claim leases each row (whole seconds, rounded up); lease tables only."""
        spec = spec_of(self.row)
        if spec.form is not Lease:
            msg = (
                f"{spec.label}: only a lease table takes .lease(..), found an "
                f"Inbox[{spec.form.__name__}] table with no LockedUntil field; declare "
                f"Inbox[Lease] with a LockedUntil field or drop .lease(..)"
            )
            raise DeclarationError(msg)
        return evolve(self, lease_for=positive_duration("a lease", lease))

    def batch(self, size: int) -> InboxQueue[R, M]:
        """Claim up to ``size`` rows at once and hand them to the handler as one list."""
        if size < 1:
            msg = f"a batch holds one row or more, found batch({size}); pass a size >= 1"
            raise ValueError(msg)
        return evolve(self, batch_size=size)

    def workers(self, count: int) -> InboxQueue[R, M]:
        """How many deliveries (or batches) are in work at once."""
        if count < 1:
            msg = f"a subscription has one worker or more, found workers({count})"
            raise ValueError(msg)
        return evolve(self, worker_count=count)

    def codec(self, codec: Codec) -> InboxQueue[R, M]:
        """The codec that decodes payloads (JSON unless set)."""
        return evolve(self, codec_used=codec)

    def on_failure(self, policy: OnFailure) -> InboxQueue[R, M]:
        """What handler exceptions and undecodable rows become."""
        return evolve(self, failure=policy)

    def backoff(self, policy: Backoff) -> InboxQueue[R, M]:
        """How long a row whose handler raised (or returned no outcome) waits before it is
        claimable again (exponential from 1 s, at most 5 min, unless set)."""
        return evolve(self, backoff_policy=require_backoff(policy))


@final
class Subscriber(Generic[R, M]):
    """A handler bound to its queue; mount it with ``App.include(broker, subscriber)``."""

    def __init__(self, queue: InboxQueue[R, M], handler: Handler) -> None:
        _check_handler(handler, queue)
        self.queue = queue
        self.handler = handler

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<Subscriber {name} on {self.queue.name!r} of {self.queue.row.__qualname__}>"


@final
class SubscriberFactory(Generic[R, M]):
    """What ``subscriber(queue)`` returns: decorate the handler with it."""

    def __init__(self, queue: InboxQueue[R, M]) -> None:
        self._queue = queue

    @overload
    def __call__(self, fn: Callable[[T], Awaitable[Result]]) -> Subscriber[R, M]: ...
    @overload
    def __call__(
        self: SubscriberFactory[R, Plain], fn: Callable[[T, K1], Awaitable[Result]]
    ) -> Subscriber[R, M]: ...
    @overload
    def __call__(
        self: SubscriberFactory[R, Plain], fn: Callable[[T, K1, K2], Awaitable[Result]]
    ) -> Subscriber[R, M]: ...
    @overload
    @deprecated(
        "keys.Tx, the delivery's transaction, is lent only in transactional mode; subscribe "
        "with InboxQueue(Row, name).transactional()"
    )
    def __call__(
        self: SubscriberFactory[R, Plain], fn: Callable[[T, Tx], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    @deprecated(
        "keys.Tx, the delivery's transaction, is lent only in transactional mode; subscribe "
        "with InboxQueue(Row, name).transactional()"
    )
    def __call__(
        self: SubscriberFactory[R, Plain], fn: Callable[[T, Tx, X2], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    @deprecated(
        "keys.Tx, the delivery's transaction, is lent only in transactional mode; subscribe "
        "with InboxQueue(Row, name).transactional()"
    )
    def __call__(
        self: SubscriberFactory[R, Plain], fn: Callable[[T, X1, Tx], Awaitable[object]]
    ) -> TxNeedsTransactional: ...
    @overload
    def __call__(
        self: SubscriberFactory[R, Transactional], fn: Callable[[T, X1], Awaitable[Result]]
    ) -> Subscriber[R, M]: ...
    @overload
    def __call__(
        self: SubscriberFactory[R, Transactional],
        fn: Callable[[T, X1, X2], Awaitable[Result]],
    ) -> Subscriber[R, M]: ...
    @overload
    def __call__(
        self: SubscriberFactory[R, Transactional],
        fn: Callable[[T, X1, X2, X3], Awaitable[Result]],
    ) -> Subscriber[R, M]: ...
    def __call__(
        self, fn: Callable[..., Awaitable[object]]
    ) -> Subscriber[R, M] | TxNeedsTransactional:
        # The refused (deprecated) overloads take any return type, to keep their message short.
        return Subscriber(self._queue, cast("Handler", fn))


def _check_handler(handler: object, queue: InboxQueue[Any, Any]) -> None:
    """A handler is an ``async def`` (or an object whose ``__call__`` is one): a plain function
    would fail on every delivery, so it is refused where it is bound."""
    name = getattr(handler, "__qualname__", repr(handler))
    if not callable(handler):
        msg = (
            f"a subscriber's handler is an async function, found {handler!r} for queue "
            f"{queue.name!r} of {queue.row.__qualname__}; decorate an `async def`"
        )
        raise TypeError(msg)
    target: object = handler
    while isinstance(target, functools.partial):
        target = target.func
    if not (
        inspect.iscoroutinefunction(target)
        or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004
    ):
        msg = (
            f"a subscriber's handler is an async function, found the plain function {name} "
            f"for queue {queue.name!r} of {queue.row.__qualname__}; declare it `async def`"
        )
        raise TypeError(msg)


def subscriber(queue: InboxQueue[R, M]) -> SubscriberFactory[R, M]:
    """Bind the decorated handler to ``queue``.

    The handler's first parameter is the message: the payload decoded into its annotation (a
    dataclass, msgspec Struct, pydantic model, TypedDict or ``bytes``), the row itself in row
    mode (no ``Payload`` field), or a ``list`` of either with ``.batch(n)``. Further
    parameters are context keys: ``keys.Attempt``, ``keys.Pool``, and in transactional mode
    ``keys.Tx``. It returns a ``HandlerOutcome`` (``None`` is ack).
    """
    return SubscriberFactory(queue)
