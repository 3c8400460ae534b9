"""Limit records: ``use_limit_records`` takes a ``LimitRecords`` and ``on_mismatch`` of
``"warn"`` or ``"refuse"`` only; ``create_tables`` and ``trinbox.schema.ddl`` take one."""

from __future__ import annotations

from trinbox import LimitRecords, SqlBroker
from trinbox.schema import ddl
from trinbox.typing import Postgres


async def check_limit_records(pg: SqlBroker[Postgres]) -> None:
    records = LimitRecords("app_limits", schema="ops")
    pg.use_limit_records(records)
    pg.use_limit_records(records, on_mismatch="refuse")
    pg.use_limit_records(records, on_mismatch="stop")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    pg.use_limit_records("app_limits")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    await pg.create_tables(records)
    statements: list[str] = ddl(records, "postgres")
    assert statements
