"""Results: ``broker.wait(Row, id)`` is a ``Settled`` of the row class, so the Result field
reads as the class declares it; ``HandlerOutcome.ack(result)`` takes any result."""
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, assert_type

from trinbox import (
    HandlerOutcome,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    Result,
    SqlBroker,
)
from trinbox.typing import Postgres, Settled


@dataclass
class Receipt:
    total: int


class Order(Inbox[Lease], table="orders"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]
    receipt: Annotated[Receipt | None, Result()] = None


async def check_wait(broker: SqlBroker[Postgres]) -> None:
    settled = await broker.wait(Order, 1)
    assert_type(settled, Settled[Order])
    assert_type(settled.outcome, Literal["ack", "drop", "dead_letter"])
    assert_type(settled.row, Order | None)
    if settled.row is not None:
        assert_type(settled.row.receipt, Receipt | None)
    settled.outcome = "ack"  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


def check_ack() -> None:
    assert_type(HandlerOutcome.ack(Receipt(1)), HandlerOutcome)
    assert_type(HandlerOutcome.ack(), HandlerOutcome)
