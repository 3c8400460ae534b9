"""A queue's own claim (``InboxQueue.custom_claim``), as the lease and row lock forms run it in
the claim's transaction: the queue's ids, then their rows, read by the plan's fetch
(PostgreSQL's, the ids bound as one array) or by the queue's own. An id whose fetch reads no
row is still claimed, bare: the runtime settles it by the decode policy, as a row that does
not decode."""

from __future__ import annotations

from .._drivers._base import Connection, Record
from .._holders._base import CustomClaim, Delivery, FormContext, attempt_of, values_of

__all__ = ["bare_delivery", "claimed_ids", "custom_of", "delivery_of", "rows_of"]


def custom_of(ctx: FormContext) -> CustomClaim:
    custom = ctx.custom
    assert custom is not None
    return custom


async def claimed_ids(ctx: FormContext, conn: Connection, limit: int) -> list[object]:
    """The ids the queue's claim took, at most ``limit`` of them, each once."""
    return await custom_of(ctx).ids(conn, ctx.group, limit)


async def rows_of(ctx: FormContext, conn: Connection, ids: list[object]) -> dict[object, Record]:
    """The rows of ``ids`` by id: what the queue's fetch, or the plan's, read."""
    custom = custom_of(ctx)
    if custom.rows is not None:
        records = await custom.rows(conn, ids)
    else:
        fetch = ctx.statements.fetch
        assert fetch is not None  # startup refuses a dialect without one (UnsupportedFetch)
        records = await conn.fetch(fetch.sql, fetch.bind({"ids": ids}))
    index = [c.role for c in ctx.spec.columns].index("id")
    return {record[index]: record for record in records}


def delivery_of(ctx: FormContext, record: Record, token: object = None) -> Delivery:
    spec = ctx.spec
    values = values_of(record, spec)
    return Delivery(
        values=values,
        id=values[spec.id.column],
        attempt=attempt_of(spec, values),
        token=token,
    )


def bare_delivery(ctx: FormContext, ident: object, token: object = None) -> Delivery:
    """A claimed id whose fetch read no row."""
    return Delivery(
        values={ctx.spec.id.column: ident}, id=ident, attempt=None, token=token, found=False
    )
