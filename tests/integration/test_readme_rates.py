"""README "Limits per key", "Rates": its service, run in virtual time on SQLite from an empty
directory, prints the start times the README shows (a burst of two per tenant, then one a
second for acme's rest, globex's two beside the first burst), and handles every row."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import block, shown


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///calls.db
    module = types.ModuleType("api_calls")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_rates"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_calls_start_within_their_rate(
    calls: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = calls
    m.broker.clock = TrioClock()  # the rate's clock in virtual time, as the handlers' sleeps
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, m.push, 7)
            m.app.shutdown()
    assert capsys.readouterr().out.splitlines() == shown("readme_rates_output").splitlines()
    assert m.app.statistics(m.push).acked == 7
    # acme's fifth start one second after its fourth, three after its burst: the rate held
    # it, and nothing more (each claim the poll interval, a second, after the last).
    acme = m.starts["acme"]
    assert [round(b - a, 6) for a, b in pairwise(acme)] == [0, 1, 1, 1]
