"""The databases a broker can serve, one row each: the dialect class, the URL schemes, the
driver and how its pool opens, and the defaults a constructor starts from. ``SqlBroker``'s
constructors, ``SqlBroker.from_url`` and what reports a broker (OpenTelemetry, AsyncAPI) read
this table instead of branching on the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from .._dialects._base import Dialect
from .._dialects.mysql import MySqlDialect
from .._dialects.postgres import PostgresDialect
from .._dialects.sqlite import SqliteDialect
from .._drivers._base import Pool
from .._drivers._requires import load_driver, require_driver
from .._drivers._urls import Kind, check_server_url, redacted
from .._drivers.sqlite import SqlitePool, sqlite_path, variable_limit
from ..errors import ConnectError

__all__ = ["BACKENDS", "Backend", "backend_of_url"]


@dataclass(frozen=True, slots=True)
class Backend:
    """One database family as a broker serves it.

    ``kind`` names it (server names, driver modules); ``server`` in messages; ``schemes``
    its URLs' schemes; ``port`` the default port, ``None`` for a file the app's own process
    opens; ``system`` its OpenTelemetry ``db.system.name`` (the AsyncAPI protocol too);
    ``database_clock`` whether the statements read the server's clock unless a clock is
    given; ``pool_size`` the default; ``notify`` whether it announces publishes to other
    processes (LISTEN/NOTIFY) and sits behind PgBouncer; ``parameter_limit`` reads the
    parameters a statement may bind from the driver's library, where that decides it."""

    kind: Kind
    server: str
    dialect: type[Dialect]
    schemes: tuple[str, ...]
    port: int | None
    system: str
    database_clock: bool
    pool_size: int
    notify: bool = False
    parameter_limit: Callable[[], int] | None = None

    @property
    def in_process(self) -> bool:
        """A database file the app's own process opens (no server, no asyncio driver)."""
        return self.port is None

    def check_url(self, url: str) -> None:
        """Refuse, when the broker is made, a URL no pool could open, and a missing driver
        (found, not imported: the driver is imported when the pool opens)."""
        if self.port is None:
            sqlite_path(url)
            return
        require_driver(self.kind)
        check_server_url(url, server=self.server, default=self.port)

    async def open_pool(self, url: str, max_size: int, options: Mapping[str, Any]) -> Pool:
        """The pool of ``url``, opened (a server's with one connection made, so that a wrong
        URL fails now)."""
        if self.port is None:
            pool = SqlitePool(sqlite_path(url), max_size=max_size)
            await pool.open()
            return pool
        module = load_driver(self.kind)
        return cast("Pool", await module.open_pool(url, max_size=max_size, **options))


BACKENDS: Mapping[Kind, Backend] = {
    "postgres": Backend(
        kind="postgres",
        server="PostgreSQL",
        dialect=PostgresDialect,
        # asyncpg reads both.
        schemes=("postgresql", "postgres"),
        port=5432,
        system="postgresql",
        database_clock=True,
        pool_size=10,
        notify=True,
    ),
    "mysql": Backend(
        kind="mysql",
        server="MySQL",
        dialect=MySqlDialect,
        schemes=("mysql", "mariadb"),
        port=3306,
        system="mysql",
        database_clock=True,
        pool_size=10,
    ),
    "sqlite": Backend(
        kind="sqlite",
        server="SQLite",
        dialect=SqliteDialect,
        schemes=("sqlite",),
        port=None,
        system="sqlite",
        database_clock=False,
        pool_size=8,
        parameter_limit=variable_limit,
    ),
}
"""Every backend, by kind."""


def backend_of_url(url: str) -> Backend:
    """The backend a URL names by its scheme, or ``ConnectError`` naming the schemes read."""
    scheme, sep, _ = url.partition("://")
    if sep:
        for backend in BACKENDS.values():
            if scheme.lower() in backend.schemes:
                return backend
    found = f"the scheme {scheme + ':'!r}" if sep else "no scheme"
    hint = ""
    if "+" in scheme:  # postgresql+asyncpg://, as SQLAlchemy names a driver
        hint = f" (a driver suffix is not read: write {scheme.partition('+')[0]}://)"
    msg = (
        f"SqlBroker.from_url picks the database by the URL's scheme, postgresql:// (or "
        f"postgres://), mysql:// (or mariadb://) or sqlite:///, found {found} in "
        f"{redacted(url)}{hint}; write one of them"
    )
    raise ConnectError(msg, statement="connect")
