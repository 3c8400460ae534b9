"""``broker.create_tables(Row)``: run the rendered DDL of a row class on the broker's database
(development and tests; production schemas belong to migrations)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._declare._inbox import spec_of
from .._dialects._statement import render
from .._dialects.ddl import render_ddl
from .._errors import Closed
from .._forms._base import give_back

if TYPE_CHECKING:
    from .broker import SqlBroker

__all__ = ["create_tables"]


async def create_tables(broker: SqlBroker[Any], row: type[Any], dead_letter: str | None) -> None:
    """Create ``row``'s table, claim index and dead letter table where missing, one
    statement at a time on one connection (autocommit: each ``IF NOT EXISTS`` stands alone,
    and MySQL commits DDL anyway), once the server is known to take them all."""
    spec = spec_of(row)
    statements = [
        render("ddl", sql, broker.dialect.style)
        for sql in render_ddl(broker.dialect, spec, dead_letter)
    ]
    try:
        pool = broker.pool
    except Closed:
        msg = (
            f"create_tables({spec.label}) runs on the broker's pool, found the broker not "
            f"open (its pool opens when the app serves); call it in an on_startup hook, "
            f"which runs before the subscriptions check their tables"
        )
        raise Closed(msg) from None
    conn = await pool.acquire("create_tables")
    try:
        version_query = broker.dialect.version_query
        if version_query is not None:
            rows = await conn.fetch(version_query)
            broker.dialect.check_ddl_server([s.sql for s in statements], str(rows[0][0]))
        for statement in statements:
            await conn.execute(statement.sql, ())
    finally:
        await give_back(pool, conn)
