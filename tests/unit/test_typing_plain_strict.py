"""tests/typing/ reads the same under plain ``mypy --strict`` as under the project's mypy.ini.

The check files are copied into a project of their own (no mypy.ini, trinbox seen as an
installed package), as a user's code would be: every ``# type: ignore[code]`` in them must
still be used, with that code (``--strict`` warns about unused ignores)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import trinbox

TYPING = Path(__file__).parents[1] / "typing"


def mypy(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        # This checkout's trinbox, as an installed one.
        env={**os.environ, "PYTHONPATH": str(Path(trinbox.__file__).parents[1])},
    )


def test_the_typing_checks_hold_under_plain_strict(tmp_path: Path) -> None:
    checks = sorted(TYPING.glob("check_*.py"))
    assert len(checks) >= 7
    for check in checks:
        shutil.copy(check, tmp_path / check.name)
    done = mypy(tmp_path, *(check.name for check in checks))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"Success: no issues found in {len(checks)} source files\n"

    # The keys.Tx rule's opt-in message, at the decoration (the check files turn the code off).
    (tmp_path / "opt_in.py").write_text(
        "from typing import Annotated\n"
        "from trinbox import Id, Inbox, InboxQueue, RowLock, keys, subscriber\n\n\n"
        'class Job(Inbox[RowLock], table="jobs"):\n'
        "    id: Annotated[int, Id(generated=True)]\n\n\n"
        "async def handle(job: Job, tx: keys.Tx) -> None: ...\n\n\n"
        'subscriber(InboxQueue(Job, "jobs"))(handle)\n'
    )
    done = mypy(tmp_path, "--enable-error-code", "deprecated", "opt_in.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is deprecated: keys.Tx, the delivery's transaction, is lent only in transactional" in (
        done.stdout.replace("\n", " ")
    )
    assert done.stdout.count(": error: ") == 1, done.stdout
