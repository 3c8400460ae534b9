from __future__ import annotations

from pathlib import Path

import pytest

from .harness import Db


@pytest.fixture
def db(tmp_path: Path) -> Db:
    """A fresh SQLite database file for one test."""
    return Db(tmp_path / "queue.db")
