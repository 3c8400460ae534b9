"""Limits as type checkers check them: ``.limit(key=..., concurrency=...)`` and
``.limit(concurrency=...)`` keep the queue's type (mode and shape), chain with the other
settings, and take a field name and an int, ``concurrency`` by keyword only.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py. The
comment above a refused line shows the gist of mypy's message. pytest never collects this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, assert_type

from trinbox import (
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
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


@subscriber(InboxQueue(Sync, "syncs").limit(key="tenant", concurrency=3))
async def pull(job: Pull) -> HandlerOutcome:
    return HandlerOutcome.ack()


def refused_shapes(queue: InboxQueue[Sync, Any, Any]) -> None:
    # Missing named argument "concurrency"
    queue.limit(key="tenant")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    # Argument "concurrency" has incompatible type "str"; expected "int"
    queue.limit(concurrency="3")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # Argument "key" has incompatible type "int"; expected "str | None"
    queue.limit(key=1, concurrency=3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
