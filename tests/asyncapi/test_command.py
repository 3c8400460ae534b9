"""``trinbox asyncapi MODULE:APP``, run as a subprocess: JSON and YAML parse back to exactly
``document(app)``; a bad target, a refused handler and a missing PyYAML each end in one
readable error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

import trinbox
from trinbox.asyncapi import document

from . import apps
from .check import problems

ROOT = Path(trinbox.__file__).parents[1]
TARGET = "tests.asyncapi.apps:app"


def trinbox_command(
    *args: str, cwd: Path = ROOT, pre: str = ""
) -> subprocess.CompletedProcess[str]:
    """``python -m trinbox ...`` importing this worktree's trinbox (``pre`` runs first)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if pre:
        command = [sys.executable, "-c", f"{pre}\nfrom trinbox.cli import main\nmain()", *args]
    else:
        command = [sys.executable, "-m", "trinbox", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def test_json_is_the_document() -> None:
    done = trinbox_command("asyncapi", TARGET)
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert parsed == document(apps.app())
    assert problems(parsed) == []
    assert done.stdout.startswith('{\n  "asyncapi": "3.0.0",')


def test_yaml_is_the_document_and_output_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "shop.yaml"
    done = trinbox_command("asyncapi", TARGET, "--format", "yaml", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    text = out.read_text()
    assert text.startswith("asyncapi: 3.0.0\ninfo:\n  title: shop\n")
    assert yaml.safe_load(text) == document(apps.app())


def test_yaml_without_pyyaml_names_the_extra() -> None:
    done = trinbox_command(
        "asyncapi", TARGET, "--format", "yaml", pre="import sys\nsys.modules['yaml'] = None"
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "Error: --format yaml writes through PyYAML, which is not installed; "
        'pip install "trinbox[yaml]" (or use --format json)\n'
    )
    # JSON needs no extra.
    done = trinbox_command("asyncapi", TARGET, pre="import sys\nsys.modules['yaml'] = None")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["info"]["title"] == "shop"


def test_a_bad_target_says_what_is_wrong(tmp_path: Path) -> None:
    done = trinbox_command("asyncapi", "no_such_module:app", cwd=tmp_path)
    assert done.returncode == 2
    assert "no module 'no_such_module' importable from" in done.stderr
    done = trinbox_command("asyncapi", "tests.asyncapi.apps:SECRETS")
    assert done.returncode == 2
    assert "tests.asyncapi.apps:SECRETS is tuple, not an App" in done.stderr
    done = trinbox_command("asyncapi", TARGET, "--format", "xml")
    assert done.returncode == 2
    assert "'xml' is not one of 'json', 'yaml'" in done.stderr


def test_a_refused_handler_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "refused.py").write_text(
        "from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber\n"
        "from tests.asyncapi.apps import Order, Signup\n"
        "@subscriber(InboxQueue(Signup, 'signups'))\n"
        "async def wrong(order: Order) -> None: ...\n"
        "app = App(AppInfo('refused'))\n"
        "app.include(SqlBroker.sqlite('sqlite:///x.db'), wrong)\n"
    )
    done = trinbox_command("asyncapi", "refused:app", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: the AsyncAPI document of refused: ")
    assert "takes the row itself, found Order; annotate the message as Signup" in line


def test_help_names_the_formats() -> None:
    done = trinbox_command("asyncapi", "--help")
    assert done.returncode == 0
    assert "--format [json|yaml]" in done.stdout
    assert "MODULE:APP" in done.stdout


def test_an_undescribable_type_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "opaque.py").write_text(
        "from trinbox import App, AppInfo, InboxQueue, SqlBroker, subscriber\n"
        "from tests.asyncapi.test_document import Lone, Opaque\n"
        "@subscriber(InboxQueue(Lone, 'opaque'))\n"
        "async def take(item: Opaque) -> None: ...\n"
        "app = App(AppInfo('opaque'))\n"
        "app.include(SqlBroker.sqlite('sqlite:///x.db'), take)\n"
    )
    done = trinbox_command("asyncapi", "opaque:app", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: the AsyncAPI document describes the payload type Opaque, but ")
