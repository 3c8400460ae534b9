"""README "Limits per key": its service, run in virtual time on SQLite from an empty directory,
prints what the README shows (no tenant above its limit, the queue at its cap, other tenants
beside the one waiting), and handles every row; so does its ledger beside FIFO groups (no
tenant above its limit in accounts, each account's postings in order)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import as_module, shown


def program(
    tag: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> types.ModuleType:
    """The README block ``tag`` as the module ``name``, run in ``tmp_path`` (its database)."""
    monkeypatch.chdir(tmp_path)
    return as_module(name, tag, monkeypatch)


@pytest.fixture
def syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return program("readme_limits", "tenant_sync", tmp_path, monkeypatch)


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return program("readme_limits_fifo", "ledger", tmp_path, monkeypatch)


async def serve_until_settled(m: Any, handler: Any, count: int) -> None:
    """Serve the program's app until ``count`` rows of ``handler`` settled, then shut down."""
    m.broker.clock = TrioClock()  # leases in virtual time, as the handlers' sleeps
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, handler, count)
            m.app.shutdown()


async def test_the_syncs_stay_within_their_limits(
    syncs: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = syncs
    await serve_until_settled(m, m.pull, 10)
    assert capsys.readouterr().out.splitlines() == shown("readme_limits_output").splitlines()
    assert m.app.statistics(m.pull).acked == 10
    # Ten rows of one second, two at a time for acme's six: three seconds at least, and no
    # more than that (a freed slot is taken at once, not at the next poll).
    assert 3 <= trio.current_time() < 4


async def test_the_ledger_keeps_each_tenant_within_its_accounts_and_each_account_in_order(
    ledger: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = ledger
    await serve_until_settled(m, m.post, 12)
    assert capsys.readouterr().out.splitlines() == shown("readme_limits_fifo_output").splitlines()
    assert m.app.statistics(m.post).acked == 12
    # acme's nine postings of one second, two accounts at a time: five seconds, and no more
    # (a freed slot is taken at once, not at the next poll).
    assert 5 <= trio.current_time() < 6
