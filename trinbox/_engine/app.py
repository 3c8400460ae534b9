"""``App``: the service. It owns one nursery with every broker's pool and one nursery per
subscription; ``serve`` runs until cancelled or until ``shutdown()``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar, cast, overload

import trio

from .._api.backoff import Backoff, require_backoff
from .._api.events import EventBus, Events
from .._api.queue import Subscriber
from .._api.routed import RoutedSubscriber
from .._api.schedule import Missed, Publish
from .._api.when import When
from .._bounds import GRACE, HOOK, within
from .._broker.broker import SqlBroker
from .._broker.notify import NotifyListener, SettledAnnouncer, SlotAnnouncer
from .._declare._capabilities import (
    ANY_DATABASE_MOUNTS,
    MYSQL_MOUNTS,
    POSTGRES_MOUNTS,
    SQLITE_MOUNTS,
    AnyDatabase,
    MySql,
    Postgres,
    RowOf,
    Sqlite,
)
from .._declare._inbox import spec_of
from .._declare._markers import Advisory, Form, Lease, Mode
from .._declare._ticks import Ticks
from .._drivers.aio import asyncio_loop
from ..errors import DeclarationError, HandlerFailed
from . import startup
from .background import BackgroundTask, cancelled_at_exit
from .pauses import PauseWatcher
from .retention import RETAIN_PASS, Retain, check_retain
from .schedules import Overlap, Schedule
from .statistics import SharedStatistics, SubscriptionStatistics
from .subscription import Subscription

__all__ = ["App", "AppInfo", "Mount", "ShutdownReport"]

logger = logging.getLogger("trinbox.app")

Hook = Callable[[], Awaitable[object]]
H = TypeVar("H", bound=Hook)
T = TypeVar("T", bound=Callable[..., Awaitable[object]])
SKIP = Missed.skip()


@dataclass(frozen=True, slots=True)
class AppInfo:
    """The service's name and version (logs, and later the AsyncAPI document)."""

    name: str
    version: str = "0.1.0"
    description: str = ""


@dataclass(frozen=True, slots=True)
class ShutdownReport:
    """What shutdown released: row holds (locks, leases, transactions) of deliveries whose
    handlers were stopped, and sessions closed because their release was not confirmed."""

    locks_released: int = 0
    connections_closed: int = 0


@dataclass(eq=False)
class Mount:
    """A subscriber mounted on a broker; ``max_attempts`` and ``dead_letter`` are declared
    here, together."""

    broker: SqlBroker[Any]
    subscriber: Subscriber[Any, Any]
    attempts: int | None = None
    dead_letter_to: str | None = None
    backoff_policy: Backoff | None = None
    retention: Retain | None = None

    def max_attempts(self, count: int) -> Mount:
        """Retry at most ``count`` deliveries; the failure of the last moves the row to the
        dead letter destination."""
        self._refuse_by_name(f".max_attempts({count})")
        if count < 1:
            msg = f"max_attempts counts one attempt or more, found {count}; pass 1 or more"
            raise ValueError(msg)
        self.attempts = count
        return self

    def dead_letter(self, dest: str) -> Mount:
        """Where spent rows go: a group name (tables with a Group field) or a table
        ``[schema.]table`` with the same columns."""
        self._refuse_by_name(f".dead_letter({dest!r})")
        self.dead_letter_to = dest
        return self

    def _refuse_by_name(self, found: str) -> None:
        """A subscription by name has no dead letters (the reference's rule): its rows' name is
        their group, which a move to a dead letter group would change."""
        routed = self.subscriber.routed
        if isinstance(routed, RoutedSubscriber):
            name = routed.queue.name
            msg = (
                f"{routed!r}: a subscription by name has no dead letter destination, found "
                f"{found} on its mount; subscribe with InboxQueue(Row, {name!r}) to cap its "
                f"attempts and move spent rows"
            )
            raise DeclarationError(msg)

    def retain(
        self,
        *,
        processed: timedelta | None = None,
        dead_letters: timedelta | None = None,
        every: timedelta = RETAIN_PASS,
    ) -> Mount:
        """Delete this mount's rows marked finished (``ProcessedAt``) once older than
        ``processed``, and its dead letters (``DeadLetteredAt``) once older than
        ``dead_letters``: a pass ``every`` minute in each serving process (and one now with
        ``trinbox prune``), a short batch a statement. An unfinished row is never deleted."""
        found = Retain(processed, dead_letters, every)
        check_retain(f"{self.subscriber!r}", spec_of(self.subscriber.queue.row), found)
        self.retention = found
        return self

    def backoff(self, policy: Backoff) -> Mount:
        """The backoff of this mount's failed deliveries (over the queue's own)."""
        self.backoff_policy = require_backoff(policy)
        return self


@dataclass(eq=False)
class App:
    """A service of queue subscriptions. ``trio.run(app.serve)`` or
    ``await nursery.start(app.serve)``. ``events``: hooks (``trinbox.events.Events``) that see every
    publish of the app's brokers, claim, handler run and settlement."""

    info: AppInfo = field(default_factory=lambda: AppInfo("trinbox-app"))
    grace: float = GRACE
    events: Events | Sequence[Events] = ()
    _mounts: list[Mount] = field(default_factory=list[Mount], init=False)
    _brokers: list[SqlBroker[Any]] = field(default_factory=list[SqlBroker[Any]], init=False)
    _startup: list[Hook] = field(default_factory=list[Hook], init=False)
    _shutdown_hooks: list[Hook] = field(default_factory=list[Hook], init=False)
    _tasks: list[BackgroundTask] = field(default_factory=list[BackgroundTask], init=False)
    _schedules: list[Schedule] = field(default_factory=list[Schedule], init=False)
    _task_failed: bool = field(default=False, init=False)
    _stop: trio.Event | None = field(default=None, init=False)
    _stop_asked: bool = field(default=False, init=False)  # shutdown() before serve began
    _serving: bool = field(default=False, init=False)
    _failure: BaseException | None = field(default=None, init=False)
    report: ShutdownReport | None = field(default=None, init=False)
    _subscriptions: list[Subscription] = field(default_factory=list[Subscription], init=False)
    _hooks: list[Events] = field(default_factory=list[Events], init=False)
    _shared: SharedStatistics | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        for hook in [self.events] if isinstance(self.events, Events) else self.events:
            self.add_events(hook)

    def add_events(self, hook: Events) -> None:
        """Register an event hook; it takes effect at the next ``serve``."""
        if not isinstance(hook, Events):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = (
                f"an event hook is a trinbox.events.Events, found {type(hook).__name__}; subclass "
                f"trinbox.events.Events and override the methods you need"
            )
            raise TypeError(msg)
        if hook not in self._hooks:
            self._hooks.append(hook)

    def on_startup(self, hook: H) -> H:
        """Run ``hook`` once the brokers' pools are open, before any subscription checks its
        statements against the database (create the schema here)."""
        self._startup.append(hook)
        return hook

    def on_shutdown(self, hook: H) -> H:
        """Run ``hook`` after every subscription has stopped."""
        self._shutdown_hooks.append(hook)
        return hook

    def _schedule(self, name: str) -> Schedule:
        """The schedule named ``name`` (trinbox.testing fires its ticks)."""
        for schedule in self._schedules:
            if schedule.name == name:
                return schedule
        known = ", ".join(repr(s.name) for s in self._schedules) or "none"
        msg = f"{self.info.name} has no schedule named {name!r} (schedules: {known})"
        raise LookupError(msg)

    def background(self, task: T) -> T:
        """Run ``task``, an async function taking no arguments (or only ``task_status``), in
        ``serve``'s nursery: started once every subscription serves (``serve`` reports started
        after a ``task_status`` task has), cancelled once every subscription has stopped,
        before the shutdown hooks and the pools' close. An exception it raises stops the app
        gracefully, and ``serve`` raises it."""
        self._tasks.append(BackgroundTask.of(task))
        return task

    # One overload per dialect, as a publish checks it: the forms whose rows the broker's
    # database writes (a row lock table on SQLite matches none).
    @overload
    def schedule(
        self,
        broker: SqlBroker[Sqlite],
        name: str,
        when: When,
        publish: Publish[RowOf[Lease | Advisory, Any]],
        *,
        ticks: Ticks,
        missed: Missed = ...,
        overlap: Overlap = ...,
    ) -> Schedule: ...
    @overload
    def schedule(
        self,
        broker: SqlBroker[Postgres],
        name: str,
        when: When,
        publish: Publish[RowOf[Form, Any]],
        *,
        ticks: Ticks,
        missed: Missed = ...,
        overlap: Overlap = ...,
    ) -> Schedule: ...
    @overload
    def schedule(
        self,
        broker: SqlBroker[MySql],
        name: str,
        when: When,
        publish: Publish[RowOf[Form, Any]],
        *,
        ticks: Ticks,
        missed: Missed = ...,
        overlap: Overlap = ...,
    ) -> Schedule: ...
    @overload
    def schedule(
        self,
        broker: SqlBroker[AnyDatabase],
        name: str,
        when: When,
        publish: Publish[RowOf[Lease | Advisory, Any]],
        *,
        ticks: Ticks,
        missed: Missed = ...,
        overlap: Overlap = ...,
    ) -> Schedule: ...
    def schedule(
        self,
        broker: SqlBroker[Any],
        name: str,
        when: When,
        publish: Publish[Any],
        *,
        ticks: Ticks,
        missed: Missed = SKIP,
        overlap: Overlap = "allow",
    ) -> Schedule:
        """Publish ``publish``'s row into ``broker`` at each tick of ``when`` (``Cron`` or
        ``Every``), once per tick across every process serving this app: each tick's row is
        written in one transaction with the tick's mark in ``ticks`` (its primary key is
        (schedule, tick)), so a pooler, skewed clocks or ten processes delay a tick, never
        duplicate it. ``missed``: which ticks whose time passed unfired still fire
        (``Missed.skip()``: only up to a minute late). ``overlap="skip"`` skips a tick while
        an earlier tick's row is unfinished (keyed by the row's ``Unique()`` field). ``name``
        names its ticks: a renamed
        schedule is a new one. The returned ``Schedule`` gives ``statistics()``."""
        for known in self._schedules:
            if known.name == name:
                msg = (
                    f"app.schedule({name!r}): an app has one schedule per name (its ticks are "
                    f"recorded by name), found {name!r} declared twice; name the second one "
                    f"apart"
                )
                raise DeclarationError(msg)
        found = Schedule(
            broker,
            name,
            when,
            publish,
            ticks=ticks,
            missed=missed,
            overlap=overlap,
        )
        self._schedules.append(found)
        return found

    @property
    def schedules(self) -> tuple[Schedule, ...]:
        """Every schedule, in the order they were declared."""
        return tuple(self._schedules)

    # One overload per dialect: what it mounts (_capabilities.py) against what the subscriber
    # needs (its Needs: the row, the row's form and isolation level, the mode). A broker typed
    # SqlBroker[Any] takes any subscriber some dialect mounts; a refusal (refusals.py) or a
    # subscriber the broker's dialect does not mount matches none. The other slots are
    # object, not Any: a subscriber written inline, include(broker, subscriber(q)(fn)), is
    # inferred against this type, and an Any there would let the handler's context keys
    # match any annotation.
    # A subscription by name: its routes were checked against the dialect when declared.
    @overload
    def include(self, broker: SqlBroker[Any], subscriber: RoutedSubscriber[object]) -> Mount: ...
    @overload
    def include(
        self,
        broker: SqlBroker[Sqlite],
        subscriber: Subscriber[object, Mode, object, SQLITE_MOUNTS | None],
    ) -> Mount: ...
    @overload
    def include(
        self,
        broker: SqlBroker[Postgres],
        subscriber: Subscriber[object, Mode, object, POSTGRES_MOUNTS | None],
    ) -> Mount: ...
    @overload
    def include(
        self,
        broker: SqlBroker[MySql],
        subscriber: Subscriber[object, Mode, object, MYSQL_MOUNTS | None],
    ) -> Mount: ...
    @overload
    def include(
        self,
        broker: SqlBroker[AnyDatabase],
        subscriber: Subscriber[object, Mode, object, ANY_DATABASE_MOUNTS | None],
    ) -> Mount: ...
    def include(
        self,
        broker: SqlBroker[Any],
        subscriber: Subscriber[Any, Any, Any, Any] | RoutedSubscriber[Any],
    ) -> Mount:
        """Mount ``subscriber`` on ``broker``. The dialect must serve the table's form and
        isolation level in the subscriber's mode: type checkers refuse what it cannot, and so
        does this call. A subscription by name (``RoutedQueue``) is mounted on the table the
        broker's routes lead its name into: route it before it is included."""
        if isinstance(subscriber, RoutedSubscriber):
            subscriber = subscriber.mounted(
                broker.routes, where=f"app.include(broker, {subscriber!r})"
            )
        # Untyped callers pass anything.
        if not isinstance(subscriber, Subscriber):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = (
                f"include mounts a subscriber, found {subscriber!r}; decorate the handler with "
                f"@subscriber(InboxQueue(Row, name))"
            )
            raise TypeError(msg)
        spec = spec_of(subscriber.queue.row)
        broker.dialect.check(spec)
        startup.check_mode(broker, spec, subscriber.queue.mode, where=repr(subscriber))
        startup.check_fetch(broker, subscriber.queue, where=repr(subscriber))
        startup.check_tracked(subscriber.queue, spec, where=repr(subscriber))
        mount = Mount(broker, subscriber)
        self._mounts.append(mount)
        return mount

    def add_broker(self, broker: SqlBroker[Any]) -> None:
        """Open ``broker`` with the app even when nothing subscribes through it (a process
        that only publishes)."""
        if broker not in self._brokers:
            self._brokers.append(broker)

    @property
    def mounts(self) -> tuple[Mount, ...]:
        """Every mounted subscriber, in the order they were included."""
        return tuple(self._mounts)

    @property
    def brokers(self) -> tuple[SqlBroker[Any], ...]:
        """Every broker the app opens: those added with ``add_broker`` and those mounted on."""
        return tuple(
            dict.fromkeys(
                [
                    *self._brokers,
                    *(m.broker for m in self._mounts),
                    *(s.broker for s in self._schedules),
                ]
            )
        )

    @overload
    def statistics(self) -> tuple[SubscriptionStatistics, ...]: ...
    @overload
    def statistics(
        self, subscriber: Subscriber[Any, Any] | RoutedSubscriber[Any]
    ) -> SubscriptionStatistics: ...
    def statistics(
        self, subscriber: Subscriber[Any, Any] | RoutedSubscriber[Any] | None = None
    ) -> tuple[SubscriptionStatistics, ...] | SubscriptionStatistics:
        """Counters of every subscription, in mount order (of the last ``serve``), or of the
        one of ``subscriber``: frozen snapshots, as Trio's ``statistics()`` methods return.
        Call it from the Trio thread the app serves on; another thread reads
        :meth:`share_statistics`."""
        if subscriber is not None:
            return self._subscription(subscriber).statistics()
        return tuple(sub.statistics() for sub in self._subscriptions)

    def share_statistics(self) -> SharedStatistics:
        """The app's statistics for a reader on another thread (a metrics exporter's):
        ``serve`` publishes ``statistics()`` into it from the Trio side, every second and
        once more when its subscriptions have stopped. Every call returns the same one."""
        if self._shared is None:
            self._shared = SharedStatistics()
        return self._shared

    def _subscription(
        self, subscriber: Subscriber[Any, Any] | RoutedSubscriber[Any]
    ) -> Subscription:
        """The running subscription of a mounted subscriber, or of a subscription by name
        (trinbox.testing reads it)."""
        for sub in self._subscriptions:
            if sub.subscriber is subscriber or sub.subscriber.routed is subscriber:
                return sub
        msg = f"{subscriber!r} is not serving in {self.info.name}; include it and serve first"
        raise LookupError(msg)

    def shutdown(self) -> None:
        """Stop claiming and shut down gracefully; ``serve`` then returns its report. Before
        ``serve`` began (``nursery.start_soon(app.serve)`` has not run yet), the next
        ``serve`` starts up, claims nothing and shuts down at once."""
        self._stop_asked = True
        if self._stop is not None:
            self._stop.set()
            # Claiming stops now, not when serve next runs: a settlement that would claim
            # its worker's next row sees it at once.
            for sub in self._subscriptions:
                sub.stop()

    def cut_grace(self) -> None:
        """Shut down without the grace: handlers still in work are cancelled now and their rows
        released (``trinbox run``'s second signal)."""
        self.shutdown()
        for sub in self._subscriptions:
            sub.cut_grace()

    def _sharing(self) -> AbstractAsyncContextManager[None]:
        """Around the subscriptions' nursery: the statistics of subscriptions and schedules
        published for other threads, if any reader asked for them, up to the last
        subscription's end."""
        shared = self._shared
        if shared is None:
            return nullcontext()
        return shared.published(
            self.statistics, lambda: tuple(s.statistics() for s in self._schedules)
        )

    def _announces_settlements(self, broker: SqlBroker[Any]) -> bool:
        """Whether the broker tells other processes of its settlements (``broker.wait``):
        where it listens, so NOTIFY exists, and serves a table with a Result field."""
        return (
            broker.listen_notify
            and broker.dialect.notify_statement() is not None
            and any(s.broker is broker and s.spec.result is not None for s in self._subscriptions)
        )

    def _announces_freed_slots(self, broker: SqlBroker[Any]) -> bool:
        """Whether the broker tells other processes of its limited queues' freed slots:
        where it listens, so NOTIFY exists, and serves a limited queue."""
        return (
            broker.listen_notify
            and broker.dialect.notify_statement() is not None
            and any(s.broker is broker and s.queue.limits is not None for s in self._subscriptions)
        )

    def _fail_fast(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self.shutdown()

    def _background_failed(self, exc: BaseException) -> None:
        self._task_failed = self._task_failed or self._failure is None
        self._fail_fast(exc)

    async def serve(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> ShutdownReport:
        """Open every broker and subscription, report started, and run until cancelled or
        ``shutdown()`` (both do the same); then stop claiming, give handlers ``grace`` seconds,
        release what is still in work, run the shutdown hooks and close the pools.

        Raises what went wrong as itself, never wrapped in an exception group when only one
        thing did: a ``StartupError`` (``SchemaError``, ``ServerTooOld``, ...) or
        ``ConnectError`` at startup, ``HandlerFailed`` under the fail-fast policy, a
        background task's exception, ``KeyboardInterrupt`` on Ctrl-C. A
        ``BaseExceptionGroup`` reaches the caller only when several independent failures
        happened."""
        if self._serving:
            msg = (
                f"{self.info.name}: an app serves once at a time, found serve() called while "
                f"it is serving; shut the first serve down and wait for it to return, or "
                f"serve a second App"
            )
            raise RuntimeError(msg)
        self._serving = True
        one: BaseException | None = None
        try:
            return await self._serve(task_status)
        except BaseExceptionGroup as group:
            one = _single(group)
            if one is group:
                raise
        finally:
            self._serving = False
            self._stop = None
            self._stop_asked = False  # spent: a later serve serves
        raise one

    async def _serve(self, task_status: trio.TaskStatus[None]) -> ShutdownReport:
        self._stop = trio.Event()
        if self._stop_asked:
            self._stop.set()
        self._failure = None
        self._task_failed = False
        events = EventBus(self._hooks) if self._hooks else None
        self._subscriptions = [
            Subscription(
                mount.broker,
                mount.subscriber,
                max_attempts=mount.attempts,
                dead_letter=mount.dead_letter_to,
                backoff=mount.backoff_policy,
                retain=mount.retention,
                grace=self.grace,
                on_fail_fast=self._fail_fast,
                events=events,
            )
            for mount in self._mounts
        ]
        for sub in self._subscriptions:
            sub.check()
        brokers = list(self.brokers)
        for broker in brokers:
            broker.events = events
        async with asyncio_loop(any(b.needs_asyncio for b in brokers)):
            try:
                for broker in brokers:
                    await broker.open()
                for hook in self._startup:
                    await hook()
                watchers = [
                    PauseWatcher(broker, broker.pause_plan)
                    for broker in brokers
                    if broker.pause_plan is not None
                    and any(s.broker is broker for s in self._subscriptions)
                ]
                for watcher in watchers:  # the pauses read before any claim
                    await watcher.open()
                for sub in self._subscriptions:
                    await sub.open()
                for schedule in self._schedules:
                    await schedule.open(events)
                for broker in brokers:
                    holding = [
                        (s.where, s.held_connections)
                        for s in self._subscriptions
                        if s.broker is broker and s.held_connections
                    ]
                    startup.check_pool_budget(self.info.name, broker, holding)
                # Background tasks are cancelled once the subscriptions' nursery has ended.
                async with (
                    self._sharing(),
                    cancelled_at_exit() as tasks,
                    trio.open_nursery() as nursery,
                ):
                    listeners = [
                        NotifyListener(
                            broker,
                            {
                                s.spec.qualified_name
                                for s in self._subscriptions
                                if s.broker is broker
                            }
                            | ({broker.pauses.label} if broker.pauses is not None else set()),
                        )
                        for broker in brokers
                        if broker.listen_notify
                    ]
                    try:
                        for listener in listeners:
                            await nursery.start(listener.run)
                        for watcher in watchers:
                            await nursery.start(watcher.run)
                        for sub in self._subscriptions:
                            if self._stop.is_set():
                                sub.stop()  # shut down during startup: claim nothing
                            await nursery.start(sub.run)
                        for task in self._tasks:
                            await tasks.start(task.run, self.info.name, self._background_failed)
                        for broker in brokers:
                            if self._announces_settlements(broker):
                                await tasks.start(SettledAnnouncer(broker).run)
                            if self._announces_freed_slots(broker):
                                await tasks.start(SlotAnnouncer(broker).run)
                        if not self._stop.is_set():
                            for schedule in self._schedules:
                                await tasks.start(schedule.run)
                            for sub in self._subscriptions:
                                if sub.retention is not None:
                                    await tasks.start(sub.retention.run)
                        logger.info(
                            "%s: %d subscriptions serving", self.info.name, len(self._subscriptions)
                        )
                        task_status.started()
                        await self._stop.wait()
                    finally:
                        # However serving ends (shutdown(), a cancel, a crash), claiming stops
                        # at once, before the subscriptions' own tasks see it.
                        for sub in self._subscriptions:
                            sub.stop()
                        for schedule in self._schedules:
                            schedule.stop()
                        for sub in self._subscriptions:
                            if sub.retention is not None:
                                sub.retention.stop()
                        for listener in listeners:
                            listener.stop()
                        for watcher in watchers:
                            watcher.stop()
            finally:
                self.report = ShutdownReport(
                    locks_released=sum(s.locks_released for s in self._subscriptions if s.opened),
                    connections_closed=sum(
                        s.connections_closed for s in self._subscriptions if s.opened
                    ),
                )
                for hook in self._shutdown_hooks:
                    with within(HOOK) as bound:
                        try:
                            await hook()
                        except Exception:
                            logger.exception("%s: a shutdown hook failed", self.info.name)
                    if bound.cancelled_caught:
                        logger.warning(
                            "%s: a shutdown hook ran over %s s; cut", self.info.name, HOOK
                        )
                for sub in self._subscriptions:
                    sub.stop_serving()  # one opened that never ran holds SQLite's key file still
                with trio.CancelScope(shield=True):
                    for broker in brokers:
                        await broker.aclose()
                logger.info(
                    "%s: shut down; %d locks released, %d connections closed",
                    self.info.name,
                    self.report.locks_released,
                    self.report.connections_closed,
                )
        if self._failure is not None and self._task_failed:
            raise self._failure  # a background task's exception, as itself
        if self._failure is not None:
            msg = (
                f"{self.info.name}: a handler raised under the fail-fast policy: {self._failure!r}"
            )
            raise HandlerFailed(msg) from self._failure
        return self.report


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one failure a group carries (the cancellations it caused left out), or the group
    itself when it carries several."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            # isinstance narrows to BaseExceptionGroup[Unknown] under pyright.
            nested = cast("BaseExceptionGroup[BaseException]", exc)
            for inner in nested.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    failures = [e for e in leaves if not isinstance(e, trio.Cancelled)] or leaves
    distinct = list({id(e): e for e in failures}.values())
    return distinct[0] if len(distinct) == 1 else group
