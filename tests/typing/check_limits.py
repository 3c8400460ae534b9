"""Limits as type checkers check them: ``.limit(key=..., concurrency=...)`` and
``.limit(concurrency=...)`` keep the queue's type (mode and shape), chain with the other
settings, and take a field name and an int, ``concurrency`` by keyword only.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py. The
comment above a refused line shows the gist of mypy's message. pytest never collects this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, assert_type

from trinbox import (
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    Rate,
    Rates,
    RowLock,
    subscriber,
)
from trinbox.typing import Batched, Plain, Single, Transactional


class Sync(Inbox[Lease], table="sync_jobs"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Render(Inbox[RowLock], table="render_jobs"):
    id: Annotated[int, Id(generated=True)]
    customer: str
    payload: Annotated[bytes, Payload()]


RATES = Rates("sync_rates")


@dataclass
class Pull:
    account: int


def a_row_lock_queue_takes_limits_too() -> None:
    limited = (
        InboxQueue(Render, "renders").limit(key="customer", concurrency=2).limit(concurrency=8)
    )
    assert_type(limited, InboxQueue[Render, Plain, Single])


def limits_keep_the_queue_s_type() -> None:
    per_key = InboxQueue(Sync, "syncs").limit(key="tenant", concurrency=3)
    assert_type(per_key, InboxQueue[Sync, Plain, Single])
    both = per_key.limit(concurrency=20).workers(8)
    assert_type(both, InboxQueue[Sync, Plain, Single])
    batched = InboxQueue(Sync, "syncs").batch(10).limit(concurrency=4)
    assert_type(batched, InboxQueue[Sync, Plain, Batched])
    tx = InboxQueue(Sync, "syncs").transactional().limit(key="tenant", concurrency=1)
    assert_type(tx, InboxQueue[Sync, Transactional, Single])
    rated = InboxQueue(Sync, "syncs").limit(
        key="tenant", rate=Rate(100, per=timedelta(seconds=10)), rates=RATES
    )
    assert_type(rated, InboxQueue[Sync, Plain, Single])
    both_rated = rated.limit(concurrency=4, rate=Rate(5, per=timedelta(seconds=1)), rates=RATES)
    assert_type(both_rated, InboxQueue[Sync, Plain, Single])


@subscriber(InboxQueue(Sync, "syncs").limit(key="tenant", concurrency=3))
async def pull(job: Pull) -> HandlerOutcome:
    return HandlerOutcome.ack()


def refused_shapes(queue: InboxQueue[Sync, Any, Any]) -> None:
    # No overload variant of "limit" matches argument type "str" (no concurrency, no rate)
    queue.limit(key="tenant")  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
    # No overload variant of "limit" matches argument type "str" (concurrency)
    queue.limit(concurrency="3")  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]
    # No overload variant of "limit" matches argument types "int", "int" (key)
    queue.limit(key=1, concurrency=3)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]
    # No overload variant of "limit" matches (a rate without its rate table)
    queue.limit(key="tenant", rate=Rate(3, per=timedelta(seconds=1)))  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
