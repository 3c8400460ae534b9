"""The README's "Static checks" section shows what ``mypy --strict`` really prints for its
``service.py``: the file is written from the README, mypy runs on it as a user's project would
(no mypy.ini of ours, the installed trinbox), and its output must be the README's block."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import trinbox
from tests.integration.readme import README, block


def readme_output(tag: str = "readme_static_checks_output") -> str:
    found = re.search(rf"<!-- test: {tag} -->\n```\n(.*?)```", README.read_text(), re.DOTALL)
    assert found is not None, f"README.md has no block marked {tag}"
    return found.group(1)


def mypy_on_service(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "service.py").write_text(block("readme_static_checks"))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *args, "service.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        # This checkout's trinbox, as an installed one (the venv's editable install may be
        # another checkout's).
        env={**os.environ, "PYTHONPATH": str(Path(trinbox.__file__).parents[1])},
    )


def test_the_readme_shows_what_mypy_prints(tmp_path: Path) -> None:
    done = mypy_on_service(tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout == readme_output()
    # Each mistake in the file is caught, and nothing else is reported.
    assert done.stdout.count(": error: ") == 5


def test_the_readme_shows_what_the_deprecated_opt_in_adds(tmp_path: Path) -> None:
    """With ``--enable-error-code deprecated`` mypy prints the five errors and the README's
    sixth, at the decoration of the keys.Tx handler, in line order."""
    done = mypy_on_service(tmp_path, "--enable-error-code", "deprecated")
    assert done.returncode == 1, done.stderr
    *plain, _ = readme_output().splitlines()
    added = readme_output("readme_static_checks_deprecated").splitlines()
    assert len(added) == 1 and added[0].endswith("[deprecated]")
    expected = sorted([*plain, *added], key=lambda line: int(line.split(":")[1]))
    summary = "Found 6 errors in 1 file (checked 1 source file)"
    assert done.stdout.splitlines() == [*expected, summary]


def test_the_names_in_the_readme_messages_are_importable() -> None:
    """The README says each class these messages name is importable from ``trinbox``."""
    import builtins
    import collections.abc
    import typing

    import trinbox.keys

    service = block("readme_static_checks")
    names = set(
        re.findall(r"\b[A-Z][A-Za-z]+\b", " ".join(re.findall(r'"[^"]*"', readme_output())))
    )
    own = {name for name in names if f"class {name}" in service}
    shown = names - own - {"Message"}  # Message: App.include's type variable
    elsewhere = (builtins, typing, collections.abc, trinbox.keys)
    missing = {
        n for n in shown if not hasattr(trinbox, n) and not any(hasattr(m, n) for m in elsewhere)
    }
    assert shown and not missing, missing
