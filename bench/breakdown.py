"""Where a trinbox drain's wall time goes: how busy the subscription's claim loop is, and how
long claims, settlements and whole deliveries take. A diagnostic beside the profile
(``bench.profile``): py-spy shows CPU, this shows waiting (a serial claim loop, a row at a time).

    python -m bench.breakdown DB URL FORM N [--batch K] [--max-seconds 20]

It wraps the forms' ``claim``, ``settle``, ``settle_batch`` and ``settle_and_claim`` (a
settlement that claims its worker's next row in the same round trip) and the delivery runner's
``_handle`` with timers at run time (trinbox's files are not touched). "busy" is the summed
time over the wall time: claims near 100% are the bottleneck; handlers near 400% with
workers(4) mean the workers are the bottleneck.
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trinbox import App, AppInfo, InboxQueue, subscriber
from trinbox._engine.deliveries import DeliveryRunner
from trinbox._forms.advisory import AdvisoryForm
from trinbox._forms.lease import LeaseForm
from trinbox._forms.rowlock import RowLockForm
from trinbox.testing import settled

from .common import GROUP, ROWS, WORKERS, Job, fill
from .drain import make_broker

STATS: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])


def timed(cls: type, name: str) -> None:
    original: Callable[..., Awaitable[Any]] = getattr(cls, name)

    async def wrapper(self: object, *args: object, **kwargs: object) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            entry = STATS[f"{cls.__name__}.{name}"]
            entry[0] += 1
            entry[1] += time.perf_counter() - started

    setattr(cls, name, wrapper)


async def run(db: str, url: str, form: str, n: int, batch: int | None, window: float) -> None:
    queue = InboxQueue(ROWS[form], GROUP).workers(WORKERS).poll_interval(1.0)
    if batch is not None:

        @subscriber(queue.batch(batch))
        async def handler_batch(jobs: list[Job]) -> None:
            pass

        sub: Any = handler_batch
    else:

        @subscriber(queue)
        async def handler(job: Job) -> None:
            pass

        sub = handler
    app = App(AppInfo("bench-breakdown"), grace=5.0)
    app.include(make_broker(db, url), sub)
    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        await nursery.start(app.serve)
        with trio.move_on_after(window):
            await settled(app, sub, n)
        wall = time.perf_counter() - started
        finished = app.statistics(sub).finished
        app.shutdown()
    print(f"{finished} jobs in {wall:.2f} s = {finished / wall:,.0f} jobs/s")
    for name, (calls, total) in sorted(STATS.items()):
        print(
            f"  {name:30s} calls {int(calls):6d}  mean {1000 * total / max(calls, 1):7.2f} ms"
            f"  busy {100 * total / wall:6.1f}% of wall"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("form", choices=sorted(ROWS))
    parser.add_argument("n", type=int)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    a = parser.parse_args()
    for cls in (RowLockForm, LeaseForm, AdvisoryForm):
        timed(cls, "claim")
        timed(cls, "settle")
        timed(cls, "settle_batch")
        timed(cls, "settle_and_claim")
    timed(DeliveryRunner, "_handle")
    fill(a.db, a.url, a.n, form=a.form)
    trio.run(run, a.db, a.url, a.form, a.n, a.batch, a.max_seconds)


if __name__ == "__main__":
    main()
