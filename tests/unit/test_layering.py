"""The layering rule of docs/design.md#layout-and-layering, checked by walking every module's
imports with ``ast``.

A module imports only from layers below its own (or from its own package). ``_dialects`` and
``_drivers`` share a layer and never import each other; nothing imports a public facade (the
package ``__init__`` binding ``keys``, ``events`` and ``typing`` aside). Only ``_drivers``
touches the asyncio world and the database client libraries.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import trinbox

ROOT = Path(trinbox.__file__).parent

LAYERS: dict[str, int] = {
    "errors": 0,
    "_util": 0,
    "_bounds": 0,
    "_declare": 1,
    "_dialects": 2,
    "_drivers": 2,
    "_holders": 3,
    "_forms": 4,
    "_api": 5,
    "_broker": 6,
    "_engine": 7,
    "_operations": 8,
    "__init__": 9,
    "keys": 9,
    "events": 9,
    "typing": 9,
    "testing": 9,
    "asyncapi": 9,
    "schema": 9,
    "metrics": 9,
    "outbox": 9,
    "schedules": 9,
    "cli": 10,
    "__main__": 11,
}
"""Each part of the package (a subpackage or a top-level module) and its layer, lowest first."""

FACADES = {
    "__init__",
    "keys",
    "events",
    "typing",
    "testing",
    "asyncapi",
    "schema",
    "metrics",
    "outbox",
    "schedules",
}
ALLOWED = {
    # the package binds its namespaces: trinbox.keys, trinbox.events, trinbox.typing
    ("__init__", "keys"),
    ("__init__", "events"),
    ("__init__", "typing"),
    # The command line renders what the facades render; ``python -m trinbox`` runs it.
    ("cli", "schema"),
    ("cli", "asyncapi"),
    ("__main__", "cli"),
}
FOREIGN = {"asyncio", "trio_asyncio", "asyncpg", "aiomysql", "pymysql", "sqlite3"}
"""Top-level modules only ``_drivers`` may import."""


def part_of(module: str) -> str:
    """``trinbox._engine.app`` -> ``_engine``; ``trinbox`` -> ``__init__``."""
    parts = module.split(".")
    assert parts[0] == "trinbox", module
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(module: str, source: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """Every module ``source`` imports, absolute, with its line: import statements (also
    inside functions and ``TYPE_CHECKING``) and ``importlib.import_module("...")`` strings."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if node.module is None:
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}"
            else:
                yield node.lineno, target
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
        ):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield node.lineno, arg.value
            elif isinstance(arg, ast.JoinedStr) and arg.values:
                head = arg.values[0]
                if isinstance(head, ast.Constant) and isinstance(head.value, str):
                    yield node.lineno, head.value.rstrip(".")


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """What breaks the layering rule in one module's source."""
    found: list[str] = []
    here = part_of(module)
    for line, target in imports(module, source, is_package=is_package):
        top = target.split(".")[0]
        where = f"{module}:{line} imports {target}"
        if top in FOREIGN and here != "_drivers":
            found.append(f"{where}: only trinbox._drivers talks to {top}")
        if top != "trinbox":
            continue
        there = part_of(target)
        if there == here or (here, there) in ALLOWED:
            continue
        if there not in LAYERS:
            found.append(f"{where}: {there} has no layer in LAYERS")
        elif there in FACADES:
            found.append(f"{where}: nothing inside trinbox imports the facade {there}")
        elif LAYERS[there] >= LAYERS[here]:
            found.append(
                f"{where}: {here} (layer {LAYERS[here]}) may import only lower layers, "
                f"{there} is layer {LAYERS[there]}"
            )
    return found


SOURCES = sorted(ROOT.rglob("*.py"))


def test_every_part_has_a_layer() -> None:
    parts = {part_of(module_name(path)) for path in SOURCES}
    assert parts - set(LAYERS) == set()


def test_imports_go_down_the_layers() -> None:
    found = [
        problem
        for path in SOURCES
        for problem in violations(
            module_name(path), path.read_text(), is_package=path.name == "__init__.py"
        )
    ]
    assert found == []


def test_only_drivers_import_foreign_io() -> None:
    users = {
        module_name(path)
        for path in SOURCES
        for _, target in imports(
            module_name(path), path.read_text(), is_package=path.name == "__init__.py"
        )
        if target.split(".")[0] in FOREIGN
    }
    assert users
    assert {part_of(module) for module in users} == {"_drivers"}


# -- the checker itself: it finds what it is for ------------------------------------------------


@pytest.mark.parametrize(
    ("module", "source", "problem"),
    [
        pytest.param(
            "trinbox._declare._spec",
            "from .._api.queue import InboxQueue",
            "trinbox._declare._spec:1 imports trinbox._api.queue: _declare (layer 1) may "
            "import only lower layers, _api is layer 5",
            id="upward",
        ),
        pytest.param(
            "trinbox._broker.broker",
            "from .._engine.app import App",
            "trinbox._broker.broker:1 imports trinbox._engine.app: _broker (layer 6) may "
            "import only lower layers, _engine is layer 7",
            id="broker-to-engine",
        ),
        pytest.param(
            "trinbox._api.handles",
            "from .._broker.broker import SqlBroker",
            "trinbox._api.handles:1 imports trinbox._broker.broker: _api (layer 5) may "
            "import only lower layers, _broker is layer 6",
            id="api-to-broker",
        ),
        pytest.param(
            "trinbox._dialects.postgres",
            "def f() -> None:\n    from trinbox._drivers import postgres",
            "trinbox._dialects.postgres:2 imports trinbox._drivers: _dialects (layer 2) may "
            "import only lower layers, _drivers is layer 2",
            id="dialects-to-drivers",
        ),
        pytest.param(
            "trinbox._drivers.sqlite",
            "from .._dialects.sqlite import SqliteDialect",
            "trinbox._drivers.sqlite:1 imports trinbox._dialects.sqlite: _drivers (layer 2) "
            "may import only lower layers, _dialects is layer 2",
            id="drivers-to-dialects",
        ),
        pytest.param(
            "trinbox._engine.app",
            "from trinbox import Inbox",
            "trinbox._engine.app:1 imports trinbox: nothing inside trinbox imports the facade "
            "__init__",
            id="facade",
        ),
        pytest.param(
            "trinbox._broker.broker",
            "import importlib\nimportlib.import_module(f'trinbox.testing.{x}')",
            "trinbox._broker.broker:2 imports trinbox.testing: nothing inside trinbox imports "
            "the facade testing",
            id="import-module",
        ),
        pytest.param(
            "trinbox.errors",
            "from ._util import evolve",
            "trinbox.errors:1 imports trinbox._util: errors (layer 0) may import only lower "
            "layers, _util is layer 0",
            id="sibling",
        ),
        pytest.param(
            "trinbox._forms.lease",
            "import trio_asyncio",
            "trinbox._forms.lease:1 imports trio_asyncio: only trinbox._drivers talks to "
            "trio_asyncio",
            id="foreign",
        ),
    ],
)
def test_checker_finds(module: str, source: str, problem: str) -> None:
    assert violations(module, source) == [problem]


def test_checker_allows() -> None:
    assert violations("trinbox._engine.app", "from .._drivers.aio import asyncio_loop") == []
    assert violations("trinbox._forms._base", "from ._base import x\nfrom ..errors import E") == []
    assert violations("trinbox", "from . import keys as keys", is_package=True) == []
    assert violations("trinbox._drivers.sqlite", "import sqlite3") == []
