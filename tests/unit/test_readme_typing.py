"""Every Python block of the README type-checks under ``mypy --strict`` and pyright's strict
mode, as a user's project would check it (no configuration of ours, this checkout's trinbox
as an installed package): the whole programs as they are, each fragment after the imports it
assumes (``PRELUDES``: the first example's names, mostly). Only "Static checks"'
``service.py`` is left out: its mistakes are the point (test_readme_static_checks.py pins
what mypy says of them). A block without a tag, or with a tag this file does not know, fails
the first test, so a new block is checked too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import trinbox
from tests.integration.readme import README, blocks

ROOT = Path(trinbox.__file__).parents[1]

# Tags of whole programs, by the file each is (a None name: the block's tag names none).
PROGRAMS: dict[str, str | None] = {
    "readme_first": None,  # transcoder.py
    "readme_fifo": "fifo.py",
    "readme_program": None,  # shop.py, own_driver.py, tally.py, service.py
    "readme_publisher": "enqueue.py",  # imports transcoder.py, the first example
    "readme_testing": None,  # mailer.py, test_mailer.py
    "readme_clock": "clock.py",
    "readme_custom_claim": "custom_claim.py",
    "readme_limits": "tenant_sync.py",
    "readme_limits_row_lock": "renders.py",
    "readme_limits_advisory": "edits.py",
    "readme_limits_fifo": "ledger.py",
    "readme_rates": "api_calls.py",
    "readme_routes": "orders.py",
    "readme_headers": "mail.py",
    "readme_trace": "traced.py",  # imports mail.py
    "readme_unique": "syncs.py",
    "readme_many": "reminders.py",
    "readme_snooze": None,  # report.py
    "readme_cancel": None,  # exports.py
    "readme_results": None,  # quotes.py
    "readme_retention": None,  # receipts.py
    "readme_schedules": None,  # nightly.py
    "readme_pauses": "pausing.py",
    "readme_progress": "renders.py",
}

# What each fragment assumes, written before it.
_TRANSCODER_HANDLER = (
    "from transcoder import Transcode, Video, encode\n\n"
    "from trinbox import HandlerOutcome, InboxQueue, keys, subscriber\n\n\n"
)
PRELUDES: dict[tuple[str, str], str] = {
    ("readme_fragment", "create_tables.py"): "from transcoder import Transcode, app, broker\n\n\n",
    ("readme_fragment", "sql_type.py"): (
        "from datetime import datetime\nfrom typing import Annotated\n\n"
        "from trinbox import Id, Inbox, Lease, LockedUntil\n"
    ),
    ("readme_fragment", "own_driver_sqlalchemy.py"): (
        "import os\n\nfrom own_driver import Email, Welcome, broker\n"
    ),
    ("readme_keys_pool", "keys_pool.py"): _TRANSCODER_HANDLER,
    ("readme_keys_tx", "keys_tx.py"): _TRANSCODER_HANDLER,
    ("readme_background", "background.py"): (
        "import trio\nfrom transcoder import Transcode, Video, app, broker\n\n\n"
        "async def new_uploads() -> list[str]:\n    return []\n\n\n"
    ),
    ("readme_gauges", "gauges.py"): "from transcoder import app\n",
    ("readme_prometheus", "prometheus.py"): "from tally import app\n",
    ("readme_fifo_every", "fifo_every.py"): (
        "from dataclasses import dataclass\n\n"
        "from fifo import Posting\n\nfrom trinbox import InboxQueue, subscriber\n\n\n"
    ),
    ("readme_fifo_advisory", "fifo_advisory.py"): (
        "from datetime import datetime\nfrom typing import Annotated\n\n"
        "from fifo_every import Posted\n\n"
        "from trinbox import Attempt, Id, Inbox, InboxQueue, Payload, RetryAfter, subscriber\n"
    ),
}

LEFT_OUT = {"readme_static_checks"}


def _tags() -> list[str]:
    """The tag of each Python block of the README, in order ("" for an untagged one)."""
    text = README.read_text()
    return [
        found.group(1) or ""
        for found in re.finditer(r"(?:<!-- test: (\S+)[^>]*-->\n)?```python\n", text)
    ]


def _project(directory: Path) -> list[str]:
    """Every block but the left out one, written as files into ``directory``; their names."""
    files: dict[str, str] = {}
    for tag, name in PROGRAMS.items():
        for block_name, code in blocks(tag).items():
            files[name or block_name] = code
    for (tag, name), prelude in PRELUDES.items():
        found = blocks(tag)
        code = found[name] if name in found else found[""]
        files[name] = prelude + code
    for name, code in files.items():
        (directory / name).write_text(code)
    return sorted(files)


def test_every_python_block_is_checked() -> None:
    tags = _tags()
    known = set(PROGRAMS) | {tag for tag, _ in PRELUDES} | LEFT_OUT
    assert "" not in tags, "a Python block of the README has no <!-- test: ... --> tag"
    assert set(tags) <= known, set(tags) - known
    assert len(tags) >= 18


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    directory = tmp_path_factory.mktemp("readme_blocks")
    return directory, _project(directory)


def _env() -> dict[str, str]:
    # This checkout's trinbox, as an installed one (the venv's editable install may be
    # another checkout's).
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_every_block_passes_mypy_strict(project: tuple[Path, list[str]]) -> None:
    directory, files = project
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"Success: no issues found in {len(files)} source files\n"


def test_every_block_passes_pyright_strict(project: tuple[Path, list[str]]) -> None:
    directory, files = project
    config = {
        "typeCheckingMode": "strict",
        "pythonVersion": "3.11",
        "extraPaths": [str(ROOT)],
        "include": files,
    }
    (directory / "pyrightconfig.json").write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
        timeout=600,
    )
    report = json.loads(done.stdout)
    problems = [
        f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
        if d["severity"] in ("error", "warning")
    ]
    assert problems == [], "\n".join(problems)
    assert report["summary"]["filesAnalyzed"] == len(files)
