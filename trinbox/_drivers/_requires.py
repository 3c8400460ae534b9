"""Which driver each server broker needs, and the error naming the extra that installs it.

``import trinbox`` imports no driver, and SQLite needs none (``sqlite3`` is in the standard
library). A PostgreSQL or MySQL broker checks, when it is made, that its driver can be found
(without importing it: the app may be built by a process that never serves, and the driver is
imported when the pool opens); the import at the pool's isolation level says the same if it fails.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.util import find_spec
from types import ModuleType

from ..errors import MissingDriver

__all__ = ["load_driver", "require_driver"]


@dataclass(frozen=True)
class _Need:
    server: str
    constructor: str
    modules: tuple[str, ...]  # importable names, in the order they are checked
    packages: str  # as pip names them
    extra: str


_NEEDS = {
    "postgres": _Need("PostgreSQL", "SqlBroker.postgres()", ("asyncpg",), "asyncpg", "postgres"),
    "mysql": _Need(
        "MySQL and MariaDB",
        "SqlBroker.mysql()",
        ("aiomysql", "pymysql"),
        "aiomysql and PyMySQL",
        "mysql",
    ),
}


def _missing(need: _Need, module: str) -> MissingDriver:
    msg = (
        f"{need.constructor} talks to {need.server} through {need.packages}, found no "
        f'module named {module!r}; install the extra: pip install "trinbox[{need.extra}]"'
    )
    return MissingDriver(msg, name=module)


def _absent(module: str) -> bool:
    try:
        return find_spec(module) is None
    except (ImportError, ValueError):  # a parent package missing, or a broken entry
        return True


def require_driver(kind: str) -> None:
    """``MissingDriver`` if the driver of a ``kind`` broker cannot be found."""
    need = _NEEDS.get(kind)
    if need is None:
        return
    for module in need.modules:
        if _absent(module):
            raise _missing(need, module)


def load_driver(kind: str) -> ModuleType:
    """trinbox's driver module for ``kind`` (``trinbox._drivers.postgres``...), or
    ``MissingDriver`` if the library it wraps does not import."""
    try:
        return importlib.import_module(f"{__package__}.{kind}")
    except ModuleNotFoundError as exc:
        need = _NEEDS.get(kind)
        root = (exc.name or "").partition(".")[0]
        if need is None or root not in need.modules:
            raise
        raise _missing(need, root) from exc
