"""No import cycle among trinbox's modules, imports under ``TYPE_CHECKING`` and inside functions
included: a cycle marks a class cut in two, or two modules that should be one or be layered.

Every module's imports are read with ``ast`` (``from pkg import mod`` is an import of the
module ``pkg.mod``), and the cycles are the strongly connected components of that graph
(Tarjan's algorithm). A package's ``__init__`` is no node: importing a submodule runs it, but
the re-exports of a facade are not what this checks.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

import trinbox

ROOT = Path(trinbox.__file__).parent

KNOWN_CYCLES: set[frozenset[str]] = set()
"""Cycles still in the tree that another change removes; each must still exist."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(sources: Mapping[str, str], packages: set[str]) -> dict[str, set[str]]:
    """Which modules each module of ``sources`` (name -> text) imports, among themselves.
    ``packages``: the names in ``sources`` that are packages (their ``__init__``), never an
    edge's end."""
    modules = set(sources) - packages
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        base = name.split(".")[:-1]  # the package a relative import counts from
        for node in ast.walk(ast.parse(sources[name])):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    stem = base[: len(base) - (node.level - 1)]
                    target = ".".join([*stem, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [target, *(f"{target}.{alias.name}" for alias in node.names)]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def trinbox_cycles() -> list[frozenset[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    sources = {module_name(path): path.read_text() for path in paths}
    packages = {module_name(path) for path in paths if path.name == "__init__.py"}
    return cycles(import_graph(sources, packages))


def show(cycle: frozenset[str]) -> str:
    return " <-> ".join(sorted(cycle))


def test_no_import_cycle_in_trinbox() -> None:
    found = trinbox_cycles()
    assert [show(c) for c in found if c not in KNOWN_CYCLES] == []
    gone = [show(c) for c in KNOWN_CYCLES if c not in found]
    assert gone == [], "this cycle is gone: delete it from KNOWN_CYCLES"


# -- the checker itself: it finds what it is for ------------------------------------------------


def cycles_of(sources: dict[str, str], packages: frozenset[str] = frozenset()) -> list[str]:
    return sorted(show(c) for c in cycles(import_graph(sources, set(packages))))


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        pytest.param(
            {"p.a": "from .b import x", "p.b": "from .a import y"},
            ["p.a <-> p.b"],
            id="relative",
        ),
        pytest.param(
            {
                "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import B",
                "p.b": "import p.a",
            },
            ["p.a <-> p.b"],
            id="type-checking",
        ),
        pytest.param(
            {
                "p.a": "def f():\n    from .b import g",
                "p.b": "from .c import h",
                "p.c": "from . import a",
            },
            ["p.a <-> p.b <-> p.c"],
            id="lazy-through-a-package-import",
        ),
        pytest.param(
            {"p.q.a": "from .. import r", "p.r": "from .q.a import x", "p.s": "from .r import y"},
            ["p.q.a <-> p.r"],
            id="parent-package",
        ),
        pytest.param(
            {"p.a": "from .b import x", "p.b": "from .c import y", "p.c": "import os"},
            [],
            id="layered",
        ),
    ],
)
def test_checker_finds(sources: dict[str, str], expected: list[str]) -> None:
    assert cycles_of(sources) == expected


def test_a_package_init_is_no_node() -> None:
    # p re-exports p.a, and p.a imports from p: importing p.a runs p, not a cycle of modules.
    sources = {"p": "from .a import A", "p.a": "from p import b", "p.b": "x = 1"}
    assert cycles_of(sources, frozenset({"p"})) == []
