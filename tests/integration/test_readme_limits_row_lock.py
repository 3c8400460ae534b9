"""README "Limits per key", in the row lock form: its block serves on PostgreSQL and on
MariaDB (slots as session locks) with no customer above its limit of two, and prints what the
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


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return as_module("renders", "readme_limits_row_lock", monkeypatch)


@pytest.mark.parametrize("stand_name", ["postgres", "mariadb"])
async def test_the_renders_stay_within_their_limit(
    tmp_path: Path,
    renders: types.ModuleType,
    capsys: pytest.CaptureFixture[str],
    stand_name: StandName,
) -> None:
    m: Any = renders
    with fresh_stand(stand_name, tmp_path) as stand:
        # Written before serving: the first claim finds every frame.
        async with asyncio_loop(True):
            broker = stand.broker()
            await broker.open()
            try:
                await broker.create_tables(m.Render)
                for customer in ("acme", "globex", "initech"):
                    for frame in range(5):
                        await broker.publish(m.Render, m.Frame(customer, frame), customer=customer)
            finally:
                await broker.aclose()
        app = make_app()
        app.include(stand.broker(poll_interval=0.05), m.render)
        async with serving(app):
            with trio.fail_after(30):
                await settled(app, m.render, 15)
        assert stand.rows("SELECT id FROM render_jobs") == []
    m.report()
    assert (
        capsys.readouterr().out.splitlines() == shown("readme_limits_row_lock_output").splitlines()
    )
