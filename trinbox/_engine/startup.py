"""A subscription's startup checks: the declaration (no database), the statements against the
database, the form, and the worker cap its pool allows."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._api.backoff import RETRY_AFTER_FIELD, Backoff
from .._api.handler import HandlerPlan, plan_handler
from .._api.outcome import FailurePolicy, OnFailure
from .._api.queue import InboxQueue, Subscriber
from .._broker.broker import SqlBroker
from .._broker.notify import check_channel
from .._declare._inbox import spec_of
from .._declare._markers import (
    Exclusive,
    Immediate,
    Mode,
    RowLock,
    Transactional,
)
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter
from .._dialects._statement import Statement
from .._dialects.ddl import dead_letter_of
from .._dialects.plans import Plan, build_plan
from .._holders._base import FormTraits
from .._holders.connections import give_back
from ..errors import DeclarationError, ServerTooOld, StartupError, UnsupportedFetch
from .column_check import check_columns, check_unique_index, prepare_statements

__all__ = [
    "Checked",
    "HeldConnections",
    "check",
    "check_backoff",
    "check_mode",
    "check_pool_budget",
    "declared_dead_letter",
    "held_connections",
    "prepare",
    "worker_cap",
]

logger = logging.getLogger("trinbox.app")


class Checked:
    """What the checks that need no database found: the dead letter destination, the
    statements, and how the handler is called."""

    def __init__(self, dead_letter: DeadLetter | None, statements: Plan, plan: HandlerPlan) -> None:
        self.dead_letter = dead_letter
        self.statements = statements
        self.plan = plan


def check(
    where: str,
    broker: SqlBroker[Any],
    subscriber: Subscriber[Any, Any],
    *,
    max_attempts: int | None,
    dead_letter: str | None,
) -> Checked:
    """Every check that needs no database, in the reference's order."""
    queue = subscriber.queue
    spec = spec_of(queue.row)
    transactional = queue.mode is Transactional
    dest = declared_dead_letter(where, spec, max_attempts, dead_letter)
    statements = build_plan(
        broker.dialect,
        spec,
        dest,
        every_group=queue.serves_every_group,
        # The row lock form's opt-in (checked by the queue).
        count_at_claim=queue.attempt_at_claim,
        custom_claim=queue.custom is not None,
        groups=queue.group_names,
        limits=queue.limits,
    )

    if transactional and queue.batch_size is not None:
        msg = (
            f"{where}: batches never run in transactional mode, found .batch("
            f"{queue.batch_size}) with .transactional(); drop one of them"
        )
        raise DeclarationError(msg)
    check_mode(broker, spec, queue.mode, where=where)
    if broker.listen_notify:
        check_channel(spec.qualified_name, where)
    plan = plan_handler(
        subscriber.handler,
        spec,
        batch=queue.batch_size is not None,
        transactional=transactional,
        where=where,
        whole_rows=queue.whole_rows,
    )
    return Checked(dest, statements, plan)


def check_tracked(queue: InboxQueue[Any, Any, Any], spec: TableSpec, *, where: str) -> None:
    """A tracked queue reads each delivery's record id from its headers, one at a time."""
    tracker = queue.tracker
    if tracker is None:
        return
    found: tuple[str, str] | None = None
    if spec.headers is None:
        found = (
            "a tracked subscription reads each record's id from the row's Headers field",
            f"{spec.label} without one; add headers: Annotated[dict[str, str], Headers()]",
        )
    elif queue.batch_size is not None:
        found = (
            "a tracked subscription hands its handler one record at a time",
            f".batch({queue.batch_size}); drop one of them",
        )
    if found is not None:
        rule, what = found
        msg = f"{where}: {rule}, found .tracked(Tracker({tracker.table!r})) on {what}"
        raise DeclarationError(msg)


def check_fetch(broker: SqlBroker[Any], queue: InboxQueue[Any, Any, Any], *, where: str) -> None:
    """Refuse a custom claim without its fetch where the dialect reads no rows by a list of
    ids (``UnsupportedFetch``)."""
    custom = queue.custom
    if custom is None or custom.fetch is not None:
        return
    if broker.dialect.fetch_by_ids(spec_of(queue.row)) is None:
        msg = (
            f"{where}: a custom claim's rows are read by id, and {broker.dialect.name} has no "
            f"statement that binds a list of ids, found .custom_claim() without fetch=; pass "
            f"fetch=, an async function reading the rows of the ids it is given"
        )
        raise UnsupportedFetch(msg)


def check_limits(broker: SqlBroker[Any], queue: InboxQueue[Any, Any, Any]) -> None:
    """Refuse a limit the broker's dialect cannot keep in the table's form (MySQL's row lock
    form: ``UnsupportedForm``), when the queue is included rather than when it serves."""
    spec = spec_of(queue.row)
    if queue.limits is not None and spec.form is RowLock:
        broker.dialect.limited_row_lock_claim(spec, queue.limits)


def check_mode(broker: SqlBroker[Any], spec: TableSpec, mode: type[Mode], *, where: str) -> None:
    """Refuse a (form, isolation level, mode) the broker's dialect cannot mount
    (``UnsupportedIsolation``,
    ``Dialect.check_transactional``)."""
    if mode is Transactional:
        broker.dialect.check_transactional(spec, where=where)


def check_backoff(
    where: str, spec: TableSpec, failure: OnFailure, backoff: Backoff, *, chosen: bool
) -> None:
    """A failed delivery waits out its backoff in the table's RetryAfter field. A table
    without one cannot hold a row back, and a worker that waited holding the row and its slot
    (up to five minutes) would starve the queue: such a row is retried at once. So a backoff
    ``chosen`` (the queue's, the mount's, ``OnFailure(retry_delay=..)``) is refused; the
    default is warned about at the first failure it concerns (StepRules)."""
    uses_backoff = FailurePolicy.RETRY in (failure.handler, failure.decode)
    if not chosen or spec.retry_after is not None or not uses_backoff or not backoff.waits:
        return
    msg = (
        f"{where}: a backoff holds a failed row back in its RetryAfter field, found "
        f"{_backoff_label(backoff)} on {spec.label}, which has none; add a RetryAfter field "
        f"({RETRY_AFTER_FIELD}), or pass Backoff.none() to retry at once"
    )
    raise DeclarationError(msg)


def _backoff_label(backoff: Backoff) -> str:
    base, cap = backoff.base.total_seconds(), backoff.cap.total_seconds()
    if backoff.kind == "exponential":
        return f"Backoff.exponential (from {base} s, at most {cap} s)"
    if backoff.kind == "linear":
        return f"Backoff.linear ({base} s a failure, at most {cap} s)"
    return f"Backoff.{backoff.kind} ({base} s)"


def declared_dead_letter(
    where: str, spec: TableSpec, cap: int | None, dest: str | None
) -> DeadLetter | None:
    """A mount's dead letter destination (``max_attempts`` and ``dead_letter`` declared
    together), as serving and the operations read it."""
    if cap is not None and dest is None:
        msg = (
            f"{where}: max_attempts and dead_letter are declared together, found "
            f"max_attempts({cap}) without dead_letter; name where spent rows go with "
            f".dead_letter(..)"
        )
        raise DeclarationError(msg)
    if dest is not None and cap is None:
        msg = (
            f"{where}: max_attempts and dead_letter are declared together, found "
            f"dead_letter({dest!r}) without max_attempts; name the cap, "
            f"max_attempts(1) moves at the first failure"
        )
        raise DeclarationError(msg)
    if cap is None or dest is None:
        return None
    if spec.attempt is None:
        msg = (
            f"{where}: max_attempts counts the table's Attempt field, found none on "
            f"{spec.label}; add one, like attempt: Annotated[int, Attempt()]"
        )
        raise DeclarationError(msg)
    return dead_letter_of(spec, dest, where=where)


async def prepare(
    where: str,
    spec: TableSpec,
    broker: SqlBroker[Any],
    st: Plan,
    also: Sequence[Statement] = (),
    dead_letter: DeadLetter | None = None,
) -> None:
    """Check the server's version, the types of the table's role columns in its catalog, the
    unique index of a ``Unique`` field, and prepare every statement against the database
    (the plan's, and ``also``: a tracked subscription's seen-records statements)."""
    pool = broker.pool
    conn = await pool.acquire("startup check")
    try:
        version_query = broker.dialect.version_query
        if version_query is not None:
            rows = await conn.fetch(version_query)
            try:
                broker.dialect.check_server(str(rows[0][0]))
            except ServerTooOld as exc:
                # Like every startup error, it names the subscription and its table.
                msg = f"{where} on {spec.label}: {exc}"
                raise ServerTooOld(msg, server=exc.server, required=exc.required) from None
        # The types first: a column of the wrong type can fail a prepare with the server's
        # words for an operator, where the check names the column, its type and the fix.
        unread = await check_columns(where, spec, broker.dialect, conn)
        await prepare_statements(where, spec, broker.dialect, conn, [*st.all(), *also])
        if unread is not None:
            raise unread
        await check_unique_index(where, spec, broker.dialect, conn, dead_letter)
    finally:
        await give_back(pool, conn)


def worker_cap(
    where: str,
    spec: TableSpec,
    broker: SqlBroker[Any],
    traits: FormTraits,
    *,
    workers: int,
    transactional: bool,
    every_group: bool = False,
) -> int:
    """How many deliveries may be in work at once. A delivery that holds a connection holds
    it from its claim to its settlement, so such a subscription never takes the pool's last
    connection: the claims, the lease keeper, ``keys.Pool`` and publishes need it. A
    subscription to one FIFO group has one row in work; one over every group, a row of each
    of ``workers`` groups."""
    pool = broker.pool
    if spec.fifo and workers > 1 and not every_group:
        # A FIFO group has one row in work at a time: more workers would only wait.
        logger.info(
            "%s: %s is a FIFO group, handled one row at a time; workers(%d) serves as workers(1)",
            where,
            spec.label,
            workers,
        )
        workers = 1
    if traits.holds_connections:
        upkeep = traits.upkeep_connections
        # The broker's pool holds two or more; one stays free, and the lease keeper's round
        # takes one besides: it may wait on a delivery's transaction (a row lock its handler
        # took), which may wait for a connection of its own (keys.Pool, a publish).
        spare = pool.max_size - 1 - upkeep
        if workers > max(spare, 1):
            logger.warning(
                "%s: each delivery of %s holds a connection while in work, and the pool has "
                "%d besides the one kept free%s; workers(%d) serves as workers(%d) (raise "
                "pool_size to %d for all of them)",
                where,
                spec.label,
                spare,
                f" and the {upkeep} its lease keeper's rounds take" if upkeep else "",
                workers,
                max(spare, 1),
                workers + 1 + upkeep,
            )
            # Below one the pool is too small for the subscription: check_pool_budget says so.
            workers = max(spare, 1)
    if (
        workers > 1
        and transactional
        and broker.dialect.one_claim_at_a_time
        and spec.isolation in (Immediate, Exclusive)
    ):
        # SQLite's single write lock, taken at BEGIN: a second delivery's transaction would
        # wait on the first one's and fail, so one delivery is in work at a time.
        logger.warning(
            "%s: %s takes SQLite's write lock when its transaction begins, so one "
            "transactional delivery is in work at a time; workers(%d) serves as workers(1)",
            where,
            spec.label,
            workers,
        )
        workers = 1
    return workers


@dataclass(frozen=True, slots=True)
class HeldConnections:
    """The connections a subscription holds at most: one per delivery in work where its
    deliveries hold one, and then its upkeep's (the lease keeper's round) besides."""

    deliveries: int
    upkeep: int = 0

    @property
    def total(self) -> int:
        return self.deliveries + self.upkeep

    def __bool__(self) -> bool:
        return self.total > 0

    def __str__(self) -> str:
        if not self.upkeep:
            return str(self.deliveries)
        return f"{self.deliveries} and {self.upkeep} for its lease keeper"


def held_connections(traits: FormTraits, workers: int) -> HeldConnections:
    """What a subscription of ``workers`` deliveries holds, for ``check_pool_budget``."""
    if not traits.holds_connections:
        return HeldConnections(0)
    return HeldConnections(workers, traits.upkeep_connections)


def check_pool_budget(
    app: str, broker: SqlBroker[Any], holding: Sequence[tuple[str, HeldConnections]]
) -> None:
    """The subscriptions of one broker whose deliveries hold connections (``(where, held)``
    each) must leave one connection of its pool free, or their handlers can wait for ever on
    ``keys.Pool``, the lease keeper on its extensions, and the claims on their connection. A
    lease keeper's round is counted beside its deliveries: it may wait on a delivery's
    transaction, which may wait for a connection."""
    total = sum(held.total for _, held in holding)
    free = broker.pool.max_size - 1
    if total <= free:
        return
    each = ", ".join(f"{where}: {held}" for where, held in holding)
    msg = (
        f"{app}: the deliveries of one broker's subscriptions hold a connection each while in "
        f"work, and one connection of its pool stays free for claims and upkeep, found up to "
        f"{total} held ({each}) on a pool of {broker.pool.max_size}; give the broker "
        f"pool_size={total + 1}, or lower their workers(n)"
    )
    raise StartupError(msg)
