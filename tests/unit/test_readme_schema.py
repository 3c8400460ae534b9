"""The README's "Creating the table": the `trinbox schema` output it shows is the command's,
its type table is what the DDL writes, and its override example renders as it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import trinbox
from examples import transcoder
from trinbox.schema import DIALECTS, ddl

README = (Path(__file__).parents[2] / "README.md").read_text()
ROOT = Path(trinbox.__file__).parents[1]
SECTION = README[README.index("### Creating the table") : README.index("### The three claim forms")]


def _module(name: str, source: str) -> dict[str, Any]:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(
        "from datetime import datetime\nfrom typing import Annotated\nfrom trinbox import *\n",
        module.__dict__,
    )
    exec(source, module.__dict__)
    return module.__dict__


def test_the_shown_output_is_the_commands() -> None:
    block = re.search(r"```\n\$ trinbox (schema [^\n]*)\n(.*?)```", SECTION, flags=re.DOTALL)
    assert block is not None
    args = block.group(1).split()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "trinbox", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == block.group(2)


def test_the_readme_transcode_is_the_examples() -> None:
    # The command shows the example's row; the README declares the same one.
    source = re.search(r"^class Transcode\(.*?(?=\n\n)", README, flags=re.MULTILINE | re.DOTALL)
    assert source is not None
    row = _module("readme_transcode_unit", source.group(0))["Transcode"]
    for dialect in DIALECTS:
        assert ddl(row, dialect, dead_letter="video_jobs_dead") == ddl(
            transcoder.Transcode, dialect, dead_letter="video_jobs_dead"
        )


# A field of each role (the table's row for the id is the id the test row has already).
ROLES = {
    "`RetryAfter()`": "due: Annotated[datetime, RetryAfter()]",
    "`LockedUntil()`, `ProcessedAt()`": "done: Annotated[datetime | None, ProcessedAt()]",
    "`Attempt()`": "attempt: Annotated[int, Attempt()]",
    "`Priority()`": "rank: Annotated[int, Priority()]",
    "`Payload()`": "payload: Annotated[bytes, Payload()]",
    "`Headers()` (a `dict[str, str]`)": "headers: Annotated[dict[str, str], Headers()]",
    "`Unique()` (an optional `str`)": "dedup: Annotated[str | None, Unique()] = None",
    "`Group()` (a `str`)": "grp: Annotated[str, Group()]",
    "`Id(generated=True)` (an `int`)": "",
}
PYTHON = {
    "`str`": "str",
    "`int`": "int",
    "`float`": "float",
    "`bool`": "bool",
    "`bytes`": "bytes",
    "`datetime`": "datetime",
    "`date`": "date",
    "`Decimal`": "Decimal",
    "`UUID`": "UUID",
    "`dict`, `list`": "dict[str, int]",
}


def _table() -> dict[str, list[str]]:
    rows = re.findall(r"^\| (`[^|]*?) \| (.*?) \| (.*?) \| (.*?) \|$", SECTION, flags=re.MULTILINE)
    return {field: [c.strip("`") for c in cells] for field, *cells in rows}


@pytest.mark.parametrize("field", [*ROLES, *PYTHON])
def test_the_type_table_says_what_the_ddl_writes(field: str) -> None:
    table = _table()
    line = f"value: {PYTHON[field]}" if field in PYTHON else ROLES[field]
    source = (
        "from decimal import Decimal\nfrom uuid import UUID\nfrom datetime import date\n"
        "class Row(Inbox[Lease], table='t'):\n"
        "    id: Annotated[int, Id(generated=True)]\n"
        "    locked_until: Annotated[datetime | None, LockedUntil()]\n"
        + (f"    {line}\n" if line else "")
    )
    row = _module(f"readme_types_{abs(hash(field))}", source)["Row"]
    for dialect, expected in zip(DIALECTS, table[field], strict=True):
        lines = [part.strip().rstrip(",") for part in ddl(row, dialect)[0].splitlines()]
        column = lines[1] if not line else lines[3]
        # The column's line is its quoted name, then exactly what the table says (and NOT
        # NULL for a field that does not admit None, where the table leaves it out).
        definition = column.split(" ", 1)[1]
        assert definition in (expected, f"{expected} NOT NULL"), (dialect, column)


def test_the_override_example_renders() -> None:
    source = re.search(r"^class Order\(.*?(?=\n```)", SECTION, flags=re.MULTILINE | re.DOTALL)
    assert source is not None
    row = _module("readme_order", source.group(0))["Order"]
    assert '    "sku" VARCHAR(64) NOT NULL,\n' in ddl(row, "postgres")[0]
    assert '    "extra" JSON\n' in ddl(row, "postgres")[0]
    assert "    `extra` JSON\n" in ddl(row, "mysql")[0]
    assert "    `extra` TEXT\n" in ddl(row, "sqlite")[0]
