"""README "Unique jobs": its service, written to ``syncs.py`` in an empty directory, runs as
``trinbox run syncs:app`` in a process of its own and prints what the README shows; the index
statements it quotes are the DDL's; the refusal it shows is the one a publish of the first key
again raises with ``on_duplicate="raise"``."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinbox.errors import Duplicate
from trinbox.schema import ddl

from ..readme import as_module, block, shown
from ..serving import make_app, serving
from .kit import runs_as_shown


async def test_the_unique_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "syncs.py").write_text(block("readme_unique"))
    await runs_as_shown(tmp_path, "syncs:app", shown("readme_unique_output"))


def test_the_index_statements_are_the_ddls(monkeypatch: pytest.MonkeyPatch) -> None:
    module = as_module("readme_syncs", "readme_unique", monkeypatch)
    lines = [line.strip() for line in shown("readme_unique_index").splitlines()]
    pg = lines[0].removeprefix("PostgreSQL:").strip()
    lite = lines[1].removeprefix("SQLite:").strip()
    my_column, my_index = lines[2].removeprefix("MySQL:").strip(), lines[3]
    assert ddl(module.Sync, "postgres")[-1] == pg
    assert ddl(module.Sync, "sqlite")[-1] == lite
    table = ddl(module.Sync, "mysql")[0]
    assert f"    {my_column}\n" in table
    assert f"    {my_index}\n" in table


async def test_the_refusal_is_the_one_the_readme_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = as_module("readme_syncs_refused", "readme_unique", monkeypatch)
    broker = type(module.broker).sqlite(f"sqlite:///{tmp_path}/syncs.db")
    app = make_app()
    app.add_broker(broker)
    app.on_startup(lambda: broker.create_tables(module.Sync))
    async with serving(app):
        await broker.publish(module.Sync, module.Account("ada"), unique="sync-ada")
        with pytest.raises(Duplicate) as info:
            await broker.publish(
                module.Sync, module.Account("ada"), unique="sync-ada", on_duplicate="raise"
            )
    assert f"trinbox.errors.Duplicate: {info.value}" == shown("readme_unique_refused")
