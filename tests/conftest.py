"""Fixtures shared by every test tier."""

from __future__ import annotations

import pytest
from trio.testing import MockClock


@pytest.fixture
def clock() -> MockClock:
    """Trio's mock clock, jumping when the run loop has been idle for 50 ms of real time.

    pytest-trio's ``autojump_clock`` jumps the moment the loop is idle, which includes every
    wait on a SQLite worker thread: a timeout around a database call would fire spuriously.
    The short threshold keeps the autojump and leaves database calls their real time.
    """
    return MockClock(autojump_threshold=0.05)
