"""The public surface is ``trinbox/__init__.py``: ``__all__`` names exactly what it exports, and
every exported class and function presents itself as ``trinbox.X``
(docs/design.md#public-surface)."""

from __future__ import annotations

import ast
import importlib
import pickle
from pathlib import Path
from types import ModuleType

import pytest

import trinbox

PUBLIC_SUBMODULES = {"keys", "testing", "asyncapi", "schema", "cli", "metrics"}
"""Modules users import as ``trinbox.<name>``; importing one binds it on the package."""

INIT = Path(trinbox.__file__)


def _reexports() -> set[str]:
    """The names ``__init__`` binds with ``from .x import y as y`` (the re-export idiom)."""
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    # ``Inbox`` is bound in the ``else`` of ``if TYPE_CHECKING`` (mypy sees a declaration).
    branches = [node.orelse for node in tree.body if isinstance(node, ast.If)]
    for node in [*tree.body, *(node for branch in branches for node in branch)]:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update(alias.asname for alias in node.names if alias.asname == alias.name)
    return names


def test_all_lists_every_reexport_once() -> None:
    assert len(trinbox.__all__) == len(set(trinbox.__all__))
    assert set(trinbox.__all__) == _reexports()


def test_no_other_public_names() -> None:
    public = {name for name in vars(trinbox) if not name.startswith("_")}
    # ``annotations`` is the ``from __future__`` feature every module binds.
    assert public - {"annotations"} - PUBLIC_SUBMODULES == set(trinbox.__all__) - {"keys"}


@pytest.mark.parametrize("name", trinbox.__all__)
def test_exported_name_imports(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from trinbox import {name}", namespace)
    assert namespace[name] is getattr(trinbox, name)


@pytest.mark.parametrize("name", [n for n in trinbox.__all__ if n != "keys"])
def test_exported_object_names_itself_trinbox(name: str) -> None:
    obj = getattr(trinbox, name)
    assert obj.__module__ == "trinbox"
    assert obj.__qualname__ == name
    # What reprs and tracebacks print is importable as written.
    assert getattr(importlib.import_module(obj.__module__), obj.__qualname__) is obj


def test_no_private_module_in_a_repr() -> None:
    assert repr(trinbox.Inbox[trinbox.Lease]) == "trinbox.Inbox[trinbox.Lease, trinbox.Default]"
    assert repr(trinbox.SqlBroker) == "<class 'trinbox.SqlBroker'>"
    assert repr(trinbox.DeclarationError) == "<class 'trinbox.DeclarationError'>"


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
    error = trinbox.DeclarationError("class Job: a queue table names its table")
    data = pickle.dumps(error)
    assert b"trinbox._errors" not in data
    copy = pickle.loads(data)
    assert type(copy) is trinbox.DeclarationError
    assert copy.args == error.args


def test_keys_and_testing_keep_their_own_names() -> None:
    import trinbox.testing

    assert isinstance(trinbox.keys, ModuleType)
    assert trinbox.keys.__name__ == "trinbox.keys"
    assert set(trinbox.keys.__all__) == {"Attempt", "Pool", "RowId", "Tx"}
    assert trinbox.testing.__name__ == "trinbox.testing"
    assert trinbox.testing.TrioClock.__module__ == "trinbox.testing"
