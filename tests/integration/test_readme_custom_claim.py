"""README "Custom claims": its block serves only the rows of tenants on the "pro" plan on
PostgreSQL (trinbox reads the claimed rows by id), and the refusal it quotes for MySQL without
a fetch is the one ``app.include`` raises."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trinbox.errors import UnsupportedFetch
from trinbox.testing import settled

from .readme import README, block
from .serving import make_app, serving
from .stands import fresh_stand

TENANTS = """
    CREATE TABLE tenants (tenant VARCHAR(100) PRIMARY KEY, plan VARCHAR(20) NOT NULL);
    INSERT INTO tenants VALUES ('acme', 'pro'), ('beta', 'free');
"""


@pytest.fixture
def readme_module() -> Iterator[types.ModuleType]:
    module = types.ModuleType("readme_custom_claim")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_custom_claim"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_custom_claim_serves_only_pro_tenants(
    tmp_path: Path, readme_module: types.ModuleType
) -> None:
    m: Any = readme_module
    with fresh_stand("postgres", tmp_path) as stand:
        stand.script(TENANTS)
        broker = stand.broker()
        app = make_app()
        app.include(broker, m.export)
        app.on_startup(lambda: broker.create_tables(m.Export))
        async with serving(app):
            for tenant, year in (("beta", 2025), ("acme", 2025), ("acme", 2026)):
                await broker.publish(m.Export, m.ExportRequest(tenant, year), tenant=tenant)
            with trio.fail_after(20):
                await settled(app, m.export, 2)
        assert m.exported == [m.ExportRequest("acme", 2025), m.ExportRequest("acme", 2026)]
        assert stand.rows("SELECT tenant, attempt FROM export_jobs") == [("beta", 1)]


def test_the_refusal_without_a_fetch_is_the_one_quoted(
    tmp_path: Path, readme_module: types.ModuleType
) -> None:
    m: Any = readme_module
    with fresh_stand("mariadb", tmp_path) as stand, pytest.raises(UnsupportedFetch) as refused:
        make_app().include(stand.broker(), m.export)
    assert f"UnsupportedFetch: {refused.value}\n" in README.read_text()
