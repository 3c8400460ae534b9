"""The limit record table (``LimitRecords``, ``broker.use_limit_records``): its statements on
every dialect and the refusals of bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trinbox import LimitRecords, SqlBroker
from trinbox._dialects.limit_records import record_plan
from trinbox.errors import DeclarationError
from trinbox.schema import ddl, dialect_named

DIALECTS = ["postgres", "mysql", "sqlite"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_record_table_has_one_row_per_queue_group_and_process(dialect: str) -> None:
    (create,) = ddl(LimitRecords("app_limits"), dialect)  # type: ignore[arg-type]
    assert "CREATE TABLE IF NOT EXISTS" in create
    assert "PRIMARY KEY (queue_table, grp, process)" in create
    assert "declared" in create and "seen_at" in create
    found = record_plan(dialect_named(dialect), "app_limits", None, "test")
    assert found.others.params == ("table", "grp", "process", "since")
    assert "process <>" in found.others.sql
    assert found.refresh.params == ("declared", "seen", "table", "grp", "process")
    assert found.refresh.sql.startswith("UPDATE")
    assert found.insert.params == ("table", "grp", "process", "declared", "seen")
    assert found.label == "app_limits"


def test_a_schema_qualifies_the_table() -> None:
    found = record_plan(dialect_named("postgres"), "app_limits", "jobs", "test")
    assert "jobs" in found.others.sql and found.label == "jobs.app_limits"


@pytest.mark.parametrize("name", ["", 3])
def test_a_bad_table_name_is_refused(name: Any) -> None:
    with pytest.raises(DeclarationError, match=r"LimitRecords"):
        LimitRecords(name)


def test_use_limit_records_refuses_what_is_not_one(tmp_path: Path) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db")
    with pytest.raises(DeclarationError, match=r"use_limit_records takes a LimitRecords, found"):
        broker.use_limit_records("app_limits")  # type: ignore[arg-type]


def test_use_limit_records_refuses_an_unknown_on_mismatch(tmp_path: Path) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db")
    with pytest.raises(DeclarationError, match=r"on_mismatch is 'warn' or 'refuse', found 'stop'"):
        broker.use_limit_records(LimitRecords("app_limits"), on_mismatch="stop")  # type: ignore[arg-type]


def test_use_limit_records_sets_the_plan_and_the_choice(tmp_path: Path) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db")
    assert broker.limit_records is None
    broker.use_limit_records(LimitRecords("app_limits"), on_mismatch="refuse")
    assert broker.limit_records is not None and broker.limit_mismatch == "refuse"


def test_trinbox_schema_loads_a_limit_record_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trinbox.cli._load import load_table

    (tmp_path / "limits_mod.py").write_text(
        "from trinbox import LimitRecords\nRECORDS = LimitRecords('app_limits')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_table("limits_mod:RECORDS") == LimitRecords("app_limits")
