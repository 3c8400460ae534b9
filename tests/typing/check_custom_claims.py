"""Custom claims as type checkers check them: ``InboxQueue.custom_claim`` takes an async claim
``(conn, group, limit) -> ids`` and an optional async fetch ``(conn, ids) -> rows``, each
given a ``trinbox.typing.Held`` connection; a synchronous function, or one of another shape,
is refused.

Must-pass lines use ``assert_type``; must-fail lines end in ``# type: ignore[<code>]`` (mypy)
and ``# pyright: ignore[<rule>]`` (pyright), checked by tests/unit/test_typing_behaviour.py.
pytest never collects this file.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, assert_type

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload
from trinbox.typing import Held


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def gold(conn: Held, group: str | None, limit: int) -> list[int]:
    rows = await conn.fetch("SELECT id FROM jobs LIMIT :limit", {"limit": limit})
    return [int(str(row[0])) for row in rows]


async def by_id(conn: Held, ids: list[int]) -> list[tuple[object, ...]]:
    return [tuple(row) for row in await conn.fetch("SELECT * FROM jobs")]


def sync_claim(conn: Held, group: str | None, limit: int) -> list[int]:
    return []


async def no_limit(conn: Held, group: str | None) -> list[int]:
    return []


queue = InboxQueue(Job, "jobs")
assert_type(queue.custom_claim(gold), InboxQueue[Job])
assert_type(queue.custom_claim(gold, fetch=by_id), InboxQueue[Job])

# Argument 1 to "custom_claim" of "InboxQueue" has incompatible type ...; expected "ClaimIds"
queue.custom_claim(sync_claim)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
queue.custom_claim(no_limit)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
# Argument "fetch" ... expected "FetchRows | None"
queue.custom_claim(gold, fetch=gold)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
