"""README "Limits per key": its service, run in virtual time on SQLite from an empty directory,
prints what the README shows (no tenant above its limit, the queue at its cap, other tenants
beside the one waiting), and handles every row."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import block, shown


@pytest.fixture
def syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///syncs.db
    module = types.ModuleType("tenant_sync")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_limits"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_syncs_stay_within_their_limits(
    syncs: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = syncs
    m.broker.clock = TrioClock()  # leases in virtual time, as the handlers' sleeps
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, m.pull, 10)
            m.app.shutdown()
    assert capsys.readouterr().out.splitlines() == shown("readme_limits_output").splitlines()
    assert m.app.statistics(m.pull).acked == 10
    # Ten rows of one second, two at a time for acme's six: three seconds at least, and no
    # more than that (a freed slot is taken at once, not at the next poll).
    assert 3 <= trio.current_time() < 4
