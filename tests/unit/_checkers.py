"""mypy and pyright as a user runs them: strict, on files in a project of their own (no mypy.ini
or pyright configuration of ours), with this checkout's trinbox as an installed package.

Each returns what failed where: ``{(file name, line): {codes}}``, mypy's error codes
(``arg-type``) or pyright's rules (``reportArgumentType``), so that tests compare behaviour (which
lines fail, with which codes) and never the wording of a message.

The oldest mypy trinbox's typing supports (``OLDEST_MYPY``, pyproject's lower bound) is
installed once into ``.venv/mypy-<version>`` (``pip install --target``) and run from there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import trinbox

ROOT = Path(trinbox.__file__).parents[1]
OLDEST_MYPY = "1.17.0"
"""The oldest mypy under which tests/typing/ reads the same as under the pinned one (1.16 picks
the first of ``InboxQueue._subscribe``'s overloads when it matches the ``Subscribable``
protocol, so a transactional or batch queue gets the plain factory)."""

Failures = dict[tuple[str, int], set[str]]

_MYPY_LINE = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")
_MYPY_CODE = re.compile(r"  \[(?P<code>[a-z-]+)\]$")
MYPY_MARKER = re.compile(r"  # type: ignore\[(?P<codes>[a-z, -]+)\]")
PYRIGHT_MARKER = re.compile(r"  # pyright: ignore\[(?P<codes>[A-Za-z, ]+)\]")


def _codes(found: re.Match[str]) -> set[str]:
    return {code.strip() for code in found.group("codes").split(",")}


def strip_markers(source: str) -> tuple[str, Failures, Failures]:
    """``source`` without its markers, and the codes each line expects from mypy and from
    pyright (keyed by line, file name left empty)."""
    mypy: Failures = {}
    pyright: Failures = {}
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        for marker, expected in ((MYPY_MARKER, mypy), (PYRIGHT_MARKER, pyright)):
            found = marker.search(line)
            if found:
                expected[("", number)] = _codes(found)
                line = line[: found.start()] + line[found.end() :]
        lines.append(line)
    return "\n".join(lines) + "\n", mypy, pyright


def differences(expected: Failures, found: Failures) -> str:
    """The lines whose codes differ, one a line: for an assertion's message."""
    return "\n".join(
        f"{file}:{line}: expected {sorted(expected.get((file, line), ()))}, "
        f"found {sorted(found.get((file, line), ()))}"
        for file, line in sorted(set(expected) | set(found))
        if expected.get((file, line)) != found.get((file, line))
    )


def _env(extra_path: Path | None = None) -> dict[str, str]:
    paths = [str(ROOT)] if extra_path is None else [str(extra_path), str(ROOT)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_mypy(
    project: Path, files: list[str], *, mypy_path: Path | None = None
) -> tuple[Failures, str]:
    """``mypy --strict`` on ``files`` (cold), the pinned mypy or the one installed at
    ``mypy_path``: the failures, and mypy's output."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env=_env(mypy_path),
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    failures: Failures = {}
    body = done.stdout.rstrip("\n").splitlines()
    assert body and re.match(r"^(Found \d+ errors? in|Success: )", body[-1]), done.stdout
    for line in body[:-1]:
        found = _MYPY_LINE.match(line)
        assert found, line  # every line is a message about a file
        if found["kind"] == "error":
            code = _MYPY_CODE.search(found["text"])
            assert code, line
            failures.setdefault((found["file"], int(found["line"])), set()).add(code["code"])
    return failures, done.stdout


def _pyright(project: Path, files: list[str], *args: str) -> str:
    config = {"typeCheckingMode": "strict", "pythonVersion": "3.11", "include": files}
    (project / "pyrightconfig.json").write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "pyright", *args, "--pythonpath", sys.executable],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout


def pyright_output(project: Path, files: list[str]) -> str:
    """What ``pyright`` prints in strict mode for ``files``."""
    return _pyright(project, files)


def run_pyright(project: Path, files: list[str]) -> tuple[Failures, list[dict[str, Any]]]:
    """pyright in strict mode on ``files``, as a new user's ``pyrightconfig.json`` sets it up:
    the failures (errors and warnings, by rule), and pyright's diagnostics."""
    report = json.loads(_pyright(project, files, "--outputjson"))
    diagnostics: list[dict[str, Any]] = report["generalDiagnostics"]
    failures: Failures = {}
    for diagnostic in diagnostics:
        if diagnostic["severity"] == "information":
            continue
        where = (Path(diagnostic["file"]).name, diagnostic["range"]["start"]["line"] + 1)
        failures.setdefault(where, set()).add(str(diagnostic.get("rule", "")))
    assert report["summary"]["filesAnalyzed"] == len(files), report["summary"]
    return failures, diagnostics


def oldest_mypy() -> Path:
    """A directory holding ``OLDEST_MYPY`` (installed on first use, then reused)."""
    target = ROOT / ".venv" / f"mypy-{OLDEST_MYPY}"
    if (target / "mypy" / "__init__.py").exists():
        return target
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(partial),
            f"mypy=={OLDEST_MYPY}",
        ],
        check=True,
        timeout=900,
    )
    try:
        partial.rename(target)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    return target
