"""Latency from publish to handler start, p50 and p99, through trinbox (lease form, one worker
free at each publish, poll interval 1 s so that polling cannot explain a fast start).

    python -m bench.latency inproc DB URL [--count 500]
    python -m bench.latency notify URL [--count 500]          (PostgreSQL LISTEN/NOTIFY)

``inproc``: one process publishes and consumes; the subscription wakes on the publish. Each
publish waits for its handler to start, then pauses 2-4 ms before the next.

``notify``: this process consumes (``listen_notify=True``); a publisher subprocess
(``python -m bench.latency publish URL COUNT``) opens its own broker with ``app.add_broker``,
serves, and publishes every 8-12 ms. The payload carries ``time.monotonic()`` at the publish
call: CLOCK_MONOTONIC is one clock for every process of the host, so the consumer subtracts it
from its own ``time.monotonic()`` at handler start.

Prints one JSON line: p50, p99, mean and max in milliseconds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, subscriber
from trinbox.testing import idle, settled

from .common import GROUP, LeaseJob, emit, fill
from .drain import make_broker

POLL = 1.0


@dataclass
class Stamp:
    i: int
    t: float  # time.monotonic() when publish was called


def percentiles(samples: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples)
    cuts = statistics.quantiles(ms, n=100, method="inclusive")
    return {
        "count": len(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": cuts[98],
        "mean_ms": statistics.fmean(ms),
        "max_ms": ms[-1],
    }


async def inproc(db: str, url: str, count: int) -> dict[str, Any]:
    samples: list[float] = []
    arrived = trio.Event()

    @subscriber(InboxQueue(LeaseJob, GROUP).workers(4).poll_interval(POLL))
    async def handler(stamp: Stamp) -> None:
        nonlocal arrived
        samples.append(time.monotonic() - stamp.t)
        arrived.set()

    broker = make_broker(db, url, poll_interval=POLL)
    app = App(AppInfo("bench-latency"), grace=5.0)
    app.include(broker, handler)
    rng = random.Random(7)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        await idle(app, handler)
        with trio.fail_after(120):
            for i in range(count):
                arrived = trio.Event()
                await broker.publish(LeaseJob, Stamp(i, time.monotonic()), name=GROUP, tenant="t0")
                await arrived.wait()
                await trio.sleep(rng.uniform(0.002, 0.004))
        app.shutdown()
    return percentiles(samples)


async def notify(url: str, count: int) -> dict[str, Any]:
    samples: list[float] = []

    @subscriber(InboxQueue(LeaseJob, GROUP).workers(4).poll_interval(POLL))
    async def handler(stamp: Stamp) -> None:
        samples.append(time.monotonic() - stamp.t)

    broker = make_broker("postgres", url, poll_interval=POLL, listen_notify=True)
    app = App(AppInfo("bench-latency-consumer"), grace=5.0)
    app.include(broker, handler)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        await idle(app, handler)
        command = [sys.executable, "-m", "bench.latency", "publish", url, str(count)]
        with trio.fail_after(120):
            publisher = await trio.lowlevel.open_process(command, stdout=subprocess.DEVNULL)
            await settled(app, handler, count)
            code = await publisher.wait()
        app.shutdown()
    if code != 0:
        raise RuntimeError(f"the publisher process exited with {code}")
    return percentiles(samples)


async def publish(url: str, count: int) -> None:
    broker = make_broker("postgres", url, poll_interval=POLL, listen_notify=True)
    app = App(AppInfo("bench-latency-publisher"), grace=5.0)
    app.add_broker(broker)
    rng = random.Random(11)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for i in range(count):
            await broker.publish(LeaseJob, Stamp(i, time.monotonic()), name=GROUP, tenant="t0")
            await trio.sleep(rng.uniform(0.008, 0.012))
        app.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["inproc", "notify", "publish"])
    parser.add_argument("rest", nargs="+")
    parser.add_argument("--count", type=int, default=500)
    a = parser.parse_args()
    if a.mode == "inproc":
        db, url = a.rest
        fill(db, url, 0)
        emit(trio.run(inproc, db, url, a.count))
    elif a.mode == "notify":
        (url,) = a.rest
        fill("postgres", url, 0)
        emit(trio.run(notify, url, a.count))
    else:
        url, count = a.rest
        trio.run(publish, url, int(count))


if __name__ == "__main__":
    main()
