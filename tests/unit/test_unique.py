"""The ``Unique()`` role without a database: the declaration's rules, the DDL of its unique
index per dialect, the publish's statements, the stored key of a window, and how the startup
check reads each server's catalog text (the servers run them in
tests/integration/matrix/test_unique.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import pytest

from trinbox import (
    Group,
    Id,
    Inbox,
    InboxSpec,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    SqlBroker,
    Unique,
)
from trinbox._broker.publishing import stored_key
from trinbox._declare._inbox import spec_of
from trinbox._dialects.ddl import unique_statements
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.errors import DeclarationError
from trinbox.schema import ddl


class Sync(Inbox[Lease], table="sync_jobs"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    processed_at: Annotated[datetime | None, ProcessedAt()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class Plain(Inbox[Lease], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


def test_postgres_a_partial_unique_index_over_the_rows_that_hold_their_key() -> None:
    assert ddl(Sync, "postgres")[2:] == [
        'CREATE UNIQUE INDEX IF NOT EXISTS "sync_jobs_unique" ON "sync_jobs" ("dedup") '
        'WHERE "processed_at" IS NULL AND "origin" IS NULL'
    ]
    assert '    "dedup" TEXT\n' in ddl(Sync, "postgres")[0]
    # Ack deletes, no dead letter group: every row holds its key.
    assert ddl(Plain, "postgres")[1:] == [
        'CREATE UNIQUE INDEX IF NOT EXISTS "plain_jobs_unique" ON "plain_jobs" ("dedup")'
    ]


def test_sqlite_a_partial_unique_index_over_the_rows_that_hold_their_key() -> None:
    assert ddl(Sync, "sqlite")[2:] == [
        "CREATE UNIQUE INDEX IF NOT EXISTS `sync_jobs_unique` ON `sync_jobs` (`dedup`) "
        "WHERE `processed_at` IS NULL AND `origin` IS NULL"
    ]


def test_mysql_a_generated_column_holding_the_key_while_the_row_does() -> None:
    assert ddl(Sync, "mysql") == [
        "CREATE TABLE IF NOT EXISTS `sync_jobs` (\n"
        "    `id` BIGINT AUTO_INCREMENT PRIMARY KEY,\n"
        "    `queue` VARCHAR(191) COLLATE utf8mb4_bin NOT NULL,\n"
        "    `origin` VARCHAR(191) COLLATE utf8mb4_bin,\n"
        "    `locked_until` DATETIME(6),\n"
        "    `processed_at` DATETIME(6),\n"
        "    `payload` LONGBLOB NOT NULL,\n"
        "    `dedup` VARCHAR(191) COLLATE utf8mb4_bin,\n"
        "    `dedup_unfinished` VARCHAR(191) COLLATE utf8mb4_bin GENERATED ALWAYS AS "
        "(IF(`processed_at` IS NULL AND `origin` IS NULL, `dedup`, NULL)) STORED,\n"
        "    INDEX `sync_jobs_claim` (`queue`, `id`),\n"
        "    UNIQUE INDEX `sync_jobs_unique` (`dedup_unfinished`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    ]
    assert ddl(Plain, "mysql")[0].endswith(
        "    `dedup` VARCHAR(191) COLLATE utf8mb4_bin,\n"
        "    UNIQUE INDEX `plain_jobs_unique` (`dedup`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )


def test_the_fix_for_a_table_made_without_the_index() -> None:
    assert unique_statements(MySqlDialect(), spec_of(Sync)) == (
        "ALTER TABLE `sync_jobs` ADD COLUMN `dedup_unfinished` VARCHAR(191) COLLATE utf8mb4_bin "
        "GENERATED ALWAYS AS (IF(`processed_at` IS NULL AND `origin` IS NULL, `dedup`, NULL)) "
        "STORED, ADD UNIQUE INDEX `sync_jobs_unique` (`dedup_unfinished`)"
    )
    assert unique_statements(MySqlDialect(), spec_of(Plain)) == (
        "ALTER TABLE `plain_jobs` ADD UNIQUE INDEX `plain_jobs_unique` (`dedup`)"
    )
    assert unique_statements(PostgresDialect(), spec_of(Sync)) == ddl(Sync, "postgres")[2]


def test_the_dead_letter_table_keeps_the_key_without_an_index() -> None:
    *_, dead = ddl(Plain, "mysql", dead_letter="plain_dead")
    assert "UNIQUE" not in dead
    assert "    `dedup` VARCHAR(191) COLLATE utf8mb4_bin\n" in dead


def test_the_publish_statements_per_dialect() -> None:
    spec = spec_of(Sync)
    pg = PostgresDialect().unique_insert(spec)
    assert pg.insert.sql.endswith(
        'ON CONFLICT ("dedup") WHERE "processed_at" IS NULL AND "origin" IS NULL DO NOTHING '
        'RETURNING "id"'
    )
    assert pg.holder.sql == (
        'SELECT "id" FROM "sync_jobs" WHERE "dedup" = $1 AND "processed_at" IS NULL AND '
        '"origin" IS NULL'
    )
    my = MySqlDialect().unique_insert(spec)
    assert not my.returns_id
    assert "ON DUPLICATE" not in my.insert.sql  # a held key fails it: the holder tells why
    assert my.holder.sql == "SELECT `id` FROM `sync_jobs` WHERE `dedup_unfinished` = %s"
    rendered = MySqlDialect().render("insert", MySqlDialect().unique_insert_sql(spec))
    assert rendered.sql.endswith(" ON DUPLICATE KEY UPDATE `id` = `id`")
    lite = SqliteDialect().unique_insert(spec)
    assert lite.insert.sql.endswith(
        "ON CONFLICT (`dedup`) WHERE `processed_at` IS NULL AND `origin` IS NULL DO NOTHING "
        "RETURNING `id`"
    )


def test_insert_statement_renders_the_dedup_for_your_own_driver() -> None:
    pg = SqlBroker.postgres("postgresql://u@h/d")
    sql, params = pg.insert_statement(Sync, b"x", queue="q", unique="k", paramstyle="format")
    assert sql.endswith(
        'ON CONFLICT ("dedup") WHERE "processed_at" IS NULL AND "origin" IS NULL DO NOTHING '
        'RETURNING "id"'
    )
    assert params[-1] == "k"
    my = SqlBroker.mysql("mysql://u@h/d")
    sql, _ = my.insert_statement(Sync, b"x", queue="q", unique="k", paramstyle="pyformat")
    assert sql.endswith("ON DUPLICATE KEY UPDATE `id` = `id`")
    sql, params = my.insert_statement(Sync, b"x", queue="q", paramstyle="format")
    assert "DUPLICATE" not in sql
    assert params[-1] is None  # no key: the plain insert, NULL in the column


def test_a_publish_refuses_a_key_the_row_cannot_hold() -> None:
    pg = SqlBroker.postgres("postgresql://u@h/d")
    with pytest.raises(
        DeclarationError,
        match=(
            r"^publish into sync_jobs \(Sync\): a dedup key is given as unique= \(checked, then "
            r"written into the Unique field dedup\), found dedup= among the columns; pass "
            r"unique=\.\.\.$"
        ),
    ):
        pg.insert_statement(Sync, b"x", queue="q", dedup="k")
    with pytest.raises(DeclarationError, match=r"found unique='k' and a table without one"):
        pg.insert_statement(Unkeyed, b"x", unique="k")
    with pytest.raises(DeclarationError, match=r"with a NUL character or a lone surrogate"):
        pg.insert_statement(Sync, b"x", queue="q", unique="a\x00b")


class Unkeyed(Inbox[Lease], table="unkeyed"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]


def test_a_unique_field_holds_text_that_may_be_null() -> None:
    with pytest.raises(
        DeclarationError,
        match=(
            r"\.Bad: a Unique field holds a dedup key of text, NULL for a row that dedups "
            r"nothing, found 'dedup' of type str; declare dedup: Annotated\[str \| None, "
            r"Unique\(\)\] = None$"
        ),
    ):

        class Bad(Inbox[Lease], table="bad"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()] = None
            dedup: Annotated[str, Unique()]

    with pytest.raises(DeclarationError, match=r"found Unique\(generated=True\) on 'dedup'"):

        class Generated(Inbox[Lease], table="bad"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()] = None
            dedup: Annotated[str | None, Unique(generated=True)] = None

    with pytest.raises(DeclarationError, match=r"each role is played by at most one field"):

        class Twice(Inbox[Lease], table="bad"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()] = None
            a: Annotated[str | None, Unique()] = None
            b: Annotated[str | None, Unique()] = None


@pytest.mark.parametrize("window", [timedelta(0), timedelta(seconds=-1), timedelta(seconds=1.5)])
def test_a_window_is_a_positive_whole_number_of_seconds(window: timedelta) -> None:
    spec = InboxSpec("bad", "id", generated=True).lease("locked_until")
    with pytest.raises(
        DeclarationError, match=r"a Unique window is a positive whole number of seconds"
    ):

        class Bad(Inbox[Lease], spec=spec.unique("dedup", window=window)):
            id: int
            locked_until: datetime | None = None
            dedup: str | None = None


def test_the_manual_spec_declares_a_key_and_its_window() -> None:
    spec = (
        InboxSpec("manual", "id", generated=True)
        .lease("locked_until")
        .unique("dedup", window=timedelta(hours=1))
    )

    class Manual(Inbox[Lease], spec=spec):
        id: int
        locked_until: datetime | None = None
        dedup: str | None = None

    found = spec_of(Manual)
    assert found.unique is not None
    assert found.unique.column == "dedup"
    assert found.unique_window == timedelta(hours=1)


def test_a_window_stores_the_start_of_the_period_holding_the_due_time() -> None:
    hour = timedelta(hours=1)
    at = datetime(2026, 12, 1, 10, 59, 59, 999999, tzinfo=UTC)
    assert stored_key("report-7", hour, at) == "report-7@2026-12-01T10:00:00Z"
    assert stored_key("report-7", hour, at + timedelta(microseconds=1)) == (
        "report-7@2026-12-01T11:00:00Z"
    )
    # Periods count from the Unix epoch, in UTC: a day starts at midnight UTC.
    assert stored_key("k", timedelta(days=1), at) == "k@2026-12-01T00:00:00Z"
    assert stored_key("k", timedelta(minutes=7), datetime(1970, 1, 1, 0, 13)) == (
        "k@1970-01-01T00:07:00Z"
    )


# What each server gives back for the DDL's index, as the startup check reads its catalog.
SERVER_TEXT = [
    (PostgresDialect(), "dedup", "((processed_at IS NULL) AND (origin IS NULL))", True),
    (PostgresDialect(), "dedup", "((origin IS NULL) AND (processed_at IS NULL))", True),
    (PostgresDialect(), "dedup", "(processed_at IS NULL)", False),
    (PostgresDialect(), "dedup", None, False),
    (PostgresDialect(), "DEDUP", "((processed_at IS NULL) AND (origin IS NULL))", False),
    (SqliteDialect(), "dedup", "`processed_at` IS NULL AND `origin` IS NULL", True),
    (SqliteDialect(), "dedup", '"processed_at" is null and "origin" is null', True),
    (SqliteDialect(), "dedup", "`processed_at` IS NULL", False),
    (
        MySqlDialect(),
        "dedup_unfinished",
        "if(`processed_at` is null and `origin` is null,`dedup`,NULL)",
        True,
    ),
    (
        MySqlDialect(),
        "dedup_unfinished",
        b"if(((`processed_at` is null) and (`origin` is null)),`dedup`,NULL)",
        True,
    ),
    (MySqlDialect(), "dedup_unfinished", "if(`processed_at` is null,`dedup`,NULL)", False),
    (MySqlDialect(), "dedup", None, False),
]


@pytest.mark.parametrize(("dialect", "column", "text", "found"), SERVER_TEXT)
def test_the_startup_check_reads_each_servers_text(
    dialect: PostgresDialect | MySqlDialect | SqliteDialect,
    column: str,
    text: object,
    found: bool,
) -> None:
    assert dialect.unique_index_found(spec_of(Sync), [(column, text)]) is found


def test_a_table_whose_rows_always_hold_their_key_needs_a_plain_unique_index() -> None:
    assert PostgresDialect().unique_index_found(spec_of(Plain), [("dedup", None)])
    assert not PostgresDialect().unique_index_found(spec_of(Plain), [("dedup", "(x IS NULL)")])
    assert MySqlDialect().unique_index_found(spec_of(Plain), [("dedup", "")])
