"""``pip install -e .`` must leave trinbox visible to mypy (issue 11, item 6). setuptools makes
an editable install one of two ways: a ``.pth`` file naming a directory (mypy follows it), or an
import hook that only a running interpreter follows (mypy then reports "Cannot find
implementation or library stub for module named trinbox"). pyproject.toml's ``package-dir``
selects the first; this asks setuptools' own editable build which one it picks."""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

import trinbox

ROOT = Path(trinbox.__file__).parents[1]


def _strategy(tmp_path: Path) -> Any:
    dist_module: Any = importlib.import_module("setuptools.dist")
    config: Any = importlib.import_module("setuptools.config.pyprojecttoml")
    editable: Any = importlib.import_module("setuptools.command.editable_wheel")
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "[tool.setuptools] ... is still *beta*"
            dist = dist_module.Distribution()
            config.apply_configuration(dist, str(ROOT / "pyproject.toml"))
            command = editable.editable_wheel(dist)
            command.ensure_finalized()
            return command._select_strategy("trinbox", "py3-none-any", str(tmp_path))
    finally:
        os.chdir(cwd)


def test_an_editable_install_is_a_static_path_entry(tmp_path: Path) -> None:
    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("trinbox is not imported from its source tree")
    strategy = _strategy(tmp_path)
    # Before the fix: _TopLevelFinder, an import hook mypy cannot follow.
    assert type(strategy).__name__ == "_StaticPth"
    assert [(ROOT / p).resolve() for p in strategy.path_entries] == [ROOT.resolve()]
