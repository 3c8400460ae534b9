"""Golden tests of the catalog reads (the exact SQL each dialect renders to read a table's
columns) and the rules that judge their answer (trinbox/_dialects/_columns.py): what each role's
column must hold, per dialect, with no database. tests/integration/matrix/test_column_types.py
runs them against the servers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import pytest

from trinbox._declare._inbox import Inbox, spec_of
from trinbox._declare._markers import Lease
from trinbox._declare._roles import (
    Attempt,
    Group,
    Id,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RetryAfter,
)
from trinbox._dialects._base import Dialect
from trinbox._dialects._columns import FoundColumn, default_value
from trinbox._dialects._statement import Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect, affinity

from ._tables import LeasedEmail, LeasedPlain, OddNames

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()

_PG_READ = (
    "SELECT a.attname, format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE "
    "a.atttypid END, CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END), "
    "pg_get_expr(d.adbin, d.adrelid), NOT a.attnotnull, a.attidentity <> '' FROM pg_attribute "
    "AS a JOIN pg_type AS t ON t.oid = a.atttypid LEFT JOIN pg_attrdef AS d ON d.adrelid = "
    "a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = to_regclass({table}) AND a.attnum > 0 "
    "AND NOT a.attisdropped ORDER BY a.attnum"
)
_MY_READ = (
    "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, COLUMN_DEFAULT, IS_NULLABLE, EXTRA FROM "
    "information_schema.COLUMNS WHERE TABLE_SCHEMA = {schema} AND TABLE_NAME = {table} ORDER BY "
    "ORDINAL_POSITION"
)
_LITE_READ = (
    'SELECT c.name, c.type, c.dflt_value, c."notnull", c.pk, (SELECT m.sql FROM {master} AS m '
    "WHERE m.type = 'table' AND m.name = {table} COLLATE NOCASE) FROM pragma_table_info({args}) "
    "AS c"
)


# -- the catalog reads ------------------------------------------------------------------------


def test_postgresql_reads_the_columns_of_the_table_its_statements_resolve() -> None:
    assert PG.columns_query(spec_of(LeasedEmail)) == Statement(
        "columns", _PG_READ.format(table="'\"email_jobs\"'")
    )
    assert PG.columns_query(spec_of(LeasedPlain)) == Statement(
        "columns", _PG_READ.format(table='\'"app"."plain_jobs"\'')
    )


def test_mysql_reads_the_columns_of_the_current_database_or_the_tables_schema() -> None:
    assert MY.columns_query(spec_of(LeasedEmail)) == Statement(
        "columns", _MY_READ.format(schema="DATABASE()", table="'email_jobs'")
    )
    assert MY.columns_query(spec_of(LeasedPlain)) == Statement(
        "columns", _MY_READ.format(schema="'app'", table="'plain_jobs'")
    )


def test_sqlite_reads_the_pragma_and_the_create_statement() -> None:
    assert LITE.columns_query(spec_of(LeasedEmail)) == Statement(
        "columns",
        _LITE_READ.format(master="sqlite_master", table="'email_jobs'", args="'email_jobs'"),
    )
    assert LITE.columns_query(spec_of(LeasedPlain)) == Statement(
        "columns",
        _LITE_READ.format(
            master="`app`.sqlite_master", table="'plain_jobs'", args="'plain_jobs', 'app'"
        ),
    )


def test_a_catalog_read_names_the_table_in_a_literal() -> None:
    # OddNames is table 'odd"jobs`%': quoted as a name inside the literal on PostgreSQL, a
    # bare literal elsewhere; the percent sign is doubled for PyMySQL's interpolation.
    spec = spec_of(OddNames)
    assert PG.columns_query(spec).sql == _PG_READ.format(table='\'"odd""jobs`%"\'')
    assert MY.columns_query(spec).sql == _MY_READ.format(
        schema="DATABASE()", table="'odd\"jobs`%%'"
    )
    assert LITE.columns_query(spec).sql == _LITE_READ.format(
        master="sqlite_master", table="'odd\"jobs`%'", args="'odd\"jobs`%'"
    )


# -- reading the answers ------------------------------------------------------------------------


def test_mysql_keeps_the_exact_table_when_the_catalog_collation_matches_several() -> None:
    records = [
        ("EMAIL_JOBS", "locked_until", "date", "NULL", "YES", ""),
        ("email_jobs", "locked_until", "datetime", "NULL", "YES", ""),
        ("email_jobs", "job_id", "bigint(20)", None, "NO", "auto_increment"),
        (
            "email_jobs",
            "processed_at",
            "timestamp(6)",
            None,
            "YES",
            "on update current_timestamp(6)",
        ),
    ]
    assert MY.read_columns(spec_of(LeasedEmail), records) == [
        FoundColumn("locked_until", "datetime", "NULL", nullable=True),
        FoundColumn("job_id", "bigint(20)", None, nullable=False, generated=True),
        FoundColumn("processed_at", "timestamp(6)", None, nullable=True, updates_itself=True),
    ]


@pytest.mark.parametrize(
    ("create", "strict", "rowid"),
    [
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", False, True),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT) STRICT", True, True),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT) WITHOUT ROWID, STRICT", True, False),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT DEFAULT (strict()))", False, True),
    ],
)
def test_sqlite_reads_strict_tables_and_the_rowid(create: str, strict: bool, rowid: bool) -> None:
    records = [("id", "INTEGER", None, 0, 1, create), ("v", "TEXT", None, 0, 0, create)]
    found = LITE.read_columns(spec_of(LeasedEmail), records)
    assert [(f.strict, f.generated) for f in found] == [(strict, rowid), (strict, False)]


def test_sqlite_takes_only_a_sole_integer_primary_key_for_the_rowid() -> None:
    create = "CREATE TABLE t (a INTEGER, b INTEGER, PRIMARY KEY (a, b))"
    both = [("a", "INTEGER", None, 0, 1, create), ("b", "INTEGER", None, 0, 2, create)]
    assert [f.generated for f in LITE.read_columns(spec_of(LeasedEmail), both)] == [False, False]
    one = [("a", "INT", None, 0, 1, "CREATE TABLE t (a INT PRIMARY KEY)")]
    assert [f.generated for f in LITE.read_columns(spec_of(LeasedEmail), one)] == [False]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (None, None),
        ("1", "1"),
        ("'1'::bigint", "1"),
        ("(1)", "1"),
        ("((0))", "0"),
        ("NULL", None),
        ("NULL::integer", None),
        ("'it''s'", "it's"),
        ("nextval('jobs_id_seq'::regclass)", "nextval('jobs_id_seq'::regclass)"),
    ],
)
def test_a_default_reads_as_its_value(text: str | None, value: str | None) -> None:
    assert default_value(text) == value


@pytest.mark.parametrize(
    ("declared", "found"),
    [
        ("INTEGER", "INTEGER"),
        ("BIGINT", "INTEGER"),
        ("VARCHAR(10)", "TEXT"),
        ("TEXT", "TEXT"),
        ("", "BLOB"),
        ("BLOB", "BLOB"),
        ("DOUBLE PRECISION", "REAL"),
        ("DATE", "NUMERIC"),
        ("DATETIME", "NUMERIC"),
        ("POINT", "INTEGER"),  # "INT" in it: SQLite's rule, not a bug here
    ],
)
def test_sqlite_affinity_follows_its_rules(declared: str, found: str) -> None:
    assert affinity(declared) == found


# -- the rules ----------------------------------------------------------------------------------


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


def col(name: str, type_: str, default: str | None = None, **more: bool) -> FoundColumn:
    return FoundColumn(name, type_, default, nullable=more.pop("nullable", True), **more)


PG_GOOD = [
    col("id", "bigint", "nextval('jobs_id_seq'::regclass)", nullable=False),
    col("attempt", "smallint", "1", nullable=False),
    col("retry_after", "timestamp(0) with time zone", "now()", nullable=False),
    col("locked_until", "timestamp with time zone"),
    col("processed_at", "timestamp(3) with time zone"),
    col("payload", "bytea"),
]
MY_GOOD = [
    col("id", "bigint(20) unsigned", nullable=False, generated=True),
    col("attempt", "tinyint(4)", "1", nullable=False),
    col("retry_after", "datetime", nullable=False),
    col("locked_until", "timestamp"),
    col("processed_at", "datetime(6)", "NULL"),
    col("payload", "mediumblob"),
]
LITE_GOOD = [
    col("id", "INTEGER", generated=True),
    col("attempt", "(none)", "'1'"),
    col("retry_after", "DATETIME", nullable=False),
    col("locked_until", "INT"),
    col("processed_at", "DATE"),
    col("payload", "TEXT"),
]


@pytest.mark.parametrize(
    ("dialect", "found"),
    [(PG, PG_GOOD), (MY, MY_GOOD), (LITE, LITE_GOOD)],
    ids=["pg", "my", "lite"],
)
def test_columns_that_work_pass(dialect: Dialect, found: list[FoundColumn]) -> None:
    assert dialect.check_columns(spec_of(Job), found) is None


def test_a_column_the_catalog_does_not_list_is_left_to_the_prepare() -> None:
    assert PG.check_columns(spec_of(Job), PG_GOOD[:3]) is None


def test_mysql_and_sqlite_find_a_column_whose_name_differs_in_case() -> None:
    found = [*MY_GOOD[:3], col("LOCKED_UNTIL", "date")]
    problem = MY.check_columns(spec_of(Job), found)
    assert problem is not None
    assert "found column 'LOCKED_UNTIL' of type date;" in problem
    # PostgreSQL names are exact: "LOCKED_UNTIL" is another column.
    assert PG.check_columns(spec_of(Job), [*PG_GOOD[:3], col("LOCKED_UNTIL", "date")]) is None


@pytest.mark.parametrize(
    ("found", "refused"),
    [
        (col("attempt", "integer", "1"), None),
        (col("attempt", "integer", "'1'::integer"), None),
        (col("attempt", "integer", "0"), "with DEFAULT 0 (max_attempts would count from 0)"),
        (col("attempt", "integer", "2"), "with DEFAULT 2 (max_attempts would count from 2)"),
        (col("attempt", "integer"), None),  # the publish writes 1
        (col("attempt", "integer", "NULL::integer"), None),
    ],
)
def test_an_attempt_default_other_than_one_is_refused(
    found: FoundColumn, refused: str | None
) -> None:
    problem = PG.check_columns(spec_of(Job), [found])
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem


@pytest.mark.parametrize(
    ("dialect", "found", "fits"),
    [
        (PG, col("payload", "bytea"), True),
        (PG, col("payload", "text"), False),
        (PG, col("payload", "jsonb"), False),
        (MY, col("payload", "varbinary(255)"), True),
        (MY, col("payload", "binary(16)"), False),  # pads with zero bytes
        (MY, col("payload", "longtext"), False),
        (LITE, col("payload", "TEXT"), True),  # a BLOB stays a BLOB under every affinity
        (LITE, col("payload", "TEXT", strict=True), False),
        (LITE, col("payload", "ANY", strict=True), True),
    ],
)
def test_a_payload_holds_bytes(dialect: Dialect, found: FoundColumn, fits: bool) -> None:
    assert (dialect.check_columns(spec_of(Job), [found]) is None) is fits


@pytest.mark.parametrize(
    ("dialect", "found", "fits"),
    [
        (LITE, col("attempt", "INTEGER", "1"), True),
        (LITE, col("attempt", "NUMERIC", "1"), True),
        (LITE, col("attempt", "(none)", "1"), True),
        (LITE, col("attempt", "TEXT", "1"), False),  # an incremented count is stored as text
        (LITE, col("attempt", "REAL", "1"), False),  # and as a float here
        (LITE, col("attempt", "INT", "1", strict=True), True),
        (LITE, col("attempt", "ANY", "1", strict=True), True),
        (MY, col("attempt", "bigint(20) unsigned", "1"), True),
        (MY, col("attempt", "decimal(10,0)", "1"), False),
        (PG, col("attempt", "bigint", "1"), True),
        (PG, col("attempt", "real", "1"), False),
    ],
)
def test_an_attempt_is_an_integer(dialect: Dialect, found: FoundColumn, fits: bool) -> None:
    assert (dialect.check_columns(spec_of(Job), [found]) is None) is fits


def test_a_generated_id_read_as_an_int_is_an_integer_the_database_fills() -> None:
    spec = spec_of(Job)
    assert PG.check_columns(spec, [col("id", "uuid", "gen_random_uuid()")]) is not None
    assert MY.check_columns(spec, [col("id", "char(36)", generated=False)]) is not None
    # SQLite: the rowid, or a default; another INT PRIMARY KEY takes NULL.
    assert LITE.check_columns(spec, [col("id", "INT")]) is not None
    assert LITE.check_columns(spec, [col("id", "INT", "(abs(random()))")]) is None
    assert LITE.check_columns(spec, [col("id", "INTEGER", generated=True)]) is None


class UuidJob(Inbox[Lease], table="jobs"):
    id: Annotated[str, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


def test_a_generated_id_read_as_text_takes_any_type() -> None:
    assert PG.check_columns(spec_of(UuidJob), [col("id", "uuid", "gen_random_uuid()")]) is None


def test_a_column_updated_by_the_server_is_refused_on_mysql() -> None:
    found = [col("processed_at", "timestamp(6)", updates_itself=True)]
    problem = MY.check_columns(spec_of(Job), found)
    assert problem == (
        "the ProcessedAt column of jobs (Job) is written by trinbox alone, found column "
        "'processed_at' ON UPDATE CURRENT_TIMESTAMP (every change to the row would rewrite it); "
        "change its type: ALTER TABLE `jobs` MODIFY `processed_at` TIMESTAMP(6) NULL"
    )


@pytest.mark.parametrize(
    ("dialect", "code", "missing"),
    [
        (PG, "42P01", "table"),
        (PG, "3F000", "table"),
        (PG, "42703", "column"),
        (PG, "42883", None),
        (MY, "1146", "table"),
        (MY, "1054", "column"),
        (MY, "1064", None),
    ],
)
def test_a_prepare_failure_says_what_is_missing(
    dialect: Dialect, code: str, missing: str | None
) -> None:
    assert dialect.missing(code, "") == missing


@pytest.mark.parametrize(
    ("message", "missing"),
    [
        ("no such table: jobs (while running: ...)", "table"),
        ("unknown database app (while running: ...)", "table"),
        ("no such column: x (while running: ...)", "column"),
        ("near 'x': syntax error (while running: ...)", None),
    ],
)
def test_sqlite_says_what_is_missing_in_its_message(message: str, missing: str | None) -> None:
    assert LITE.missing("SQLITE_ERROR", message) == missing


class Posting(Inbox[Lease], table="postings"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    locked_until: Annotated[datetime | None, LockedUntil()]


@pytest.mark.parametrize(
    ("dialect", "fix"),
    [
        (PG, 'allow NULL: ALTER TABLE "postings" ALTER COLUMN "dead_from" DROP NOT NULL'),
        (MY, "allow NULL: ALTER TABLE `postings` MODIFY `dead_from` VARCHAR(191) NULL"),
        (LITE, "declare `dead_from` without NOT NULL"),
    ],
    ids=["pg", "my", "lite"],
)
def test_an_origin_group_takes_null(dialect: Dialect, fix: str) -> None:
    # NULL until the row is a dead letter: the publish leaves it out, a redrive writes NULL.
    type_ = {"PostgreSQL": "text", "MySQL": "varchar(191)", "SQLite": "TEXT"}[dialect.name]
    assert dialect.check_columns(spec_of(Posting), [col("dead_from", type_)]) is None
    problem = dialect.check_columns(spec_of(Posting), [col("dead_from", type_, nullable=False)])
    assert problem is not None
    assert problem.startswith(
        "the OriginGroup column of postings (Posting) is NULL until the row moves into a dead "
        "letter group (the publish leaves it out, a redrive writes NULL), found column "
        f"'dead_from' NOT NULL; {fix}"
    )
