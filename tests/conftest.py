"""Fixtures shared by every test tier."""

from __future__ import annotations

import pytest

from trinbox.testing import VirtualClock


@pytest.fixture
def clock() -> VirtualClock:
    """Virtual time for the test (pytest-trio uses a fixture that returns a clock): it jumps to
    the next deadline whenever every task waits and no database call is in flight.

    pytest-trio's ``autojump_clock`` also jumps while a database call runs on a worker thread
    or a socket, which fires the timeouts around those calls.
    """
    return VirtualClock()
