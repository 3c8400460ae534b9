"""Retention as type checkers check it: ``Mount.retain`` takes keyword ``timedelta``s and
returns the mount, so it chains with ``max_attempts`` and ``dead_letter``; statistics count
what it pruned.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py.
pytest never collects this file.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, assert_type

from trinbox import (
    App,
    Attempt,
    DeadLetteredAt,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    SqlBroker,
    subscriber,
)
from trinbox.events import SubscriptionStatistics
from trinbox.typing import Mount


class Kept(Inbox[Lease], table="kept"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(Kept, "kept"))
async def kept(body: bytes) -> None:
    pass


broker = SqlBroker.sqlite("sqlite:///kept.db")
app = App()
mount = app.include(broker, kept).max_attempts(3).dead_letter("kept_dead")
assert_type(mount.retain(processed=timedelta(days=1), dead_letters=timedelta(days=7)), Mount)
assert_type(mount.retain(processed=timedelta(days=1), every=timedelta(minutes=5)), Mount)
stats = app.statistics(kept)
assert_type(stats, SubscriptionStatistics)
assert_type(stats.pruned_processed, int)
assert_type(stats.pruned_dead_letters, int)

# An age is a timedelta, not a number of seconds.
mount.retain(processed=86400)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
