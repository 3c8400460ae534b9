"""README "Limits per key", in the advisory form: its block serves on PostgreSQL, MariaDB and
SQLite with no account above its limit of two and no document above one, and prints what the
README shows."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox._drivers.aio import asyncio_loop
from trinbox.testing import settled

from .readme import as_module, shown
from .serving import make_app, serving
from .stands import StandName, fresh_stand

ACCOUNTS = ["acme", "globex"]


@pytest.fixture
def edits(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return as_module("edits", "readme_limits_advisory", monkeypatch)


@pytest.mark.parametrize("stand_name", ["postgres", "mariadb", "sqlite"])
async def test_the_edits_stay_within_their_limits(
    tmp_path: Path,
    edits: types.ModuleType,
    capsys: pytest.CaptureFixture[str],
    stand_name: StandName,
) -> None:
    m: Any = edits
    with fresh_stand(stand_name, tmp_path) as stand:
        # Written before serving: the first claim finds every edit.
        async with asyncio_loop(stand_name != "sqlite"):
            broker = stand.broker()
            await broker.open()
            try:
                await broker.create_tables(m.Edit)
                for account in ACCOUNTS:
                    for document in range(3):
                        for _ in range(2):
                            name = f"{account}-{document}"
                            change = m.Change(account, name)
                            await broker.publish(m.Edit, change, account=account, document=name)
            finally:
                await broker.aclose()
        app = make_app()
        app.include(stand.broker(poll_interval=0.05), m.apply)
        async with serving(app):
            with trio.fail_after(30):
                await settled(app, m.apply, 12)
        assert stand.rows("SELECT id FROM doc_edits") == []
    m.report(ACCOUNTS)
    assert (
        capsys.readouterr().out.splitlines() == shown("readme_limits_advisory_output").splitlines()
    )
