"""Helpers for the SQLite integration tests: a fresh database file per test, an app served
for the length of a block, and direct reads of the table."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from trinbox import App, AppInfo, SqlBroker, Sqlite
from trinbox.testing import TrioClock


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


def make_app(grace: float = 5.0) -> App:
    return App(AppInfo("test"), grace=grace)


@asynccontextmanager
async def serving(app: App) -> AsyncIterator[App]:
    """Serve ``app`` for the block, then shut it down gracefully."""
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        try:
            yield app
        finally:
            app.shutdown()
