"""README "Publishing by name: routes, subscriptions by name, replies": ``orders.py`` prints
what the README shows when run as written (SQLite), its three stages hand the order on by
reply on PostgreSQL and MariaDB too, each woken by the stage before it, and the ``NoRoute``
message the section quotes is the one a publish of an unrouted name raises."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.errors import NoRoute
from trinbox.testing import VirtualClock, settled

from .readme import README, block, child_env
from .serving import make_app, serving
from .stands import SERVER_STANDS, StandName, fresh_stand

SECTION = README.read_text().split("### Publishing by name: routes", 1)[1].split("\n### ", 1)[0]
HOUR = 3600.0


def shown_output() -> str:
    found = re.search(r"<!-- test: readme_routes_output -->\n```console\n(.*?)```", SECTION, re.S)
    assert found is not None
    command, *lines = found.group(1).splitlines(keepends=True)
    assert command == "$ python orders.py\n"
    return "".join(lines)


@pytest.fixture
def orders() -> Iterator[types.ModuleType]:
    """The README's orders.py as a module of its own (nothing connects at import)."""
    module = types.ModuleType("readme_orders")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_routes"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


def test_orders_py_prints_what_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "orders.py").write_text(block("readme_routes"))
    done = subprocess.run(
        [sys.executable, "orders.py"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown_output()
    assert done.stderr == ""


@pytest.mark.parametrize("stand_name", SERVER_STANDS)
async def test_the_pipeline_runs_on_the_servers_woken_stage_by_stage(
    stand_name: StandName, tmp_path: Path, orders: types.ModuleType, clock: VirtualClock
) -> None:
    m: Any = orders
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker(poll_interval=HOUR)
        broker.route(m.OrderEvent, "orders.*")
        broker.route(m.OrderEvent, "orders.packed", m.Packed)
        app = make_app()
        for handler in (m.pack, m.ship, m.notify):
            app.include(broker, handler)
        app.on_startup(lambda: broker.create_tables(m.OrderEvent))
        async with serving(app):
            await broker.publish_named("orders.placed", m.Placed(order=7, items=12))
            with trio.fail_after(HOUR / 2):  # each stage woken: none waits for its poll
                await settled(app, m.notify, 1)
        assert m.shipped.is_set()
        assert stand.rows("SELECT * FROM order_events") == []


async def test_the_quoted_no_route_is_what_a_publish_raises(orders: types.ModuleType) -> None:
    quoted = re.search(r'raises `trinbox.errors.NoRoute`.*?\*"(.*?)"\*', SECTION, re.S)
    assert quoted is not None
    m: Any = orders
    with pytest.raises(NoRoute) as raised:
        await m.broker.publish_named("users.created", {"user": 1})  # refused before any I/O
    assert str(raised.value) == " ".join(quoted.group(1).split())
