"""The event hook: what trinbox reports as it publishes, claims, handles and settles, to
``Events`` subclasses (the Prometheus and OpenTelemetry adapters, or a user's own).

Nothing here runs when no hook is registered: the runtime holds an ``EventBus`` or ``None``
and tests it once per event (``if events is not None``), so an app without hooks makes no
event record, reads no clock and calls nothing. A hook is called synchronously from the task
the event happened in; a hook that raises is logged (its traceback once per hook and method)
and never changes what trinbox does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "ClaimEvent",
    "EventBus",
    "Events",
    "HandleEnd",
    "HandleEvent",
    "LeaseEvent",
    "PublishEvent",
    "PublishStart",
    "ReleaseEvent",
    "SettleEvent",
    "TickEvent",
    "EventSource",
    "now_ns",
]

logger = logging.getLogger("trinbox.events")

now_ns = time.time_ns  # wall time of an event's start, as OpenTelemetry takes it


@dataclass(frozen=True, slots=True)
class EventSource:
    """The subscription an event is about (one record per subscription, made at startup).

    ``system``: the database, ``"postgresql"``, ``"mysql"`` or ``"sqlite"``; ``table``: the
    table's qualified name; ``group``: the group the subscription reads, or ``None``."""

    subscription: str
    subscriber: str
    table: str
    group: str | None
    system: str


@dataclass(frozen=True, slots=True)
class PublishStart:
    """A publish about to write its row into a table with a Headers field, by
    ``broker.publish`` (``transactional=False``) or ``tx.publish`` (``True``): a hook may give
    headers to write with it (``Events.publishing``). ``headers``: the publish's own (which
    win over a hook's). ``start_ns`` is the ``PublishEvent``'s. ``rows``: the rows a batch
    (``publish_many``) writes with these headers; ``group`` is theirs when they share one."""

    table: str
    group: str | None
    system: str
    transactional: bool
    start_ns: int
    headers: Mapping[str, str]
    rows: int = 1


@dataclass(frozen=True, slots=True)
class PublishEvent:
    """A row written by ``broker.publish`` (``transactional=False``) or ``tx.publish``
    (``True``: it commits with its transaction). ``error``: why the write failed. ``rows``:
    the rows a batch (``publish_many``) wrote; ``group`` is theirs when they share one."""

    table: str
    group: str | None
    system: str
    transactional: bool
    start_ns: int
    duration: float
    error: BaseException | None
    rows: int = 1


@dataclass(frozen=True, slots=True)
class ClaimEvent:
    """A claim's round trip: ``count`` rows taken of ``limit`` asked for. ``chained``: the
    claim ran with a settlement, in the same round trip (its ``duration`` is theirs
    together). ``error``: the claim failed (``count`` is 0)."""

    source: EventSource
    count: int
    limit: int
    chained: bool
    start_ns: int
    duration: float
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class HandleEvent:
    """A handler about to run: the rows it gets (one, or a batch) and the attempt of the
    first. ``headers``: each row's headers, in the order of ``row_ids`` (empty for a table
    without a Headers field)."""

    source: EventSource
    row_ids: tuple[object, ...]
    attempt: int | None
    start_ns: int
    headers: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class HandleEnd:
    """How a handler ended: ``outcomes`` (one per row: ``"ack"``, ``"retry"``,
    ``"retry_after"``, ``"snooze"``, ``"drop"``) when it returned; ``error`` when it raised or was
    cancelled (``outcomes`` is then empty)."""

    outcomes: tuple[str, ...]
    error: BaseException | None
    duration: float


@dataclass(frozen=True, slots=True)
class SettleEvent:
    """A row's settlement: ``outcome`` is the step (``"ack"``, ``"retry"``,
    ``"retry_after"``, ``"snooze"``: put back with no attempt spent, ``"drop"``,
    ``"dead_letter"``); ``error`` is why it did not take
    effect (the delivery is then released). ``batch``: how many rows settled together."""

    source: EventSource
    row_id: object
    attempt: int | None
    outcome: str
    batch: int
    start_ns: int
    duration: float
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class LeaseEvent:
    """The lease keeper moved a row's lease forward (``extended``), or found it gone."""

    source: EventSource
    row_id: object
    extended: bool


@dataclass(frozen=True, slots=True)
class ReleaseEvent:
    """A delivery that ended unsettled (its handler cancelled or crashed, its settlement
    failed, the app shutting down) was returned to its queue. ``abandoned``: the release ran
    out of time and its connection was closed instead."""

    source: EventSource
    row_id: object
    attempt: int | None
    shutdown: bool
    abandoned: bool


@dataclass(frozen=True, slots=True)
class TickEvent:
    """What became of one tick of a schedule in this process (``outcome``: ``"published"``,
    ``"skipped"``, ``"taken"``, ``"missed"`` or ``"failed"``, as ``trinbox.schedules.Outcome``
    says). ``tick`` is its UTC instant; ``error`` why its transaction failed. ``duration``:
    the tick's transaction (0 for a missed tick)."""

    schedule: str
    tick: datetime
    outcome: str
    system: str
    start_ns: int
    duration: float
    error: BaseException | None


class Events:
    """trinbox's event hook: subclass it and override what you need (every method does
    nothing here), then register it with ``App(events=[hook])`` or ``app.add_events(hook)``.

    Methods are called synchronously in the task where the event happened: keep them quick
    and never block. A method that raises is logged on ``trinbox.events`` (with its
    traceback the first time) and ignored.
    """

    def publishing(self, event: PublishStart) -> Mapping[str, str] | None:
        """A publish into a table with a Headers field is about to write its row (in the
        publishing task; ``published`` follows, whatever happens): the headers this returns
        are written with the publish's own, which win over them (the OpenTelemetry adapter
        gives the trace context here). They follow the publish's rule for headers."""
        return None

    def published(self, event: PublishEvent) -> None:
        """A publish wrote its row (or failed)."""

    def claimed(self, event: ClaimEvent) -> None:
        """A claim returned (rows or none), or failed."""

    def handle_started(self, event: HandleEvent) -> object:
        """A handler is about to run; what this returns is given to ``handle_ended`` (a span,
        a start time...). It runs in the handler's task, so a context variable set here (an
        OpenTelemetry context) is what the handler sees."""
        return None

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        """The handler returned, raised or was cancelled; ``state`` is what
        ``handle_started`` returned (``None`` if it raised)."""

    def settled(self, event: SettleEvent) -> None:
        """A row's settlement took effect, or failed (``event.error``)."""

    def lease_extended(self, event: LeaseEvent) -> None:
        """A lease was moved forward, or found lost."""

    def released(self, event: ReleaseEvent) -> None:
        """A delivery ended unsettled and its row was returned."""

    def ticked(self, event: TickEvent) -> None:
        """A schedule's tick was fired here, found fired elsewhere, let go, or failed."""


class EventBus:
    """The app's hooks, each called in turn; a hook's failure is contained here."""

    def __init__(self, hooks: Sequence[Events]) -> None:
        self.hooks: tuple[Events, ...] = tuple(hooks)
        self.failures: int = 0
        self._reported: set[tuple[int, str]] = set()

    def _failed(self, hook: Events, method: str) -> None:
        self.failures += 1
        key = (id(hook), method)
        if key in self._reported:
            return
        self._reported.add(key)
        logger.warning(
            "the event hook %s.%s raised; trinbox goes on (further failures of it are counted, "
            "not logged)",
            type(hook).__qualname__,
            method,
            exc_info=True,
        )

    def publishing(self, event: PublishStart) -> dict[str, str]:
        """The headers every hook gives, a later hook's over an earlier one's."""
        found: dict[str, str] = {}
        for hook in self.hooks:
            try:
                given = hook.publishing(event)
                if given:
                    found.update(given)
            except Exception:
                self._failed(hook, "publishing")
        return found

    def published(self, event: PublishEvent) -> None:
        for hook in self.hooks:
            try:
                hook.published(event)
            except Exception:
                self._failed(hook, "published")

    def claimed(self, event: ClaimEvent) -> None:
        for hook in self.hooks:
            try:
                hook.claimed(event)
            except Exception:
                self._failed(hook, "claimed")

    def handle_started(self, event: HandleEvent) -> list[object]:
        states: list[object] = []
        for hook in self.hooks:
            state = None
            try:
                state = hook.handle_started(event)
            except Exception:
                self._failed(hook, "handle_started")
            states.append(state)
        return states

    def handle_ended(self, event: HandleEvent, states: list[object], end: HandleEnd) -> None:
        # In reverse: a hook that set a context variable at the start resets it last-in,
        # first-out.
        for hook, state in zip(reversed(self.hooks), reversed(states), strict=True):
            try:
                hook.handle_ended(event, state, end)
            except Exception:
                self._failed(hook, "handle_ended")

    def settled(self, event: SettleEvent) -> None:
        for hook in self.hooks:
            try:
                hook.settled(event)
            except Exception:
                self._failed(hook, "settled")

    def lease_extended(self, event: LeaseEvent) -> None:
        for hook in self.hooks:
            try:
                hook.lease_extended(event)
            except Exception:
                self._failed(hook, "lease_extended")

    def released(self, event: ReleaseEvent) -> None:
        for hook in self.hooks:
            try:
                hook.released(event)
            except Exception:
                self._failed(hook, "released")

    def ticked(self, event: TickEvent) -> None:
        for hook in self.hooks:
            try:
                hook.ticked(event)
            except Exception:
                self._failed(hook, "ticked")
