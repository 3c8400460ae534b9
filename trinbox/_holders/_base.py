"""What the holders, the forms over them and the engine share: deliveries, settlement steps,
claims, the form contract (``ClaimForm``) and its traits, and what a form is given
(``FormContext``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, cast

import trio

from .._declare._limits import ClaimLimits
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter, Dialect
from .._dialects._statement import Statement
from .._dialects.plans import Plan
from .._drivers._base import Connection, Pool, Record
from ..errors import TrinboxError

__all__ = [
    "Ack",
    "Chained",
    "Claimed",
    "Clock",
    "CustomClaim",
    "DeadLetterStep",
    "Delivery",
    "Drop",
    "FormContext",
    "FormTraits",
    "ClaimForm",
    "Retry",
    "RetryAt",
    "Snooze",
    "Step",
    "batch_event",
    "held",
    "step_statements",
    "step_values",
    "lease_expiry",
]

logger = logging.getLogger("trinbox.drivers")

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Ack:
    """Finish the row: delete it or mark it processed; ``result``, the handler's result as
    the Result field's JSON text (tables with one: ``null`` when it left none)."""

    event: str = "ack"
    result: str | None = "null"


@dataclass(frozen=True, slots=True)
class Drop:
    """Finish the row without running the handler's success (same SQL as ack)."""

    event: str = "drop"


@dataclass(frozen=True, slots=True)
class Retry:
    """Return the row to the queue at once."""

    event: str = "retry"


@dataclass(frozen=True, slots=True)
class RetryAt:
    """Return the row, claimable from ``at`` (the host's clock), or ``delay`` after the
    server's now (the database clock)."""

    at: datetime
    event: str = "retry_after"
    delay: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class Snooze:
    """Put the row back, claimable from ``at`` (or ``delay`` after the server's now), with
    its attempt given back where the claim counted it: no attempt is spent."""

    at: datetime
    event: str = "snooze"
    delay: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class DeadLetterStep:
    """Move the spent row to the dead letter group or table."""

    dest: DeadLetter
    event: str = "dead_letter"


Step = Ack | Drop | Retry | RetryAt | Snooze | DeadLetterStep


@dataclass(eq=False, slots=True)
class Delivery:
    """One claimed row in work: its column values as read, and what holds it."""

    values: dict[str, object]
    id: object
    attempt: int | None
    token: object = None  # lease form: the expiry the claim wrote (host's or server's)
    key: str | None = None  # advisory form: the rendered key
    conn: Connection | None = None  # the session or transaction that holds the row
    batch: object = None  # row lock batch: the shared transaction
    lease_lost: bool = False
    settled: bool = False
    released: bool = False  # shutdown released it; a later settlement fails with Closed
    tx_open: bool = False  # transactional mode: the handler's transaction is open on conn
    unlocked: bool | None = None  # advisory: the settlement ran the unlock (and was it confirmed)
    # Advisory under a limit: the slots its session holds beside the key (the unlock's values).
    slots: dict[str, object] | None = None
    found: bool = True  # a custom claim's id whose fetch read no row: settled by the decode policy
    progress: float | None = None  # the handler's latest keys.Progress value
    progress_written: float | None = None  # the value the lease keeper last wrote to the row


class Claimed(list[Delivery]):
    """The deliveries of one claim. ``exhausted``: its select found fewer rows than it asked
    for, so nothing more is due now and the claim loop waits for its poll interval."""

    def __init__(self, deliveries: Iterable[Delivery] = (), *, exhausted: bool) -> None:
        super().__init__(deliveries)
        self.exhausted = exhausted


@dataclass(slots=True)
class Chained:
    """A settlement that also claimed for its worker, in the same round trip. ``error``: the
    settlement's (``None``: it took effect). ``claimed``: the claim's rows; ``None`` when no
    claim ran (the step settled alone). ``claim_error``: the claim failed, the settlement
    stands."""

    error: TrinboxError | None = None
    claimed: Claimed | None = None
    claim_error: TrinboxError | None = None


@dataclass
class FormContext:
    """What a form needs from its subscription."""

    spec: TableSpec
    dialect: Dialect
    statements: Plan
    pool: Pool
    clock: Clock
    group: str | None
    lease: timedelta = timedelta(seconds=30)
    transactional: bool = False
    # Wakes the claim loop: an advisory settlement that hands back its session or frees its
    # key (SQLite's registry) frees room.
    wake: Callable[[], None] = lambda: None
    # The lease keeper reports each extension: (delivery, extended) where ``extended`` is
    # False when the lease was found gone.
    extended: Callable[[Delivery, bool], None] = lambda delivery, extended: None
    # The row lock form's opt-in count at claim (``statements.take``: count, relock).
    count_at_claim: bool = False
    # The queue's own claim (``InboxQueue.custom_claim``), in place of the plan's.
    custom: CustomClaim | None = None
    # A limited claim (``InboxQueue.limit``) ranks a bounded window of the due rows: taking
    # fewer than asked, it may have left rows of other keys beyond it, so it is exhausted only
    # when it took none.
    limited: bool = False
    # The limits themselves, for a hold that keeps the slots in this process (SQLite's
    # advisory keys).
    limits: ClaimLimits | None = None


@dataclass(frozen=True, slots=True)
class CustomClaim:
    """A queue's own claim, as the lease and row lock forms run it, in the claim's transaction:
    ``ids`` returns the ids of at most ``limit`` rows (row lock: rows it locked; lease: rows
    the form then stamps, each only while its lease is free); ``rows`` reads the rows of ids,
    every column in declaration order (``None``: the plan's ``fetch``, PostgreSQL's). Both
    raise ``ClaimFailed`` for whatever the queue's functions did wrong."""

    ids: Callable[[Connection, str | None, int], Awaitable[list[object]]]
    rows: Callable[[Connection, list[object]], Awaitable[list[Record]]] | None = None


@dataclass(frozen=True, slots=True)
class FormTraits:
    """What the runtime needs to know of a form, asked instead of inspected.

    ``holds_connections``: each delivery in work holds a pooled connection from its claim to
    its settlement (row lock; advisory session locks; transactional mode of every form), so
    the subscription's workers are capped by the pool. ``feeds_every_worker``: one claim may
    take a row for each free worker (not a row lock claim, one transaction). ``chains``: a
    settling single delivery may claim its worker's next row in the same round trip
    (``settle_and_claim``); ``chains_batches``: a settling batch may claim its worker's next
    batch so (``settle_batch_and_claim``). ``upkeep_connections``: the connections the form's
    own upkeep task takes at once while deliveries are in work (the lease keeper's round:
    one), counted beside the deliveries' where those hold connections. ``counts_at_claim``:
    the claim counts the attempt in a commit of its own and reports the attempt before it
    (lease, advisory, row lock with ``count_attempt_at_claim()``), so a delivery that reports
    more than ``max_attempts`` follows deliveries that ended unsettled (their process died):
    the runtime moves it to the dead letter without running the handler."""

    holds_connections: bool
    feeds_every_worker: bool
    chains: bool
    chains_batches: bool = False
    upkeep_connections: int = 0
    counts_at_claim: bool = False


class ClaimForm(Protocol):
    """Claim, settle and release rows by one form."""

    traits: FormTraits
    closed: int  # sessions closed because their release was not confirmed

    @property
    def in_work(self) -> int:
        """Deliveries claimed and not yet settled or released."""
        ...

    async def claim(self, limit: int) -> Claimed:
        """Claim up to ``limit`` rows; claims of one form may run side by side."""
        ...

    async def settle(self, delivery: Delivery, step: Step) -> None: ...

    async def settle_and_claim(self, delivery: Delivery, step: Step, limit: int) -> Chained:
        """Settle a single delivery and claim up to ``limit`` rows for its worker in the same
        round trip where ``traits.chains``; elsewhere settle alone."""
        ...

    async def settle_batch_and_claim(
        self, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """``settle_batch``, and a claim of up to ``limit`` rows for the worker in the same
        round trip where ``traits.chains_batches``; elsewhere it claims nothing."""
        ...

    async def settle_batch(
        self, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """Settle the deliveries of one claim, each by its step, in as few round trips as
        the form allows; for each, the error its settlement met (``None``: it took effect)."""
        ...

    async def release(self, delivery: Delivery) -> None:
        """A delivery dropped unsettled: return its row at once (bounded by the caller)."""
        ...

    async def release_for_shutdown(self, delivery: Delivery) -> bool:
        """Shutdown stopped the handler: return the row; whether a hold was released."""
        ...

    def abandon(self, delivery: Delivery) -> None:
        """A release ran out of time: close what holds the row at once (the server then frees
        its locks) and forget the delivery. No I/O wait."""
        ...

    def start_serving(self) -> None:
        """Take what the form holds for the process while it serves (SQLite's advisory key
        file); a ``StartupError`` when another process holds it."""
        ...

    def stop_serving(self) -> None:
        """Let go of what :meth:`start_serving` took (``shutdown`` does too); idempotent, no
        I/O."""
        ...

    def begin_shutdown(self) -> None:
        """Shutdown began: sessions closed from now on are counted in ``closed``."""
        ...

    async def open_transaction(self, delivery: Delivery) -> Connection:
        """Transactional mode: the transaction the handler writes through."""
        ...

    async def keep(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Background upkeep while the subscription runs (the lease keeper)."""
        ...

    async def shutdown(self) -> tuple[int, int]:
        """Release what is still in work: (locks released, connections closed)."""
        ...


def step_statements(statements: Plan, step: Step) -> tuple[Statement, ...]:
    """The statements a settlement step runs, in order; none for a retry the form settles
    without a statement (advisory: the unlock returns the row; row lock without an attempt
    column: the rollback does)."""
    if isinstance(step, Ack | Drop):
        return (statements.ack,)
    if isinstance(step, Retry):
        return (statements.retry,) if statements.retry is not None else ()
    if isinstance(step, RetryAt):
        assert statements.retry_after is not None  # the subscription checked the column
        return (statements.retry_after,)
    if isinstance(step, Snooze):
        assert statements.snooze is not None  # the outcome was refused without the column
        return (statements.snooze,)
    return statements.dead_letter


def batch_event(step: Step) -> str | None:
    """The event under which rows settled by ``step`` may share one statement (a batch
    statement is by event); ``None`` for a step that settles each row alone."""
    if isinstance(step, Ack | Drop):
        return "ack"
    if isinstance(step, Retry):
        return "retry"
    if isinstance(step, RetryAt):
        return "retry_after"
    if isinstance(step, Snooze):
        return "snooze"
    return None


def step_values(step: Step) -> dict[str, object]:
    """The values a step binds besides the row's id, token and "now"."""
    if isinstance(step, RetryAt | Snooze):
        return {"retry_at": step.at, "delay": step.delay // timedelta(microseconds=1)}
    if isinstance(step, DeadLetterStep):
        return {"dest": step.dest.group}
    if isinstance(step, Ack):
        return {"result": step.result}
    if isinstance(step, Drop):
        return {"result": None}  # a dropped row's Result is NULL: waiters tell it from an ack
    return {}


def lease_expiry(now: datetime, lease: timedelta) -> datetime:
    """``now + lease`` rounded up to the next whole second, so that a column without
    fractions (MySQL DATETIME) stores the token exactly."""
    end = now + lease
    whole = end.replace(microsecond=0)
    return whole if whole == end else whole + timedelta(seconds=1)


def whole_seconds(lease: timedelta) -> timedelta:
    """A lease is whole seconds, at least one: a shorter one is rounded up."""
    return timedelta(seconds=max(1, math.ceil(lease.total_seconds())))


def held(result: object) -> bool:
    """Whether a FIFO group guard's result (one row, one number) says the group is this
    claim's."""
    assert isinstance(result, list)
    rows = cast("list[Record]", result)
    return bool(rows) and bool(rows[0][0])


def values_of(record: Record, spec: TableSpec) -> dict[str, object]:
    """Map a row read by a statement selecting every column in declaration order."""
    return {col.column: value for col, value in zip(spec.columns, record, strict=True)}


def attempt_of(spec: TableSpec, values: Mapping[str, object]) -> int | None:
    col = spec.attempt
    if col is None:
        return None
    value = values.get(col.column)
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return None
