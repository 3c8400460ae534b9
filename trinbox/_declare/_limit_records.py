"""``LimitRecords``: the table where each process that serves a limited queue records the
limits it declared, so that a process declaring different limits for the same queue is told.

    RECORDS = LimitRecords("app_limits")
    broker.use_limit_records(RECORDS)               # warns; on_mismatch="refuse" refuses

One row per (queue table, group, process): the limits' label (``.limit(concurrency=3)``) and
when the process last saw it. Pure declaration: the statements are the dialect's
(``_dialects/limit_records.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["LimitRecords"]


@final
@dataclass(frozen=True, slots=True)
class LimitRecords:
    """The limit record table ``[schema.]table``, which ``broker.create_tables(records)``
    and ``trinbox schema`` create."""

    table: str = "trinbox_limits"
    schema: str | None = None

    def __post_init__(self) -> None:
        where = f"LimitRecords({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a limit record {what} is named by a non-empty str, found "
                    f"{name!r}; name it, like LimitRecords('app_limits')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
