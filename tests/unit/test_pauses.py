"""Pauses without a database: what the declaration refuses, the pause table's DDL and its
statements per dialect."""

from __future__ import annotations

import pytest

from trinbox import Pauses
from trinbox._broker.backends import BACKENDS
from trinbox._broker.pausing import PauseBoard
from trinbox._dialects.pauses import WHOLE, pause_plan
from trinbox.errors import DeclarationError
from trinbox.schema import ddl, dialect_named

PAUSES = Pauses("app_pauses")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Pauses(""), r"^Pauses\(''\): a pause table is named by a non-empty str"),
        (lambda: Pauses("p", schema=""), r"^Pauses\('p'\): a pause schema is named by a"),
        (lambda: Pauses(3), r"^Pauses\(3\): a pause table is named by a non-empty str, found 3"),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ],
)
def test_declarations_refused(make: object, message: str) -> None:
    assert callable(make)
    with pytest.raises(DeclarationError, match=message):
        make()


def test_the_pause_table_per_dialect() -> None:
    assert ddl(PAUSES, "postgres") == [
        'CREATE TABLE IF NOT EXISTS "app_pauses" (\n'
        "    tbl TEXT NOT NULL,\n"
        "    grp TEXT NOT NULL,\n"
        "    paused_at TIMESTAMPTZ NOT NULL,\n"
        "    PRIMARY KEY (tbl, grp)\n"
        ")"
    ]
    assert ddl(PAUSES, "mysql") == [
        "CREATE TABLE IF NOT EXISTS `app_pauses` (\n"
        "    tbl VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    grp VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    paused_at DATETIME(6) NOT NULL,\n"
        "    PRIMARY KEY (tbl, grp)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    ]
    assert ddl(Pauses("pauses", schema="ops"), "sqlite") == [
        "CREATE TABLE IF NOT EXISTS `ops`.`pauses` (\n"
        "    tbl TEXT NOT NULL,\n"
        "    grp TEXT NOT NULL,\n"
        "    paused_at TEXT NOT NULL,\n"
        "    PRIMARY KEY (tbl, grp)\n"
        ")"
    ]


def test_the_pause_statements_per_dialect() -> None:
    pg = pause_plan(dialect_named("postgres"), "app_pauses", None, "here")
    assert pg.pause.sql == (
        'INSERT INTO "app_pauses" (tbl, grp, paused_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING'
    )
    assert pg.pause.params == ("tbl", "grp", "now")
    assert pg.resume.sql == 'DELETE FROM "app_pauses" WHERE tbl = $1 AND grp = $2'
    assert pg.read.sql == 'SELECT tbl, grp, paused_at FROM "app_pauses"'
    assert pg.read.params == ()
    my = pause_plan(dialect_named("mysql"), "app_pauses", None, "here")
    assert my.pause.sql == (
        "INSERT IGNORE INTO `app_pauses` (tbl, grp, paused_at) VALUES (%s, %s, %s)"
    )
    assert my.resume.sql == "DELETE FROM `app_pauses` WHERE tbl = %s AND grp = %s"
    lite = pause_plan(dialect_named("sqlite"), "app_pauses", None, "here")
    assert lite.pause.sql == (
        "INSERT OR IGNORE INTO `app_pauses` (tbl, grp, paused_at) VALUES (?, ?, ?)"
    )
    assert lite.checked == (lite.pause, lite.resume, lite.read)
    assert WHOLE == ""


def test_on_the_database_clock_the_pause_writes_the_servers_now() -> None:
    dialect = BACKENDS["postgres"].dialect(database_clock=True)
    plan = pause_plan(dialect, "app_pauses", "ops", "here")
    assert plan.pause.sql == (
        'INSERT INTO "ops"."app_pauses" (tbl, grp, paused_at) VALUES ($1, $2, '
        "statement_timestamp()) ON CONFLICT DO NOTHING"
    )
    assert plan.pause.params == ("tbl", "grp")


def test_a_name_too_long_for_the_database_is_refused() -> None:
    with pytest.raises(DeclarationError, match="here"):
        pause_plan(dialect_named("postgres"), "p" * 64, None, "here")


def test_a_read_begun_before_a_pause_of_this_process_does_not_undo_it() -> None:
    board = PauseBoard()
    whole = board.gate("jobs", None)
    grouped = board.gate("grouped", "a")
    every = board.gate("grouped", None)
    writes = board.writes  # a read begins
    board.add(("jobs", WHOLE))  # this process pauses meanwhile
    assert whole.paused
    board.read([], writes=writes)  # the read, older than the pause, is dropped
    assert whole.paused
    assert board.reads == 1
    board.read([("grouped", "a")], writes=board.writes)
    assert (whole.paused, grouped.paused, every.paused) == (False, True, False)
    board.read([("grouped", WHOLE)], writes=board.writes)
    assert (whole.paused, grouped.paused, every.paused) == (False, True, True)
    assert board.paused("grouped", "b")
    assert not board.paused("jobs", "b")
