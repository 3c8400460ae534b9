"""README "Batch publish": its service, written to ``reminders.py`` in an empty directory, runs
as ``trinbox run reminders:app`` in a process of its own and prints what the README shows."""

from __future__ import annotations

from pathlib import Path

from ..readme import block, shown
from .kit import runs_as_shown


async def test_the_batch_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "reminders.py").write_text(block("readme_many"))
    await runs_as_shown(tmp_path, "reminders:app", shown("readme_many_output"))
