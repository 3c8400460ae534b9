"""What the code, tests and documents cite is in the repository: no file outside it (the notes
the project started from) is named, and every ``docs/<file>.md#anchor`` points at a heading
that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\b(REFERENCE|FEASIBILITY|DESIGN|STYLE|PEERS)\.md\b|\.\./shared/")
CITED = re.compile(r"docs/(\w+)\.md#([a-z0-9-]+)")
TEXTS = [
    path
    for pattern in (
        "trinbox/**/*.py",
        "tests/**/*.py",
        "examples/**/*.py",
        "bench/**/*.py",
        "bench/*.md",
        "docs/*.md",
        "scripts/*",
        "README.md",
        "pyproject.toml",
        "typings/**/*.pyi",
    )
    for path in sorted(ROOT.glob(pattern))
    if path.is_file() and path != Path(__file__).resolve()
]


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces
    to dashes."""
    found = set()
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return found


def test_the_texts_are_found() -> None:
    assert len(TEXTS) > 200


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_outside_the_repository_is_cited(path: Path) -> None:
    text = path.read_text(errors="replace")
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "cite docs/ instead:\n" + "\n".join(hits)


def test_every_docs_anchor_exists() -> None:
    known = {doc.stem: anchors(doc) for doc in (ROOT / "docs").glob("*.md")}
    broken = sorted(
        f"{path.relative_to(ROOT)}: docs/{doc}.md#{anchor}"
        for path in TEXTS
        for doc, anchor in CITED.findall(path.read_text(errors="replace"))
        if anchor not in known.get(doc, set())
    )
    assert not broken, "\n".join(broken)
