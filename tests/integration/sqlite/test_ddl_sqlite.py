"""The SQLite DDL in SQLite itself: a schema-qualified table (an attached database) with
hostile names, and the default of a generated RetryAfter, which writes the time text trinbox
writes."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from trinbox import Attempt, Column, Id, Inbox, Lease, LockedUntil, ProcessedAt, RetryAfter
from trinbox.schema import ddl


class Hostile(Inbox[Lease], table='we"ird`ta%ble', schema="app's"):
    id: Annotated[int, Id(generated=True), Column('i"d`')]
    due: Annotated[datetime, RetryAfter(generated=True), Column("d%ue")]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    done: Annotated[datetime | None, ProcessedAt()]


def test_a_schema_qualified_table_of_hostile_names_is_created_twice(tmp_path: Path) -> None:
    statements = ddl(Hostile, "sqlite", dead_letter="app's.de`ad")
    with contextlib.closing(sqlite3.connect(tmp_path / "main.db")) as conn:
        conn.execute("ATTACH DATABASE ? AS `app's`", (str(tmp_path / "app.db"),))
        for _ in range(2):  # the second run creates nothing and fails on nothing
            for statement in statements:
                conn.execute(statement)
        objects = conn.execute(
            "SELECT type, name FROM `app's`.sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        assert objects == [
            ("table", "de`ad"),
            ("table", 'we"ird`ta%ble'),
            ("index", 'we"ird`ta%ble_claim'),
        ]
        # A row left to its defaults is due now, written as trinbox writes times.
        conn.execute("INSERT INTO `app's`.`we\"ird``ta%ble` DEFAULT VALUES")
        (due, attempt) = conn.execute(
            "SELECT `d%ue`, attempt FROM `app's`.`we\"ird``ta%ble`"
        ).fetchone()
    assert attempt == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", due)
    now = datetime.now(UTC).replace(tzinfo=None)
    assert abs(datetime.fromisoformat(due) - now).total_seconds() < 60
