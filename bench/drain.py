"""Drain throughput through trinbox: N pre-inserted no-op jobs, ``workers(4)``, one form, single
deliveries or ``.batch(k)``. Timed from ``app.serve`` reporting its start (pools open,
statements prepared: the raw loop is likewise timed from its first claim) until
``wait_finished(N)`` returns (every delivery settled); the start-up is reported apart, and the
pre-insert is not timed.

    python -m bench.drain DB URL FORM N [--batch K] [--no-fill] [--max-seconds S]
                          [--events none|noop|prometheus] [--clock default|system|database]
                          [--headers] [--unique] [--tenants K] [--workers W]
                          [--limit-key N] [--pauses]

``--events`` installs an event hook: ``noop`` an ``Events`` subclass that overrides nothing
(every event is made and dispatched), ``prometheus`` the Prometheus adapter on a registry of
its own (the hook's cost, measured in bench/RESULTS.md). ``--clock`` picks the broker's clock:
``system`` (``SystemClock()``, the host's) or ``database`` (``DatabaseClock()``); ``default``
is the database's own default (the server's clock on PostgreSQL and MySQL). ``--headers``
(lease and row lock): every row carries ``common.HEADERS``, read through a row class with a
Headers field, and the handler takes them (``keys.Headers``). ``--unique`` (lease): the table
has a Unique field and its index (``common.UNIQUE_DDL``), every row holding a key of its own,
which each ack's delete takes out of the index: the claim cost of a ``Unique()`` column.
``--tenants K`` fills the table with K tenants (row i's is ``t{i % K}``; 10 unless given),
``--workers W`` serves it with W workers (4 unless given). ``--limit-key N`` (lease, rowlock,
adv-row: each row its own advisory key): the queue declares ``.limit(key="tenant",
concurrency=N)``, the limited claim. ``--pauses``: the broker
has a pause table (``pauses=Pauses("bench_pauses")``, created before the timed part), so its
pause watcher runs and every claim passes the pause gate; nothing is paused.

Prints one JSON line: jobs/s, seconds, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

import trio

from trinbox import (
    App,
    AppInfo,
    DatabaseClock,
    InboxQueue,
    Pauses,
    SqlBroker,
    SystemClock,
    keys,
    subscriber,
)
from trinbox.events import Events
from trinbox.testing import settled

from .common import (
    GROUP,
    ROWS,
    TENANTS,
    WITH_HEADERS,
    WITH_UNIQUE,
    WORKERS,
    Job,
    emit,
    fill,
    key_every_row,
    remaining,
)

# The forms a limited drain serves (adv-row: the limit's key is not the advisory key).
LIMITED_FORMS = ("lease", "rowlock", "adv-row")

SHUTDOWN_TIMEOUT = 30.0
EVENTS = ("none", "noop", "prometheus")
CLOCKS = {"default": None, "system": SystemClock(), "database": DatabaseClock()}
PAUSES = Pauses("bench_pauses")


class Noop(Events):
    """A hook that overrides nothing: the cost of making and dispatching every event."""


def install_events(app: App, events: str) -> None:
    if events == "noop":
        app.add_events(Noop())
    elif events == "prometheus":
        from prometheus_client import CollectorRegistry

        from trinbox.metrics.prometheus import PrometheusMetrics

        PrometheusMetrics(app, registry=CollectorRegistry())


def make_broker(db: str, url: str, **options: Any) -> SqlBroker[Any]:
    if db == "postgres":
        return SqlBroker.postgres(url, **options)
    if db == "mysql":
        return SqlBroker.mysql(url, **options)
    return SqlBroker.sqlite(url, **options)


async def drain(
    db: str,
    url: str,
    form: str,
    n: int,
    batch: int | None,
    max_seconds: float,
    events: str = "none",
    clock: str = "default",
    headers: bool = False,
    unique: bool = False,
    workers: int = WORKERS,
    limit_key: int | None = None,
    pauses: bool = False,
) -> dict[str, Any]:
    row = WITH_HEADERS[form] if headers else WITH_UNIQUE[form] if unique else ROWS[form]
    queue = InboxQueue(row, GROUP).workers(workers).poll_interval(1.0)
    if limit_key is not None:
        queue = queue.limit(key="tenant", concurrency=limit_key)
    handled = 0
    sub: Any
    if headers:

        @subscriber(queue)
        async def handler_headers(job: Job, found: keys.Headers) -> None:
            nonlocal handled
            assert found["tenant"] == "acme"
            handled += 1

        sub = handler_headers
    elif batch is not None:

        @subscriber(queue.batch(batch))
        async def handler_batch(jobs: list[Job]) -> None:
            nonlocal handled
            handled += len(jobs)

        sub = handler_batch
    else:

        @subscriber(queue)
        async def handler(job: Job) -> None:
            nonlocal handled
            handled += 1

        sub = handler
    broker = make_broker(db, url, clock=CLOCKS[clock], pauses=PAUSES if pauses else None)
    app = App(AppInfo("bench-drain"), grace=5.0)
    app.include(broker, sub)
    if pauses:

        @app.on_startup
        async def pause_table() -> None:
            await broker.create_tables(PAUSES)

    install_events(app, events)
    with trio.fail_after(max_seconds + SHUTDOWN_TIMEOUT):
        async with trio.open_nursery() as nursery:
            opening = time.perf_counter()
            await nursery.start(app.serve)
            # Timed from here, as the raw loop is timed from its first claim: the pools are
            # open and every statement is prepared (the start-up is reported on its own).
            started = time.perf_counter()
            before = app.statistics(sub).finished  # settled while serve reported its start
            # A run that cannot drain in time reports the rate it kept up to then.
            with trio.move_on_after(max_seconds):
                await settled(app, sub, n)
            seconds = time.perf_counter() - started
            finished = app.statistics(sub).finished
            app.shutdown()
    return {
        "jobs_per_s": (finished - before) / seconds,
        "seconds": seconds,
        "startup_s": started - opening,
        "finished": finished,
        "drained": finished >= n,
        "handled": handled,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("form", choices=sorted(ROWS))
    parser.add_argument("n", type=int)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--no-fill", action="store_true", help="the table is filled already")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop undrained then")
    parser.add_argument("--events", choices=EVENTS, default="none", help="an event hook to install")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="default", help="whose clock")
    parser.add_argument("--headers", action="store_true", help="rows carry headers, read")
    parser.add_argument("--unique", action="store_true", help="a Unique field, a key per row")
    parser.add_argument("--tenants", type=int, default=TENANTS, help="tenants in the table")
    parser.add_argument("--workers", type=int, default=WORKERS, help="the queue's workers")
    parser.add_argument("--limit-key", type=int, default=None, help="limit per tenant")
    parser.add_argument("--pauses", action="store_true", help="a pause table, nothing paused")
    args = parser.parse_args()
    if args.limit_key is not None and args.form not in LIMITED_FORMS:
        parser.error(f"--limit-key drains the {', '.join(LIMITED_FORMS)} forms")
    if args.headers and (args.form not in WITH_HEADERS or args.batch is not None):
        parser.error("--headers drains the lease and row lock forms, single deliveries")
    if args.unique and (args.form not in WITH_UNIQUE or args.headers):
        parser.error("--unique drains the lease form, without --headers")
    if not args.no_fill:
        fill(
            args.db,
            args.url,
            args.n,
            form=args.form,
            headers=args.headers,
            unique=args.unique,
            tenants=args.tenants,
        )
        if args.unique:
            key_every_row(args.db, args.url)
    result = trio.run(
        drain,
        args.db,
        args.url,
        args.form,
        args.n,
        args.batch,
        args.max_seconds,
        args.events,
        args.clock,
        args.headers,
        args.unique,
        args.workers,
        args.limit_key,
        args.pauses,
    )
    left = remaining(args.db, args.url)
    result["left"] = left
    # Every handled row was acked exactly once (handlers in work when a window ended finish in
    # the grace period); a run stopped undrained leaves the rest in the table.
    result["ok"] = left == args.n - result["handled"]
    # ru_maxrss: kilobytes on Linux
    result["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    emit(result)


if __name__ == "__main__":
    main()
