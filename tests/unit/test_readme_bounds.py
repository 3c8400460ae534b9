"""The README's table of time bounds and its default backoff say what trinbox does."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from trinbox import _bounds
from trinbox._api.backoff import DEFAULT_BACKOFF

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_the_bounds_table_lists_every_bound_with_its_value() -> None:
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| ([\d.]+) \|", README, flags=re.MULTILINE))
    constants = {name: getattr(_bounds, name) for name in _bounds.__all__ if name.isupper()}
    assert set(rows) == set(constants)
    for name, value in constants.items():
        assert float(rows[name]) == value, name


def test_the_default_backoff_is_the_one_described() -> None:
    assert "`Backoff.exponential(base=1.0, cap=300.0, jitter=0.5)` by default" in README
    assert DEFAULT_BACKOFF.kind == "exponential"
    assert DEFAULT_BACKOFF.base == timedelta(seconds=1.0)
    assert DEFAULT_BACKOFF.cap == timedelta(seconds=300.0)
    assert DEFAULT_BACKOFF.jitter == 0.5
