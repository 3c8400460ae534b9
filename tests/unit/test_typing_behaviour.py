"""tests/typing/ under mypy --strict and pyright strict, as a user's code: which lines fail, and
with which codes, never the wording.

The check files are copied into a project of their own without their markers; a must-fail line
carries two, ``# type: ignore[<mypy codes>]  # pyright: ignore[<pyright rules>]``, and every
other line must pass both checkers, with no ``reportUnknown*`` complaint (pyright's strict mode
reports a partially unknown type as an error). ``assert_type`` lines pin what users see. mypy
runs twice: the pinned version and the oldest the typing supports (``OLDEST_MYPY``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit._checkers import (
    OLDEST_MYPY,
    Failures,
    differences,
    oldest_mypy,
    run_mypy,
    run_pyright,
    strip_markers,
)

TYPING = Path(__file__).parents[1] / "typing"

Expected = tuple[list[str], Failures, Failures]
"""The check files' names, and what mypy and pyright must report, by (file, line)."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Expected]:
    root = tmp_path_factory.mktemp("typing_project")
    names: list[str] = []
    mypy: Failures = {}
    pyright: Failures = {}
    for check in sorted(TYPING.glob("check_*.py")):
        text, expect_mypy, expect_pyright = strip_markers(check.read_text())
        (root / check.name).write_text(text)
        names.append(check.name)
        mypy.update({(check.name, line): codes for (_, line), codes in expect_mypy.items()})
        pyright.update({(check.name, line): codes for (_, line), codes in expect_pyright.items()})
    assert len(names) >= 7
    return root, (names, mypy, pyright)


def test_every_must_fail_line_names_both_checkers(project: tuple[Path, Expected]) -> None:
    _, (_, mypy, pyright) = project
    assert len(mypy) > 150
    assert set(mypy) == set(pyright)


def test_mypy_fails_the_marked_lines_with_their_codes_and_nothing_else(
    project: tuple[Path, Expected],
) -> None:
    root, (names, mypy, _) = project
    failures, _ = run_mypy(root, names)
    assert failures == mypy, differences(mypy, failures)


@pytest.mark.skipif(
    not (Path(__file__).parents[2] / ".venv").is_dir(), reason="needs the repository's .venv"
)
def test_the_oldest_mypy_reads_the_same(project: tuple[Path, Expected]) -> None:
    root, (names, mypy, _) = project
    failures, _ = run_mypy(root, names, mypy_path=oldest_mypy())
    assert failures == mypy, f"mypy {OLDEST_MYPY}:\n{differences(mypy, failures)}"


def test_pyright_fails_the_marked_lines_with_their_rules_and_nothing_else(
    project: tuple[Path, Expected],
) -> None:
    root, (names, _, pyright) = project
    failures, diagnostics = run_pyright(root, names)
    unknown_on_valid = [
        d
        for d in diagnostics
        if str(d.get("rule", "")).startswith("reportUnknown")
        and (Path(d["file"]).name, d["range"]["start"]["line"] + 1) not in pyright
    ]
    assert not unknown_on_valid, unknown_on_valid
    assert failures == pyright, differences(pyright, failures)
