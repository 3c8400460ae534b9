"""``Pauses``: the table where a broker's paused queues are kept, one row per pause.

    PAUSES = Pauses("app_pauses")
    broker = SqlBroker.postgres(URL, pauses=PAUSES)
    await broker.pause(Sync, group="sync")

A row is a pause of one table (every subscription of it) or of one group of it; every process
serving the broker reads the table each poll interval, so a pause covers every process and
survives restarts. Pure declaration: the statements are the dialect's (``_dialects/pauses.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["Pauses"]


@final
@dataclass(frozen=True, slots=True)
class Pauses:
    """The pause table ``[schema.]table`` of a broker (``SqlBroker.postgres(url,
    pauses=...)``), which ``broker.create_tables(pauses)`` and ``trinbox schema`` create."""

    table: str
    schema: str | None = None

    def __post_init__(self) -> None:
        where = f"Pauses({self.table!r})"
        for what, name in (("table", self.table), ("schema", self.schema)):
            if name is None and what == "schema":
                continue
            if not isinstance(name, str) or not name:
                msg = (
                    f"{where}: a pause {what} is named by a non-empty str, found {name!r}; "
                    f"name it, like Pauses('app_pauses')"
                )
                raise DeclarationError(msg)
            check_name(where, what, name)

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table
