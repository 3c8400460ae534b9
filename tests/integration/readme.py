"""The README's tested code blocks, and running pytest on files written from them.

A block is tested when an HTML comment names it on the line before: ``<!-- test: TAG -->`` or,
for a block that is a file of a group, ``<!-- test: TAG FILENAME -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import trinbox

ROOT = Path(trinbox.__file__).parents[1]
README = ROOT / "README.md"

_BLOCK = re.compile(r"<!-- test: (\S+)(?: (\S+))? -->\n```python\n(.*?)\n```", re.DOTALL)


def blocks(tag: str) -> dict[str, str]:
    """The blocks marked ``tag``, by file name (``""`` for an unnamed block); at least one."""
    found = {name: code + "\n" for t, name, code in _BLOCK.findall(README.read_text()) if t == tag}
    assert found, f"README.md has no block marked <!-- test: {tag} ... -->"
    return found


def block(tag: str) -> str:
    """The one block marked ``tag``."""
    (code,) = blocks(tag).values()
    return code


def shown(tag: str) -> str:
    """The text block (a program's output) marked ``tag``: ``<!-- test: TAG -->`` then a
    fenced block without a language."""
    found = re.search(rf"<!-- test: {tag} -->\n```\n(.*?)\n```", README.read_text(), re.DOTALL)
    assert found is not None, f"README.md has no text block marked <!-- test: {tag} -->"
    return found.group(1)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess that imports this checkout's trinbox."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def run_pytest(directory: Path, env: dict[str, str]) -> tuple[dict[str, int], str]:
    """Run pytest on ``directory`` in a subprocess: the counts of its summary line (passed,
    failed, skipped, error...) and its output."""
    (directory / "pytest.ini").write_text("[pytest]\n")  # the rootdir: no configuration above
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    return counts, output
