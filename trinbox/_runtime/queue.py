"""``InboxQueue``: a subscription's source and settings.

``InboxQueue[Row, Mode, Shape]`` carries in its type what the handler rules depend on: the row
class, the mode (``Plain`` or ``Transactional``) and whether rows come one by one (``Single``)
or as lists (``Batched``, after ``.batch(n)``). ``subscriber(queue)`` (factories.py) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final, overload

from typing_extensions import TypeVar as DefaultTypeVar

from .._declare._capabilities import RowOf
from .._declare._inbox import spec_of
from .._declare._markers import (
    Advisory,
    Form,
    Lease,
    Mode,
    Opening,
    Plain,
    RowLock,
    Transactional,
)
from .._errors import DeclarationError
from .._util import evolve, positive_duration
from .backoff import Backoff, require_backoff
from .codecs import Codec, JsonCodec
from .outcome import OnFailure

if TYPE_CHECKING:
    from .factories import BatchSubscriberFactory, SubscriberFactory, TransactionalSubscriberFactory

__all__ = ["Batched", "BatchesNeverTransactional", "InboxQueue", "Single"]

R = TypeVar("R", bound=RowOf[Any, Any], covariant=True)
M = DefaultTypeVar("M", bound=Mode, covariant=True, default=Plain)
F = TypeVar("F", bound=Form)
O = TypeVar("O", bound=Opening)  # noqa: E741


@final
class Single:
    """A queue whose handler takes one row (or message) per call: the default."""

    def __new__(cls) -> Single:
        raise TypeError("Single is a marker type for InboxQueue[...] and is never instantiated")


@final
class Batched:
    """A queue after ``.batch(n)``: its handler takes a list of rows (or messages)."""

    def __new__(cls) -> Batched:
        raise TypeError("Batched is a marker type for InboxQueue[...] and is never instantiated")


B = DefaultTypeVar("B", bound=Single | Batched, covariant=True, default=Single)


@final
class BatchesNeverTransactional:
    """What ``.transactional()`` on a batch queue returns for type checkers, and what
    ``.batch(n)`` on a transactional queue expects, so that mypy reads: Argument 1 to "batch" of
    "InboxQueue" has incompatible type "int"; expected "BatchesNeverTransactional". A batch
    shares no delivery transaction: drop ``.batch(n)`` or ``.transactional()``. Nothing is of
    this type."""


@final
class LeaseNeedsLockedUntil:
    """What ``InboxQueue.lease(..)`` expects on a table without a ``LockedUntil`` field, so that
    mypy reads: Argument 1 to "lease" of "InboxQueue" has incompatible type "float"; expected
    "LeaseNeedsLockedUntil". Nothing is of this type: declare ``Inbox[Lease]`` with a
    ``LockedUntil`` field, or drop ``.lease(..)``."""


@final
@dataclass(frozen=True, slots=True, init=False)
class InboxQueue(Generic[R, M, B]):
    """A subscription to the queue ``name`` of ``row``'s table.

    With a ``Group`` field the name selects the group; without one the table is a single queue
    and the name is a label. ``.every_group()`` serves every group of a FIFO table, the name a
    label. The per-subscription settings return a new queue.
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
    attempt_at_claim: bool
    serves_every_group: bool

    def __init__(self, row: type[R], name: str) -> None:
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
        object.__setattr__(self, "attempt_at_claim", False)
        object.__setattr__(self, "serves_every_group", False)

    @property
    def group(self) -> str | None:
        """The group the subscription reads: its name on a table with a ``Group`` field;
        ``None`` on a table without one (one queue) and over every group."""
        if self.serves_every_group or spec_of(self.row).group is None:
            return None
        return self.name

    @overload
    def transactional(self: InboxQueue[R, Any, Single]) -> InboxQueue[R, Transactional, Single]: ...
    @overload
    def transactional(self: InboxQueue[R, Any, Batched]) -> BatchesNeverTransactional: ...
    def transactional(self) -> InboxQueue[R, Transactional, Single] | BatchesNeverTransactional:
        """Lend the handler the delivery's transaction (``keys.Tx``): ack commits the
        handler's writes with the settlement; every other outcome discards them first."""
        if self.batch_size is not None:
            msg = (
                f"batches never run in transactional mode, found .batch({self.batch_size})"
                f".transactional() on queue {self.name!r} of {self.row.__qualname__}; drop "
                f"one of them"
            )
            raise DeclarationError(msg)
        # The mode is the type argument that changes.
        changed: InboxQueue[R, Transactional, Single] = evolve(self, mode=Transactional)  # type: ignore[arg-type]
        return changed

    @overload
    def _subscribe(self: InboxQueue[RowOf[F, O], Plain, Single]) -> SubscriberFactory[R, F, O]: ...
    @overload
    def _subscribe(
        self: InboxQueue[RowOf[F, O], Transactional, Single],
    ) -> TransactionalSubscriberFactory[R, F, O]: ...
    @overload
    def _subscribe(
        self: InboxQueue[RowOf[F, O], Plain, Batched],
    ) -> BatchSubscriberFactory[R, F, O]: ...
    def _subscribe(self) -> object:
        """The factory ``subscriber(self)`` returns: by the queue's mode and shape. Its type
        also names the row's form and opening (``F``, ``O``, read off the row's ``Inbox``
        base), which a refused mount's message shows."""
        from .factories import factory_for

        return factory_for(self)

    def poll_interval(self, interval: timedelta | float) -> InboxQueue[R, M, B]:
        """How long to wait after a claim that found fewer rows than it could take."""
        return evolve(self, poll_every=positive_duration("a poll interval", interval))

    @overload
    def lease(
        self: InboxQueue[RowOf[Lease, Any], M, B], lease: timedelta | float
    ) -> InboxQueue[R, M, B]: ...
    @overload
    def lease(
        self: InboxQueue[RowOf[RowLock | Advisory, Any], M, B], lease: LeaseNeedsLockedUntil
    ) -> InboxQueue[R, M, B]: ...
    def lease(self, lease: timedelta | float | LeaseNeedsLockedUntil) -> InboxQueue[R, M, B]:
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

    @overload
    def batch(self: InboxQueue[R, Plain, Any], size: int) -> InboxQueue[R, Plain, Batched]: ...
    @overload
    def batch(
        self: InboxQueue[R, Transactional, Any], size: BatchesNeverTransactional
    ) -> BatchesNeverTransactional: ...
    def batch(
        self, size: int | BatchesNeverTransactional
    ) -> InboxQueue[R, Plain, Batched] | BatchesNeverTransactional:
        """Claim up to ``size`` rows at once and hand them to the handler as one list (whose
        handler then takes a ``list`` and no per-row key); never in transactional mode."""
        if self.mode is Transactional:
            msg = (
                f"batches never run in transactional mode, found .transactional().batch("
                f"{size!r}) on queue {self.name!r} of {self.row.__qualname__}; drop one of them"
            )
            raise DeclarationError(msg)
        if not isinstance(size, int) or size < 1:
            msg = f"a batch holds one row or more, found batch({size!r}); pass a size >= 1"
            raise ValueError(msg)
        batched: InboxQueue[R, Plain, Batched] = evolve(self, batch_size=size)  # type: ignore[arg-type]
        return batched

    def workers(self, count: int) -> InboxQueue[R, M, B]:
        """How many deliveries (or batches) are in work at once."""
        if count < 1:
            msg = f"a subscription has one worker or more, found workers({count})"
            raise ValueError(msg)
        return evolve(self, worker_count=count)

    def codec(self, codec: Codec) -> InboxQueue[R, M, B]:
        """The codec that decodes payloads (JSON unless set)."""
        return evolve(self, codec_used=codec)

    def on_failure(self, policy: OnFailure) -> InboxQueue[R, M, B]:
        """What handler exceptions and undecodable rows become."""
        return evolve(self, failure=policy)

    def backoff(self, policy: Backoff) -> InboxQueue[R, M, B]:
        """How long a row whose handler raised (or returned no outcome) waits before it is
        claimable again (exponential from 1 s, at most 5 min, unless set)."""
        return evolve(self, backoff_policy=require_backoff(policy))

    def every_group(self) -> InboxQueue[R, M, B]:
        """Serve every group of a FIFO table (``Group(fifo=True)``), groups published into
        later included: each group in order and one row of it in work at a time, up to
        ``workers(n)`` groups side by side. The queue's name is then a label."""
        spec = spec_of(self.row)
        if not spec.fifo:
            found = "no Group field" if spec.group is None else "a Group field without fifo=True"
            msg = (
                f"{spec.label}: .every_group() serves every group of a FIFO table, found "
                f"{found}; declare Group(fifo=True), or drop .every_group() (a subscription "
                f"names one group of a table with groups, and serves a table without them "
                f"whole)"
            )
            raise DeclarationError(msg)
        return evolve(self, serves_every_group=True)

    def count_attempt_at_claim(self) -> InboxQueue[R, M, B]:
        """Row lock tables: count each delivery's attempt at claim, in a committed statement
        of its own (one more round trip per claim), so that a row whose handler kills its
        process still reaches its dead letter; by default the form counts the attempt when a
        retry settles, in the delivery's transaction, which a process death rolls back."""
        spec = spec_of(self.row)
        if spec.form is not RowLock or spec.attempt is None:
            found = (
                f"an Inbox[{spec.form.__name__}] table"
                if spec.form is not RowLock
                else "a row lock table with no Attempt field"
            )
            msg = (
                f"{spec.label}: .count_attempt_at_claim() counts the attempt of a row lock "
                f"table's Attempt field, found {found}; declare Inbox[RowLock] with an "
                f"Attempt field, or drop .count_attempt_at_claim() (the lease and advisory "
                f"forms count the attempt at claim already)"
            )
            raise DeclarationError(msg)
        if spec.fifo:
            # The group guard lives in the claim's transaction, which the count commits.
            msg = (
                f"{spec.label}: .count_attempt_at_claim() commits each claim's transaction "
                f"at the count, and a FIFO group's guard is held by that transaction until "
                f"the row settles, found Group(fifo=True); declare the FIFO table "
                f"Inbox[Lease] (it counts the attempt at claim), or drop fifo=True or "
                f".count_attempt_at_claim()"
            )
            raise DeclarationError(msg)
        return evolve(self, attempt_at_claim=True)
