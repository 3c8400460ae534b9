"""The public surface, after Trio's namespaces per audience (docs/design.md#public-surface):
``trinbox`` holds what a service declares and runs with; ``trinbox.errors`` every exception,
``trinbox.events`` the hooks, their records and the statistics, ``trinbox.typing`` what
annotations need and checkers' messages name, ``trinbox.keys`` what a handler asks for,
``trinbox.testing`` the test helpers. Each ``__all__`` names exactly what its module binds, a
name lives in one namespace only, and nothing rewrites ``__module__``: an object names the
module that defines it, and that name imports it."""

from __future__ import annotations

import ast
import importlib
import pickle
import typing
from pathlib import Path
from types import ModuleType

import pytest

import trinbox
import trinbox.errors
import trinbox.events
import trinbox.testing
import trinbox.typing

NAMESPACES = [
    "trinbox",
    "trinbox.errors",
    "trinbox.events",
    "trinbox.typing",
    "trinbox.keys",
    "trinbox.outbox",
    "trinbox.schedules",
]
"""The modules whose ``__all__`` is the surface; ``trinbox.testing`` is checked on its own."""

SUBMODULES = {"keys", "errors", "events", "typing"}
"""The namespaces ``import trinbox`` binds."""

OTHER_MODULES = {"testing", "asyncapi", "schema", "cli", "metrics", "outbox", "schedules"}
"""Modules users import as ``trinbox.<name>``; importing one binds it on the package."""

SERVICE_NAMES = 54  # issue 21: DeadLetteredAt, Pauses, Cancel*, Progress, Rate, Rates, LimitRecords
"""How many names a service uses from ``trinbox`` itself (its namespaces aside). A new one is a
choice: does a service declare or run with it, or does it belong in a namespace?"""


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _reexports(module: ModuleType) -> set[str]:
    """The names a facade binds with ``from .x import y as y`` (the re-export idiom)."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update(alias.asname for alias in node.names if alias.asname == alias.name)
    return names


@pytest.mark.parametrize(
    "facade",
    ["trinbox", "trinbox.events", "trinbox.typing", "trinbox.outbox", "trinbox.schedules"],
)
def test_all_lists_every_reexport_once(facade: str) -> None:
    module = _module(facade)
    assert len(module.__all__) == len(set(module.__all__))
    assert set(module.__all__) == _reexports(module)


def test_the_service_surface_is_small() -> None:
    names = set(trinbox.__all__) - SUBMODULES
    assert len(names) == SERVICE_NAMES, sorted(names)
    assert set(trinbox.__all__) >= SUBMODULES


def test_no_other_public_names() -> None:
    public = {name for name in vars(trinbox) if not name.startswith("_")}
    # ``annotations`` is the ``from __future__`` feature every module binds.
    assert public - {"annotations"} - OTHER_MODULES == set(trinbox.__all__)


def test_an_object_lives_in_one_namespace() -> None:
    # (trinbox.Attempt, the column role, and trinbox.keys.Attempt, the context key, are two.)
    seen: dict[int, str] = {}
    for namespace in NAMESPACES:
        for name in _module(namespace).__all__:
            where = seen.setdefault(id(getattr(_module(namespace), name)), f"{namespace}.{name}")
            assert where == f"{namespace}.{name}", f"{namespace}.{name} is also {where}"


@pytest.mark.parametrize(
    ("namespace", "name"),
    [(namespace, name) for namespace in NAMESPACES for name in _module(namespace).__all__],
)
def test_exported_name_imports_and_names_its_own_module(namespace: str, name: str) -> None:
    scope: dict[str, object] = {}
    exec(f"from {namespace} import {name}", scope)
    obj = scope[name]
    assert obj is getattr(_module(namespace), name)
    obj = typing.get_origin(obj) or obj  # keys.Tx is a parametrized alias of its class
    if isinstance(obj, ModuleType):
        assert obj.__name__ == f"trinbox.{name}"
        return
    if not hasattr(obj, "__qualname__"):  # a constant (GENERATED), a type alias
        return
    # Nothing rewrites __module__: what reprs and tracebacks print is where the object is
    # defined, and importable as written.
    defining = _module(obj.__module__)
    assert getattr(defining, obj.__qualname__) is obj
    assert obj.__module__.startswith("trinbox")


def test_errors_are_defined_in_trinbox_errors() -> None:
    for name in trinbox.errors.__all__:
        error = getattr(trinbox.errors, name)
        assert issubclass(error, Exception)
        assert error.__module__ == "trinbox.errors", name
    # Every exception a module of trinbox defines is in trinbox.errors.
    defined = {
        name
        for name, obj in vars(trinbox.errors).items()
        if isinstance(obj, type)
        and issubclass(obj, Exception)
        and obj.__module__ == "trinbox.errors"
    }
    assert defined == set(trinbox.errors.__all__)


def test_a_traceback_names_the_public_module() -> None:
    assert repr(trinbox.errors.DeclarationError) == "<class 'trinbox.errors.DeclarationError'>"


def test_clocks_are_exported() -> None:
    # A broker's clock= argument: the server's, or the host's.
    assert {"DatabaseClock", "SystemClock"} <= set(trinbox.__all__)
    assert repr(trinbox.DatabaseClock()) == "DatabaseClock()"
    assert repr(trinbox.SystemClock()) == "SystemClock()"


def test_every_role_is_exported() -> None:
    # A role is declared by its class in an annotation: each must be importable as trinbox.X.
    from trinbox._declare._roles import ROLE_CLASSES

    assert set(ROLE_CLASSES.values()) <= set(trinbox.__all__)
    assert "OriginGroup" in ROLE_CLASSES.values()


def test_errors_pickle_by_their_public_name() -> None:
    error = trinbox.errors.DeclarationError("class Job: a queue table names its table")
    data = pickle.dumps(error)
    assert b"trinbox.errors" in data
    copy = pickle.loads(data)
    assert type(copy) is trinbox.errors.DeclarationError
    assert copy.args == error.args


def test_keys_and_testing_keep_their_own_names() -> None:
    assert isinstance(trinbox.keys, ModuleType)
    assert trinbox.keys.__name__ == "trinbox.keys"
    assert set(trinbox.keys.__all__) == {
        "Attempt",
        "CancelRequested",
        "Headers",
        "Out",
        "Pool",
        "Progress",
        "RowId",
        "Tx",
    }
    assert trinbox.testing.__name__ == "trinbox.testing"
    assert trinbox.testing.TrioClock.__module__ == "trinbox.testing"


def test_the_readme_table_of_namespaces_names_what_each_holds() -> None:
    readme = (Path(trinbox.__file__).parent.parent / "README.md").read_text()
    section = readme.split("### Where the names live", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `trinbox.")]
    assert len(rows) == 6
    for row in rows:
        namespace, holds = row.strip("|").split("|")[:2]
        module = _module(namespace.strip().strip("`"))
        named = {word.strip("`") for word in holds.split() if word.startswith("`")}
        named = {name.rstrip("`,.)") for name in named} - {"SqlBroker[Postgres]"}
        missing = {name for name in named if not hasattr(module, name)}
        assert not missing, f"{module.__name__} has no {sorted(missing)}"
