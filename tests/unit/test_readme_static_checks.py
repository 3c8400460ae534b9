"""The README's "Static checks" section: its ``service.py`` fails mypy --strict and pyright strict
on the same lines, and the section shows what each prints.

The file is written from the README into a project of its own and each checker runs on it as a
user's would (no configuration of ours, this checkout's trinbox as an installed one). What the
README shows must be the real output: line for line and code for code always, word for word
under the versions it names (pyright is pinned; mypy's wording may move with a release newer
than the README's, its lines and codes may not).
"""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from tests.integration.readme import README, block
from tests.unit._checkers import Failures, pyright_output, run_mypy, run_pyright

SECTION = README.read_text().split("## Static checks", 1)[1].split("\n## ", 1)[0]
MISTAKES = {36, 57, 58, 59, 61}
"""The lines of service.py that hold a mistake (its class keyword, a row lock table on SQLite,
keys.Tx on a plain queue, a batch handler of one message, a Publisher's wrong message)."""


def shown(tag: str) -> str:
    found = re.search(rf"<!-- test: {tag} -->\n```\n(.*?)```", README.read_text(), re.DOTALL)
    assert found is not None, f"README.md has no block marked {tag}"
    return found.group(1)


def service(tmp_path: Path) -> Path:
    (tmp_path / "service.py").write_text(block("readme_static_checks"))
    return tmp_path


def mypy_lines_and_codes(output: str) -> Failures:
    found: Failures = {}
    for number, code in re.findall(r"^service\.py:(\d+): error: .*  \[([a-z-]+)\]$", output, re.M):
        found.setdefault(("service.py", int(number)), set()).add(code)
    return found


def pyright_lines_and_rules(output: str) -> Failures:
    """Each diagnostic starts ``  <path>:<line>:<column> - error: ``, goes on over indented
    lines, and ends in its rule, ``(reportX)``."""
    found: Failures = {}
    diagnostics = re.split(r"^  (?=\S+:\d+:\d+ - )", output, flags=re.M)[1:]
    for diagnostic in diagnostics:
        where = re.match(r"\S*service\.py:(\d+):\d+ - error: ", diagnostic)
        rule = re.search(r"\((report\w+)\)\n", diagnostic)
        assert where and rule, diagnostic
        found.setdefault(("service.py", int(where.group(1))), set()).add(rule.group(1))
    return found


def test_mypy_and_pyright_refuse_the_same_lines(tmp_path: Path) -> None:
    project = service(tmp_path)
    mypy, _ = run_mypy(project, ["service.py"])
    pyright, _ = run_pyright(project, ["service.py"])
    assert {line for _, line in mypy} == MISTAKES
    assert {line for _, line in pyright} == MISTAKES


def test_the_readme_shows_what_mypy_prints(tmp_path: Path) -> None:
    mypy, output = run_mypy(service(tmp_path), ["service.py"])
    assert mypy_lines_and_codes(shown("readme_static_checks_output")) == mypy
    named = re.search(r"`mypy --strict service\.py` \(mypy ([\d.]+);", SECTION)
    assert named is not None, "the section names the mypy version whose output it shows"
    if version("mypy") == named.group(1):
        assert output == shown("readme_static_checks_output")


def test_the_readme_shows_what_pyright_prints(tmp_path: Path) -> None:
    project = service(tmp_path)
    pyright, _ = run_pyright(project, ["service.py"])
    assert pyright_lines_and_rules(shown("readme_static_checks_pyright")) == pyright
    named = re.search(r"and pyright ([\d.]+) \(`pyright service\.py`", SECTION)
    assert named is not None and named.group(1) == version("pyright")
    # The paths pyright prints are the project's: the README's is ~/service.
    output = pyright_output(project, ["service.py"])
    assert output.replace(str(project), "~/service") == shown("readme_static_checks_pyright")
