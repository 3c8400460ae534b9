"""Cancel: ``broker.cancel(Row, id)`` is a ``CancelResult`` on every dialect, whose members
and ``cancelled`` read as typed; ``use_cancel_requests`` takes a ``CancelRequests`` only."""
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from datetime import datetime
from typing import Annotated, assert_type

from trinbox import (
    CancelRequests,
    CancelResult,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
)
from trinbox.typing import MySql, Postgres, Sqlite


class Export(Inbox[Lease], table="exports"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def check_cancel(
    pg: SqlBroker[Postgres], my: SqlBroker[MySql], lite: SqlBroker[Sqlite]
) -> None:
    for broker in (pg, my, lite):
        found = await broker.cancel(Export, 1)
        assert_type(found, CancelResult)
        assert_type(found.cancelled, bool)
        value: str = found.value  # a Literal of the four for pyright, str for mypy
        assert value
    pg.use_cancel_requests(CancelRequests("cancels", schema="ops"))
    pg.use_cancel_requests("cancels")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    await pg.cancel(object, 1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
