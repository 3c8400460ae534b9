"""One worker process of the skewed-hosts test (test_skewed_hosts.py).

    python -m tests.integration.postgres.skew_worker <url> <name> <clock> <lease> <work>

serves ``skew_jobs`` of ``url`` (a lease table) with ``clock`` (``database`` for the default,
``system`` for ``SystemClock()``), a lease of ``lease`` seconds, each delivery working
``work`` seconds, until the table is empty. Each delivery writes its start and end into
``skew_handled`` by the server's ``clock_timestamp()``, one clock for every process whatever
the host's says. It prints ``ready <host's now>`` (the test checks that libfaketime shifted
it) and starts serving when it reads a line on its standard input.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    SystemClock,
    keys,
    subscriber,
)

from ..worker_kit import serve_when_told

POLL = 0.02
DEADLINE = 60.0


class SkewJob(Inbox[Lease], table="skew_jobs"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


DDL = """
    CREATE TABLE skew_jobs (
        id BIGSERIAL PRIMARY KEY,
        retry_after TIMESTAMPTZ NOT NULL DEFAULT now(),
        attempt INT NOT NULL DEFAULT 1,
        locked_until TIMESTAMPTZ,
        payload BYTEA
    );
    CREATE TABLE skew_handled (
        n INT NOT NULL,
        worker TEXT NOT NULL,
        started TIMESTAMPTZ NOT NULL,
        ended TIMESTAMPTZ
    );
"""


@dataclass
class Job:
    n: int


async def work(url: str, name: str, clock: str, lease: float, pause: float) -> None:
    options: dict[str, Any] = {"poll_interval": POLL, "pool_size": 8, "lease": lease}
    if clock == "system":
        options["clock"] = SystemClock()
    broker = SqlBroker.postgres(url, **options)

    @subscriber(InboxQueue(SkewJob, "skew").workers(4))
    async def handle(job: Job, pool: keys.Pool) -> None:
        await pool.execute(
            "INSERT INTO skew_handled (n, worker, started) VALUES ($1, $2, clock_timestamp())",
            job.n,
            name,
        )
        await trio.sleep(pause)
        await pool.execute(
            "UPDATE skew_handled SET ended = clock_timestamp() "
            "WHERE n = $1 AND worker = $2 AND ended IS NULL",
            job.n,
            name,
        )

    app = App(AppInfo(f"skew-{name}"), grace=5.0)
    app.include(broker, handle)
    ready = f"ready {datetime.now(UTC).isoformat()}"
    await serve_when_told(app, broker, "skew_jobs", poll=POLL, deadline=DEADLINE, ready=ready)
    print("done", flush=True)


def main() -> None:
    url, name, clock, lease, pause = sys.argv[1:]
    assert clock in ("database", "system"), clock
    trio.run(work, url, name, clock, float(lease), float(pause))


if __name__ == "__main__":
    main()
