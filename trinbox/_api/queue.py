"""``InboxQueue``, the ``subscriber`` decorator and the ``Subscriber`` it makes: one module,
since their types refer to each other in a circle. A queue's type picks the decorator's factory
(``InboxQueue._subscribe``), the factory's overloads make a ``Subscriber``, and a ``Subscriber``
keeps its queue.

The queue. ``InboxQueue[Row, Mode, Shape]`` carries in its type what the handler rules depend
on: the row class, the mode (``Plain`` or ``Transactional``) and whether rows come one by one
(``Single``) or as lists (``Batched``, after ``.batch(n)``).

The decorator. ``subscriber(queue)`` returns one factory per kind of queue (plain,
transactional, batched; ``InboxQueue._subscribe`` names it by the queue's type, a method's
self type, so that a queue typed ``InboxQueue[Any, Any]`` gets the plain factory rather than
``Any``); each factory's overloads are the static half of handler.py's rules. They are tried in
order and the first that matches wins: the refusals of a mistake come before the shapes that
accept, and each refusal returns the named type of its rule (refusals.py), which
``App.include`` does not mount. The order is the design: a handler that matches a refusal and a
later shape is meant to get the refusal, so mypy's ``overload-overlap`` and pyright's
``reportOverlappingOverload`` reports are off in this module.

The subscriber. ``Subscriber[Row, Mode, Handler, Needs]``: ``Handler`` is the handler's own type
(its parameters and return), and ``Needs`` what the subscriber asks of a dialect: ``Needs[Row,
Form, Isolation, Mode] | None`` for a decorated handler, ``tuple[Row, Mode] | None`` when written
with two arguments (``list[Subscriber[Job, Plain]]``). ``App.include`` has one overload per
dialect that checks it against what the dialect mounts (``tuple[RowOf[Forms, Isolations],
Modes]``, _capabilities.py).

``Needs`` is a ``tuple[Row, Mode]`` (what is checked) that also names the row's form and
isolation level, so that a refused mount says which form the row has: "Needs[Locked, RowLock,
Default, Plain]", against the forms the dialect serves. It is a union on purpose: mypy joins the
subscribers of a list, ``[a, b]``, into one type, and the join of two unions is their union,
where the join of two row classes is ``object``, which no dialect mounts (pyright keeps a
list's items as a union). ``None`` is the member that keeps it a union; every dialect accepts
it.
"""

# mypy: disable-error-code="overload-overlap"
# pyright: reportOverlappingOverload=false

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Concatenate, Generic, Protocol, TypeAlias, cast, final, overload

from typing_extensions import TypeVar

from .._declare._capabilities import RowOf
from .._declare._group_names import GroupNames
from .._declare._inbox import Inbox, spec_of
from .._declare._limits import ClaimLimits, add_limit
from .._declare._markers import (
    Advisory,
    Form,
    Isolation,
    Lease,
    Mode,
    Plain,
    RowLock,
    Transactional,
)
from .._declare._rates import Rate, Rates
from .._declare._tracker import Tracker
from .._dialects.seen import check_group_name
from .._util import evolve, positive_duration
from ..errors import DeclarationError
from .backoff import Backoff, require_backoff
from .codecs import Codec, JsonCodec
from .handles import AnyTx, Attempt, CancelRequested, Held, Out, Pool, Progress, RowId
from .headers import Headers
from .outcome import HandlerOutcome, OnFailure
from .refusals import (
    BatchTakesAList,
    BatchTakesNoRowKeys,
    ContextKeyNotOptional,
    DecorateWithSubscriber,
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

__all__ = [
    "BatchSubscriberFactory",
    "Batched",
    "BatchesNeverTransactional",
    "Handler",
    "InboxQueue",
    "Needs",
    "Result",
    "Single",
    "Subscribable",
    "Subscriber",
    "SubscriberFactory",
    "TransactionalSubscriberFactory",
    "bind",
    "check_handler",
    "factory_for",
    "subscriber",
]

# -- type variables --------------------------------------------------------------------------------


class ClaimIds(Protocol):
    """A queue's own claim (``InboxQueue.custom_claim``): an async function given the claim's
    connection, the subscription's group (``None`` on a table without one) and how many rows
    it may take, returning the ids of the rows it takes, at most that many."""

    def __call__(
        self, conn: Held, group: str | None, limit: int, /
    ) -> Awaitable[Sequence[Any]]: ...


class FetchRows(Protocol):
    """A custom claim's fetch: an async function given the claim's connection and the ids its
    claim took, returning their rows, every column of the row class in declaration order (a
    row left out is settled by the decode policy)."""

    def __call__(self, conn: Held, ids: list[Any], /) -> Awaitable[Sequence[Sequence[Any]]]: ...


@dataclass(frozen=True, slots=True)
class CustomClaimOf:
    """What ``InboxQueue.custom_claim`` was given."""

    claim: ClaimIds
    fetch: FetchRows | None


R = TypeVar("R", bound=Row, covariant=True)
M = TypeVar("M", bound=Mode, covariant=True, default=Plain)
# RF, RO: a row's form and isolation level, read off it by _subscribe's self type
RF = TypeVar("RF", bound=Form)
RO = TypeVar("RO", bound=Isolation)
F = TypeVar("F", bound=Form, covariant=True)
O = TypeVar("O", bound=Isolation, covariant=True)  # noqa: E741
T = TypeVar("T")
# Another row class (a nominal bound: mypy's notes print it, "def [S: Inbox[Any, Any]] ...").
S = TypeVar("S", bound=Inbox[Any, Any])
PR = TypeVar("PR", bound=PayloadRow)
X1 = TypeVar("X1", bound=HandlerOutcome | None)
XN = TypeVar("XN", bound=HandlerOutcome | Sequence[HandlerOutcome] | None)
HH = TypeVar("HH")
Made = TypeVar("Made", covariant=True)
G = TypeVar("G")

# The context keys a handler takes (each may repeat for mypy; handler.py refuses a repeat).
# Bound by their union, not constrained to each: a checker expands constrained variables into
# every combination, five keys of five kinds each (minutes of mypy for this module).
# keys.Out comes last, in overloads of its own.
K1 = TypeVar("K1", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress)
K2 = TypeVar("K2", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress)
K3 = TypeVar("K3", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress)
K4 = TypeVar("K4", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress)
X1K = TypeVar("X1K", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress | AnyTx)
X2K = TypeVar("X2K", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress | AnyTx)
X3K = TypeVar("X3K", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress | AnyTx)
X4K = TypeVar("X4K", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress | AnyTx)
X5K = TypeVar("X5K", bound=Attempt | Pool | RowId | Headers | CancelRequested | Progress | AnyTx)


Result = HandlerOutcome | Sequence[HandlerOutcome] | None
Handler = Callable[..., Awaitable[Result]]

# Unbounded: mypy joins a list of subscribers of several row classes into Subscriber[object,
# ...] (a join outside a bound would be object itself, which include refuses).
SR = TypeVar("SR", covariant=True)
H = TypeVar("H", covariant=True, default=Handler)
N = TypeVar("N", covariant=True, default=tuple[SR, M] | None)
NR = TypeVar("NR", bound=Row, covariant=True)
NF = TypeVar("NF", bound=Form, covariant=True)
NO = TypeVar("NO", bound=Isolation, covariant=True)
NM = TypeVar("NM", bound=Mode, covariant=True)


# -- the queue -------------------------------------------------------------------------------------


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


B = TypeVar("B", bound=Single | Batched, covariant=True, default=Single)


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
    custom: CustomClaimOf | None
    # A relay's (trinbox.outbox.relay): the groups its claim reads, by name, and the whole
    # row handed to its handler though the table has a Payload field.
    group_names: GroupNames | None
    whole_rows: bool
    tracker: Tracker | None
    # .limit(..): at most N rows in work per key and for the whole queue, across processes.
    limits: ClaimLimits | None

    def __init__(self, row: type[R], name: str) -> None:
        spec = spec_of(row)  # a clear error now for anything but a row class
        if spec.group is not None:
            check_group_name(f"InboxQueue({row.__qualname__}, ...)", name)
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
        object.__setattr__(self, "custom", None)
        object.__setattr__(self, "group_names", None)
        object.__setattr__(self, "whole_rows", False)
        object.__setattr__(self, "tracker", None)
        object.__setattr__(self, "limits", None)

    @property
    def group(self) -> str | None:
        """The group the subscription reads: its name on a table with a ``Group`` field;
        ``None`` on a table without one (one queue), over every group, and over the groups
        a relay names."""
        if (
            self.serves_every_group
            or self.group_names is not None
            or spec_of(self.row).group is None
        ):
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
    def _subscribe(
        self: InboxQueue[RowOf[RF, RO], Plain, Single],
    ) -> SubscriberFactory[R, RF, RO]: ...
    @overload
    def _subscribe(
        self: InboxQueue[RowOf[RF, RO], Transactional, Single],
    ) -> TransactionalSubscriberFactory[R, RF, RO]: ...
    @overload
    def _subscribe(
        self: InboxQueue[RowOf[RF, RO], Plain, Batched],
    ) -> BatchSubscriberFactory[R, RF, RO]: ...
    def _subscribe(self) -> object:
        """The factory ``subscriber(self)`` returns: by the queue's mode and shape. Its type
        also names the row's form and isolation level (``RF``, ``RO``, read off the row's ``Inbox``
        base), which a refused mount's message shows. At runtime ``subscriber`` reads the queue's
        settings instead (``factory_for``)."""
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

    @overload
    def limit(self, key: str | None = None, *, concurrency: int) -> InboxQueue[R, M, B]: ...
    @overload
    def limit(
        self,
        key: str | None = None,
        *,
        rate: Rate,
        rates: Rates,
        concurrency: int | None = None,
    ) -> InboxQueue[R, M, B]: ...
    def limit(
        self,
        key: str | None = None,
        *,
        concurrency: int | None = None,
        rate: Rate | None = None,
        rates: Rates | None = None,
    ) -> InboxQueue[R, M, B]:
        """At most ``concurrency`` rows in work at once across every process: per value of
        the field ``key``, or for the whole queue without one (both may be declared, once
        each). The claim counts the live leases under a lock that serializes the table's
        claims, and skips a key at its limit while other keys' rows are still claimed. On a
        row lock table each row in work holds a slot of its key instead: a lock of its claim's
        transaction (PostgreSQL), or of its connection let go when that transaction ends
        (MySQL, MariaDB); on an advisory table a slot as a session lock beside its advisory
        key's, on the same session (SQLite: kept with the key by the one process serving the
        file).

        ``rate=Rate(n, per=...)``: rows started at a rate of ``n`` per ``per`` (a burst of
        ``n``, then one every ``per / n``), per key or for the whole queue, kept in the rate
        table ``rates`` (GCRA: one row per key, advanced by the claim in its transaction). A
        rate counts starts: a row claimed counts, however it ends (given back at shutdown
        too). A concurrency and a rate may be declared in one call or two; per-key limits
        share one key. On a FIFO table (``Group(fifo=True)``, ``.every_group()``) a group's
        head is claimed only while its key and the queue are below their limits, the live
        leases counted over every group of the table: a group whose head's key is at its limit
        is passed over, its order kept. A concurrency on every form (where the dialect holds
        its slots), a rate on lease tables beside no FIFO groups; neither beside
        ``.custom_claim()`` nor
        ``.count_attempt_at_claim()``."""
        if self.attempt_at_claim:
            _refuse_counted_beside_limit(spec_of(self.row).label, key, concurrency)
        limits = add_limit(
            spec_of(self.row),
            self.limits,
            key=key,
            concurrency=concurrency,
            fifo=spec_of(self.row).fifo,
            custom=self.custom is not None,
            rate=rate,
            rates=rates,
        )
        return evolve(self, limits=limits)

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
        self._refuse_beside_custom(".count_attempt_at_claim()")
        if self.limits is not None:
            msg = (
                f"{spec.label}: .count_attempt_at_claim() commits each claim's transaction at "
                f"the count, and a limit's slots are locks of that transaction, held until the "
                f"row settles, found {self.limits.label}; drop .limit() or "
                f".count_attempt_at_claim()"
            )
            raise DeclarationError(msg)
        return evolve(self, attempt_at_claim=True)

    def tracked(self, tracker: Tracker) -> InboxQueue[R, M, B]:
        """Run the handler once per outbox record: a delivery whose headers carry a record's
        id (a relay into this broker writes it, ``trinbox.outbox.into``) that ``tracker``'s
        table holds for this consumer is acked without the handler, and one that acks is
        marked there (in its transaction on a transactional mount). The table needs a Headers
        field; a delivery without the id header is handled untracked."""
        if not isinstance(tracker, Tracker):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = (
                f"{spec_of(self.row).label}: .tracked() takes a trinbox.outbox.Tracker, found "
                f"{type(tracker).__name__} {tracker!r}; pass Tracker('seen_records')"
            )
            raise TypeError(msg)
        return evolve(self, tracker=tracker)

    def custom_claim(
        self, claim: ClaimIds, *, fetch: FetchRows | None = None
    ) -> InboxQueue[R, M, B]:
        """Claim with the queue's own function instead of trinbox's select, in the claim's
        transaction: ``await claim(conn, group, limit)`` returns the ids of at most ``limit``
        rows. A row lock claim locks its rows itself (``FOR UPDATE SKIP LOCKED``), and they
        stay locked while they are in work; the lease form stamps each id's lease while the row
        is claimable and its lease free, and leaves out the others. Then the rows are read by
        id: on PostgreSQL by trinbox, elsewhere by ``await fetch(conn, ids)`` (required: no
        statement binds a list there), which may read them through joins; an id whose row the
        fetch leaves out is settled by the decode policy. Not in the advisory form, nor beside
        ``Group(fifo=True)`` (so nor ``.every_group()``) or ``.count_attempt_at_claim()``."""
        spec = spec_of(self.row)
        refused: str | None = None
        if spec.form is Advisory:
            refused = (
                "an Inbox[Advisory] table; the advisory form takes each candidate under its "
                "key's lock, so declare Inbox[RowLock] or Inbox[Lease]"
            )
        elif spec.fifo:
            refused = (
                "Group(fifo=True); a FIFO group's claim is its guard's, so drop fifo=True or "
                "the custom claim"
            )
        elif self.attempt_at_claim:
            refused = ".count_attempt_at_claim(); drop it or the custom claim"
        elif self.limits is not None:
            refused = f"{self.limits.label}; drop it or the custom claim"
        if refused is not None:
            msg = (
                f"{spec.label}: .custom_claim() claims rows of a row lock or lease table by "
                f"the queue's own function, found {refused}"
            )
            raise DeclarationError(msg)
        for name, fn in (("claim", claim), ("fetch", fetch)):
            if fn is not None and not callable(fn):
                msg = (
                    f"{spec.label}: .custom_claim() takes async functions, found {name}="
                    f"{fn!r}; pass the function itself"
                )
                raise DeclarationError(msg)
        return evolve(self, custom=CustomClaimOf(claim, fetch))

    def _refuse_beside_custom(self, option: str) -> None:
        if self.custom is not None:
            msg = (
                f"{spec_of(self.row).label}: .custom_claim() claims rows of a row lock or lease "
                f"table by the queue's own function, found {option}; drop it or the custom "
                f"claim"
            )
            raise DeclarationError(msg)


# -- the subscriber --------------------------------------------------------------------------------


@final
class Needs(tuple[NR, NM], Generic[NR, NF, NO, NM]):
    """What a subscriber asks of the broker's dialect, as type checkers' messages show it: its
    row class, the row's claim form and isolation level, and its mode. A type only: nothing is
    of it."""

    def __new__(cls) -> Needs[Any, Any, Any, Any]:
        msg = (
            "Needs names what a subscriber asks of a dialect, for type checkers; it is never "
            "instantiated"
        )
        raise TypeError(msg)


@final
class Subscriber(Generic[SR, M, H, N]):
    """A handler bound to its queue; mount it with ``App.include(broker, subscriber)``.

    Made by decorating the handler, ``@subscriber(InboxQueue(Row, name))``, never directly:
    the decorator is what checks the handler against its queue."""

    queue: InboxQueue[Any, Any, Any]
    handler: H
    # A subscription by name mounted on a broker: the RoutedSubscriber it was resolved from.
    routed: object = None

    def __init__(self, queue: DecorateWithSubscriber, handler: DecorateWithSubscriber) -> None:
        msg = (
            f"a Subscriber is made by decorating its handler, found Subscriber({queue!r}, "
            f"{getattr(handler, '__qualname__', handler)!r}); write "
            f"@subscriber(InboxQueue(Row, name)) above the async def"
        )
        raise TypeError(msg)

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<Subscriber {name} on {self.queue.name!r} of {self.queue.row.__qualname__}>"


def bind(queue: InboxQueue[Any, Any, Any], handler: object) -> Subscriber[Any, Any, Any, Any]:
    """The subscriber of ``handler`` on ``queue`` (what the decorator returns)."""
    check_handler(handler, f"queue {queue.name!r} of {queue.row.__qualname__}")
    made: Subscriber[Any, Any, Any, Any] = object.__new__(Subscriber)  # pyright: ignore[reportUnknownVariableType]
    made.queue = queue
    made.handler = handler
    return made


def check_handler(handler: object, of: str) -> None:
    """A handler is an ``async def`` (or an object whose ``__call__`` is one): a plain function
    would fail on every delivery, so it is refused where it is bound (``of``: its queue, as
    messages name it)."""
    name = getattr(handler, "__qualname__", repr(handler))
    if not callable(handler):
        msg = (
            f"a subscriber's handler is an async function, found {handler!r} for {of}; "
            f"decorate an `async def`"
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
            f"for {of}; declare it `async def`"
        )
        raise TypeError(msg)


# -- the decorator ---------------------------------------------------------------------------------

# What a decorated handler becomes: its row, mode and handler, and what it needs of a dialect,
# the row's form and isolation level included (F, O: InboxQueue._subscribe reads them off the row).
_Plain: TypeAlias = Subscriber[R, Plain, HH, Needs[R, F, O, Plain] | None]
_InTx: TypeAlias = Subscriber[R, Transactional, HH, Needs[R, F, O, Transactional] | None]


class _Factory(Generic[R, F, O]):
    def __init__(self, queue: InboxQueue[Any, Any, Any]) -> None:
        self._queue = queue


@final
class SubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns for a plain queue: decorate the handler with it."""

    # further parameters: context keys, never optional (keys.Attempt is an int and
    # keys.Headers a Mapping to the checkers: a plain int or Mapping is refused first)
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
        self, fn: Callable[Concatenate[Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self,
        fn: Callable[Concatenate[Any, Any, Any, Any, Mapping[str, str], ...], Awaitable[object]],
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
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Any, Any, AnyTx, ...], Awaitable[object]]
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
        self, fn: Callable[[object, K1, K2, K3, K4], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2, K3, K4], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, K2, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, K2, K3, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2, K3, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, K1, K2, K3, K4, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[object, K1, K2, K3, K4, Out], Awaitable[X1]], F, O]: ...
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
    def __call__(
        self, fn: Callable[[R, K1, K2, K3, K4], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2, K3, K4], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, K2, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, K2, K3, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2, K3, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, K1, K2, K3, K4, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[R, K1, K2, K3, K4, Out], Awaitable[X1]], F, O]: ...
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
    def __call__(
        self, fn: Callable[[T, K1, K2, K3, K4], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2, K3, K4], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, K3, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2, K3, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, K1, K2, K3, K4, Out], Awaitable[X1]]
    ) -> _Plain[R, Callable[[T, K1, K2, K3, K4, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> NotAHandler: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return bind(self._queue, fn)


@final
class TransactionalSubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns for a ``.transactional()`` queue: its handler may
    take ``keys.Tx``."""

    # further parameters: context keys, never optional (keys.Attempt is an int and
    # keys.Headers a Mapping to the checkers: a plain int or Mapping is refused first)
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
        self, fn: Callable[Concatenate[Any, Any, Any, Any, Any, int, ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self,
        fn: Callable[Concatenate[Any, Any, Any, Any, Mapping[str, str], ...], Awaitable[object]],
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self,
        fn: Callable[
            Concatenate[Any, Any, Any, Any, Any, Mapping[str, str], ...], Awaitable[object]
        ],
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
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Any, Any, Any, None, ...], Awaitable[object]]
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
        self, fn: Callable[[object, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, X3K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, X3K, X4K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K, X4K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[object, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[object, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]], F, O]: ...
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
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K, X4K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K, X4K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[R, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[R, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]], F, O]: ...
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
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K, X4K, X5K], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K, X4K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K, X4K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(
        self, fn: Callable[[T, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]]
    ) -> _InTx[R, Callable[[T, X1K, X2K, X3K, X4K, X5K, Out], Awaitable[X1]], F, O]: ...
    @overload
    def __call__(self, fn: Callable[..., object]) -> NotAHandler: ...
    def __call__(self, fn: Callable[..., object]) -> Any:
        return bind(self._queue, fn)


@final
class BatchSubscriberFactory(_Factory[R, F, O]):
    """What ``subscriber(queue)`` returns after ``.batch(n)``: the handler takes a list and no
    per-row key."""

    # further parameters: context keys, never optional (keys.Attempt is an int and
    # keys.Headers a Mapping to the checkers: a plain int or Mapping is refused first)
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
        self, fn: Callable[Concatenate[Any, Mapping[str, str], ...], Awaitable[object]]
    ) -> NotAContextKey: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Mapping[str, str], ...], Awaitable[object]]
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
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Out, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Out, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Headers, ...], Awaitable[object]]
    ) -> BatchTakesNoRowKeys: ...
    @overload
    def __call__(
        self, fn: Callable[Concatenate[Any, Any, Headers, ...], Awaitable[object]]
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
    # At runtime the queue's kind is read off its settings (factory_for), for any caller; a
    # queue of another kind (a RoutedQueue) names its own factory.
    found: object = queue
    if not isinstance(found, InboxQueue) and callable(getattr(type(found), "_subscribe", None)):
        return queue._subscribe()  # pyright: ignore[reportPrivateUsage]
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


def _refuse_counted_beside_limit(label: str, key: object, concurrency: object) -> None:
    """``.limit()`` after ``.count_attempt_at_claim()``: the count commits the claim's
    transaction, whose locks are the limit's slots."""
    call = (
        f".limit(concurrency={concurrency!r})"
        if key is None
        else f".limit(key={key!r}, concurrency={concurrency!r})"
    )
    msg = (
        f"{label}: .count_attempt_at_claim() commits each claim's transaction at the count, "
        f"and a limit's slots are locks of that transaction, held until the row settles, "
        f"found {call} after .count_attempt_at_claim(); drop .limit() or "
        f".count_attempt_at_claim()"
    )
    raise DeclarationError(msg)
