"""README "Limits per key", in the row lock form: its block serves on PostgreSQL with no
customer above its limit of two, prints what the README shows, and the refusal it quotes for
MySQL's row lock form is the one ``app.include`` raises."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import UnsupportedForm
from trinbox.testing import settled

from .readme import block, shown
from .serving import make_app, serving
from .stands import fresh_stand


@pytest.fixture
def renders() -> Iterator[types.ModuleType]:
    module = types.ModuleType("renders")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_limits_row_lock"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_renders_stay_within_their_limit(
    tmp_path: Path, renders: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = renders
    with fresh_stand("postgres", tmp_path) as stand:
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


def test_the_refusal_on_mysql_is_the_one_quoted(tmp_path: Path, renders: types.ModuleType) -> None:
    m: Any = renders
    with fresh_stand("mariadb", tmp_path) as stand, pytest.raises(UnsupportedForm) as refused:
        make_app().include(stand.broker(), m.render)
    assert shown("readme_limits_row_lock_refusal") == f"UnsupportedForm: {refused.value}"
