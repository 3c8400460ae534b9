"""Helpers for the SQLite integration tests: a fresh database file per test and direct reads
of the table (an app served for a block is tests/integration/serving.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trinbox import SqlBroker
from trinbox.testing import TrioClock
from trinbox.typing import Sqlite


class Db:
    """One test database file: its URL, a broker on it, and synchronous reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def script(self, ddl: str) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.executescript(ddl)

    def rows(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        conn = sqlite3.connect(self.path)
        try:
            return [tuple(r) for r in conn.execute(sql, params)]
        finally:
            conn.close()

    def value(self, sql: str, *params: object) -> object:
        found = self.rows(sql, *params)
        return found[0][0] if found else None

    def broker(
        self, *, poll_interval: float = 0.05, lease: float = 30.0, pool_size: int = 8
    ) -> SqlBroker[Sqlite]:
        return SqlBroker.sqlite(
            self.url,
            poll_interval=poll_interval,
            lease=lease,
            pool_size=pool_size,
            clock=TrioClock(),
        )
