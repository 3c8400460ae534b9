"""What the outbox tests share: the record tables (one that marks relayed records processed,
one that deletes them), the message, a business table, and the rows of a stand read back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from trinbox import Attempt, Group, Id, LockedUntil, Payload, ProcessedAt, RetryAfter
from trinbox.outbox import Outbox

from .stands import Stand, StandName


class OrderEvents(Outbox, table="order_outbox"):
    """Relayed records are marked processed."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class Pings(Outbox, table="ping_outbox"):
    """Relayed records are deleted (no ProcessedAt field, no Attempt field)."""

    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class OrderPlaced:
    order: int
    sku: str


ORDERS: dict[StandName, str] = {
    "sqlite": "CREATE TABLE orders (id INTEGER PRIMARY KEY, sku TEXT NOT NULL)",
    "postgres": "CREATE TABLE orders (id BIGINT PRIMARY KEY, sku TEXT NOT NULL)",
    "mariadb": "CREATE TABLE orders (id BIGINT PRIMARY KEY, sku VARCHAR(40) NOT NULL)",
}


def placed(payload: bytes) -> dict[str, object]:
    """A relayed payload, as the JSON codec wrote it."""
    found: dict[str, object] = json.loads(payload)
    return found


def records(stand: Stand, table: str = "order_outbox") -> list[tuple[int, str, bool]]:
    """Each record of ``table``: id, name, and whether it is marked processed."""
    marked = "processed_at IS NOT NULL" if table == "order_outbox" else "0 = 1"
    return [
        (int(i), str(n), bool(p))
        for i, n, p in stand.rows(f"SELECT id, name, {marked} FROM {table} ORDER BY id")
    ]
