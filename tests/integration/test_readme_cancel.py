"""README "Cancel a job": its service, run in virtual time on SQLite from an empty directory,
prints what the README shows and counts what the README reads; ``trinbox jobs ... cancel``
run on its database prints the lines the README shows."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import README, block, child_env, shown


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///exports.db
    (tmp_path / "exports.py").write_text(block("readme_cancel"))
    module = types.ModuleType("exports")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_cancel"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_export_in_work_is_cancelled_and_the_queued_one_settled(
    exports: types.ModuleType,
    clock: VirtualClock,
    tmp_path: Path,
) -> None:
    m: Any = exports
    m.broker.clock = TrioClock()
    printed: list[str] = []
    last = trio.Event()

    def record(*args: object) -> None:  # the block's print, heard by the test
        line = " ".join(str(a) for a in args)
        printed.append(line)
        if line.endswith("not_found"):
            last.set()

    m.print = record
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await last.wait()
            await settled(m.app, m.export, 1)
            await m.broker.publish(m.Export, m.Month("may"), id=4, delay=_later())
            m.app.shutdown()
    assert printed == shown("readme_cancel_output").splitlines()
    stats = m.app.statistics(m.export)
    counts = ", ".join(
        f"`{name}={getattr(stats, name)}`"
        for name in ("cancelled", "dropped", "retried", "released")
    )
    assert f"counts the cancelled delivery apart: {counts}." in _flat(README.read_text())
    assert (stats.cancelled, stats.dropped, stats.released) == (1, 0, 0)

    command, *expected = shown("readme_cancel_cli").splitlines()
    args = command.removeprefix("$ trinbox ").split()
    done = subprocess.run(  # noqa: ASYNC221 - the command's own run, to its end
        [sys.executable, "-m", "trinbox", *args],
        cwd=tmp_path,
        env=child_env(PYTHONPATH=f"{tmp_path}:{child_env()['PYTHONPATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.splitlines() == expected, done.stderr
    assert done.returncode == 1  # an id not found


def _later() -> Any:
    from datetime import timedelta

    return timedelta(hours=1)
