"""The README's "Whose clock" section says what the brokers do: its snippet makes brokers on
the clocks it names, and its table names the expressions the statements write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trinbox import SqlBroker

from ..integration.readme import block

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_the_snippet_makes_brokers_on_the_clocks_it_names() -> None:
    namespace: dict[str, Any] = {}
    exec(block("readme_clock"), namespace)
    shared, own, local = (namespace[name] for name in ("shared", "own", "local"))
    assert all(isinstance(broker, SqlBroker) for broker in (shared, own, local))
    assert shared.dialect.database_clock
    assert not own.dialect.database_clock
    assert local.dialect.database_clock
    # The defaults the table gives.
    assert not SqlBroker.sqlite("sqlite:///jobs.db").dialect.database_clock
    assert SqlBroker.mysql("mysql://app@db/app").dialect.database_clock


def test_the_table_names_the_expressions_the_statements_write() -> None:
    section = README[README.index("### Whose clock") : README.index("## The `trinbox` command")]
    pg = SqlBroker.postgres("postgresql://app@db/app").dialect
    my = SqlBroker.mysql("mysql://app@db/app").dialect
    assert f"| `{pg.server_clock.now}` |" in section
    assert f"| `{my.server_clock.now}`, UTC whatever" in section
    assert "'now'" in SqlBroker.sqlite("sqlite:///q.db").dialect.server_clock.now
    assert "(`delay_us`)" in section
