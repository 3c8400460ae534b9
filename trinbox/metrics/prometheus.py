"""Prometheus metrics over trinbox's event hook (the ``trinbox[prometheus]`` extra).

    from trinbox.metrics.prometheus import PrometheusMetrics

    PrometheusMetrics(app)          # counters, histograms and gauges in the default registry
    prometheus_client.start_http_server(9100)

Every series is labelled by ``queue`` (the subscription's name) and ``table``; publishes by
``table`` (and ``group`` with ``group_label=True``). ``QueueDepthGauges.of_app(app)`` adds
each queue's depth, read by ``trinbox inspect``'s queries in a task of its own (scrapes never
wait for a query).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

import trio

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a subprocess
    msg = (
        "trinbox.metrics.prometheus needs prometheus_client; install trinbox's extra: pip "
        'install "trinbox[prometheus]"'
    )
    raise ImportError(msg, name=exc.name) from exc

from .._api.events import (
    ClaimEvent,
    Events,
    HandleEnd,
    HandleEvent,
    LeaseEvent,
    PublishEvent,
    ReleaseEvent,
    SettleEvent,
)
from .._engine.app import App
from .._operations.queues import depths, queues_of

__all__ = ["DepthLike", "PrometheusMetrics", "QueueDepthGauges"]

# Handlers: a few milliseconds to minutes. Claims: sub-millisecond to a second.
HANDLER_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

QUEUE = ("queue", "table")

_log = logging.getLogger("trinbox.metrics")


class PrometheusMetrics(Events):
    """Counters, histograms and gauges of an app's queues, as an event hook.

    ``PrometheusMetrics(app)`` registers itself on ``app`` and adds the in-work gauge; without
    ``app``, register it yourself (``App(events=[metrics])``) and the in-work gauge is left
    out. ``registry``: where the metrics go (default: prometheus_client's global
    ``REGISTRY``); ``namespace`` prefixes every name. ``group_label``: also label publishes
    by their group. Off by default: a group per tenant, customer or account would make a
    series of each, without bound.

    =========================================  =======================================
    ``trinbox_published_total``                rows published, by table, result (and
                                               group, with ``group_label=True``)
    ``trinbox_claims_total``                   claims, by result (rows, empty, error)
    ``trinbox_claimed_total``                  deliveries claimed
    ``trinbox_claim_duration_seconds``         claim round trips (histogram), by
                                               ``chained``: ``"false"`` for the claim
                                               loop's, ``"true"`` for a claim run with a
                                               settlement (its time includes it)
    ``trinbox_handler_duration_seconds``       handler runs, by result (ok, error)
    ``trinbox_handlers_running``               handlers running now (gauge)
    ``trinbox_settled_total``                  settlements that took effect, by outcome
    ``trinbox_settle_failures_total``          settlements that did not, by outcome
    ``trinbox_released_total``                 deliveries returned unsettled
    ``trinbox_lease_extensions_total``         lease extensions, by result (extended, lost)
    ``trinbox_in_work``                        deliveries in work (with ``app``; as the
                                               app published them, each second)
    ``trinbox_schedule_ticks_total``           each schedule's ticks, by result
                                               (published, skipped, taken, missed,
                                               failed; with ``app``, as ``in_work``)
    =========================================  =======================================
    """

    def __init__(
        self,
        app: App | None = None,
        *,
        registry: CollectorRegistry | None = None,
        namespace: str = "trinbox",
        group_label: bool = False,
    ) -> None:
        registry = REGISTRY if registry is None else registry
        ns = namespace
        self._group_label = group_label
        published = ("table", "group", "result") if group_label else ("table", "result")
        self._published = Counter(
            "published", "Rows published.", published, namespace=ns, registry=registry
        )
        self._claims = Counter(
            "claims", "Claims run.", (*QUEUE, "result"), namespace=ns, registry=registry
        )
        self._claimed = Counter(
            "claimed", "Deliveries claimed.", QUEUE, namespace=ns, registry=registry
        )
        self._claim_seconds = Histogram(
            "claim_duration_seconds",
            "Claim round trips (a chained claim's includes its settlement).",
            (*QUEUE, "chained"),
            namespace=ns,
            registry=registry,
            buckets=CLAIM_BUCKETS,
        )
        self._handler_seconds = Histogram(
            "handler_duration_seconds",
            "Handler runs.",
            (*QUEUE, "result"),
            namespace=ns,
            registry=registry,
            buckets=HANDLER_BUCKETS,
        )
        self._running = Gauge(
            "handlers_running", "Handlers running now.", QUEUE, namespace=ns, registry=registry
        )
        self._settled = Counter(
            "settled",
            "Settlements that took effect.",
            (*QUEUE, "outcome"),
            namespace=ns,
            registry=registry,
        )
        self._settle_failures = Counter(
            "settle_failures",
            "Settlements that did not take effect (the delivery was released).",
            (*QUEUE, "outcome"),
            namespace=ns,
            registry=registry,
        )
        self._released = Counter(
            "released", "Deliveries returned unsettled.", QUEUE, namespace=ns, registry=registry
        )
        self._leases = Counter(
            "lease_extensions",
            "Lease extensions by the lease keeper.",
            (*QUEUE, "result"),
            namespace=ns,
            registry=registry,
        )
        self.registry = registry
        if app is not None:
            registry.register(_InWork(app, ns))
            registry.register(_Ticks(app, ns))
            app.add_events(self)

    # -- the hook ------------------------------------------------------------------------------

    def published(self, event: PublishEvent) -> None:
        result = "ok" if event.error is None else "error"
        if self._group_label:
            self._published.labels(event.table, event.group or "", result).inc(event.rows)
        else:
            self._published.labels(event.table, result).inc(event.rows)

    def claimed(self, event: ClaimEvent) -> None:
        queue = (event.source.subscription, event.source.table)
        if event.error is not None:
            result = "error"
        else:
            result = "rows" if event.count else "empty"
            self._claimed.labels(*queue).inc(event.count)
        self._claims.labels(*queue, result).inc()
        chained = "true" if event.chained else "false"
        self._claim_seconds.labels(*queue, chained).observe(event.duration)

    def handle_started(self, event: HandleEvent) -> object:
        self._running.labels(event.source.subscription, event.source.table).inc()
        return None

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        queue = (event.source.subscription, event.source.table)
        self._running.labels(*queue).dec()
        result = "ok" if end.error is None else "error"
        self._handler_seconds.labels(*queue, result).observe(end.duration)

    def settled(self, event: SettleEvent) -> None:
        counter = self._settled if event.error is None else self._settle_failures
        counter.labels(event.source.subscription, event.source.table, event.outcome).inc()

    def lease_extended(self, event: LeaseEvent) -> None:
        result = "extended" if event.extended else "lost"
        self._leases.labels(event.source.subscription, event.source.table, result).inc()

    def released(self, event: ReleaseEvent) -> None:
        self._released.labels(event.source.subscription, event.source.table).inc()


class _InWork(Collector):
    """``trinbox_in_work``: deliveries claimed and not yet settled or released, from the
    statistics the serving app last published (exact, whatever ended each delivery; at most
    a second old). A scrape runs on the exporter's thread, so it reads only that published
    snapshot, never the app's live counters, which belong to the Trio thread."""

    def __init__(self, app: App, namespace: str) -> None:
        self._shared = app.share_statistics()
        self._name = f"{namespace}_in_work"

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            self._name, "Deliveries claimed and not yet settled or released.", labels=QUEUE
        )
        for stats in self._shared.latest:
            gauge.add_metric([stats.queue, stats.table], stats.in_work)
        yield gauge

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self._name, "Deliveries in work.", labels=QUEUE)]


class _Ticks(Collector):
    """``trinbox_schedule_ticks_total``: each schedule's ticks in this process, by
    ``result``, as ``ScheduleStatistics`` counts them, from the statistics the serving app
    last published (read on the exporter's thread, as ``_InWork`` reads)."""

    RESULTS = ("published", "skipped", "taken", "missed", "failed")

    def __init__(self, app: App, namespace: str) -> None:
        self._shared = app.share_statistics()
        self._name = f"{namespace}_schedule_ticks"

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(
            self._name,
            "Schedule ticks in this process: published, skipped (overlap), taken (another "
            "process fired it), missed (the missed-ticks policy), failed (a transaction).",
            labels=("schedule", "result"),
        )

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for stats in self._shared.schedules:
            for result in self.RESULTS:
                family.add_metric([stats.name, result], getattr(stats, result))
        yield family

    def describe(self) -> Iterable[Metric]:
        return [self._family()]


class DepthLike(Protocol):
    """What ``QueueDepthGauges`` reads of each queue's depth (``trinbox inspect``'s record)."""

    @property
    def queue(self) -> str: ...
    @property
    def table(self) -> str: ...
    @property
    def group(self) -> str | None: ...
    @property
    def due(self) -> int: ...
    @property
    def scheduled(self) -> int: ...
    @property
    def in_work(self) -> int | None: ...
    @property
    def dead(self) -> int | None: ...
    @property
    def oldest_due_age_seconds(self) -> float | None: ...


DepthFunction = Callable[[], Awaitable[Iterable[DepthLike]]]


class QueueDepthGauges:
    """Queue depth gauges, refreshed from the database every ``interval`` seconds by
    ``run`` (start it in a nursery beside ``app.serve``): ``trinbox_queue_due``,
    ``_scheduled``, ``_leased`` (lease tables), ``_dead_letters`` (queues with a dead letter
    destination) and ``_oldest_due_age_seconds``, by ``queue`` and ``table``.

    ``depth`` is an async function returning the depth of every queue, each with the fields
    of :class:`DepthLike` (``trinbox inspect``'s queries return them). A round that fails
    keeps the last values and is retried at the next interval.
    """

    def __init__(
        self,
        depth: DepthFunction,
        *,
        interval: float = 15.0,
        registry: CollectorRegistry | None = None,
        namespace: str = "trinbox",
    ) -> None:
        registry = REGISTRY if registry is None else registry
        self._depth = depth
        self.interval = interval

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(
                name, doc, QUEUE, namespace=namespace, subsystem="queue", registry=registry
            )

        self._due = gauge("due", "Rows claimable now.")
        self._scheduled = gauge("scheduled", "Rows due later.")
        self._leased = gauge("leased", "Rows in work (lease tables).")
        self._dead = gauge("dead_letters", "Rows of the queue's dead letter destination.")
        self._age = gauge("oldest_due_age_seconds", "How long the oldest due row has waited.")

    @classmethod
    def of_app(
        cls,
        app: App,
        *,
        interval: float = 15.0,
        registry: CollectorRegistry | None = None,
        namespace: str = "trinbox",
    ) -> QueueDepthGauges:
        """The depth of every queue mounted on ``app``, by ``trinbox inspect``'s queries (one
        read-only statement per table), on the app's own pools: run it while ``app`` serves."""

        async def depth() -> list[DepthLike]:
            return list(await depths(queues_of(app)))

        return cls(depth, interval=interval, registry=registry, namespace=namespace)

    async def refresh(self) -> None:
        """Read every queue's depth once and set the gauges."""
        for d in await self._depth():
            labels = (d.queue, d.table)
            self._due.labels(*labels).set(d.due)
            self._scheduled.labels(*labels).set(d.scheduled)
            if d.in_work is not None:
                self._leased.labels(*labels).set(d.in_work)
            if d.dead is not None:
                self._dead.labels(*labels).set(d.dead)
            self._age.labels(*labels).set(d.oldest_due_age_seconds or 0.0)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Refresh now, report started, then every ``interval`` seconds until cancelled."""
        await self._refresh_logged()
        task_status.started()
        while True:
            await trio.sleep(self.interval)
            await self._refresh_logged()

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except Exception:
            _log.warning("reading the queue depths failed; trying again next round", exc_info=True)
