"""Golden tests of the statements behind ``trinbox inspect`` and ``trinbox dead-letters``
(trinbox/_dialects/_inspect.py): the exact text and parameter order per dialect. Each was
also run on the three databases (tests/integration/cli)."""

from __future__ import annotations

from trinbox._declare._inbox import spec_of
from trinbox._dialects import _inspect as sql
from trinbox._dialects._base import DeadLetter
from trinbox._dialects._statement import Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

from ._tables import DEAD_EMAILS, DEAD_PLAIN, EmailJob, LeasedEmail, LeasedPlain, OddNames, PlainJob

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()

PG_FREE = '("locked_until" IS NULL OR "locked_until" <= statement_timestamp())'
LITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def test_depth_of_a_lease_table_is_one_grouped_statement_in_the_database_clock() -> None:
    statement, columns = sql.depth(PG, spec_of(LeasedEmail), 2)
    due = f'"retry_after" <= statement_timestamp() AND {PG_FREE}'
    assert statement == Statement(
        "depth",
        'SELECT "name", COUNT(*), '
        f"COALESCE(SUM(CASE WHEN {due} THEN 1 ELSE 0 END), 0), "
        f'COALESCE(SUM(CASE WHEN "retry_after" > statement_timestamp() AND {PG_FREE} '
        "THEN 1 ELSE 0 END), 0), "
        'COALESCE(SUM(CASE WHEN "locked_until" > statement_timestamp() THEN 1 ELSE 0 END), 0), '
        f'EXTRACT(EPOCH FROM statement_timestamp() - MIN(CASE WHEN {due} THEN "retry_after" END)) '
        'FROM "email_jobs" WHERE "name" IN ($1, $2) AND "processed_at" IS NULL GROUP BY "name"',
        ("g0", "g1"),
    )
    assert columns == sql.DepthColumns(grouped=True, in_work=True)


def test_depth_on_mysql_and_sqlite_reads_their_clocks() -> None:
    my = sql.depth(MY, spec_of(LeasedEmail), 1)[0].sql
    assert "`retry_after` <= UTC_TIMESTAMP(6) AND (`locked_until` IS NULL OR" in my
    assert my.endswith(
        "TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN `retry_after` <= UTC_TIMESTAMP(6) AND "
        "(`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6)) THEN `retry_after` "
        "END), UTC_TIMESTAMP(6)) / 1000000 FROM `email_jobs` WHERE `name` IN (%s) AND "
        "`processed_at` IS NULL GROUP BY `name`"
    )
    lite = sql.depth(LITE, spec_of(LeasedEmail), 1)[0].sql
    assert f"`retry_after` <= {LITE_NOW} AND (`locked_until` IS NULL OR" in lite
    assert "(julianday('now') - julianday(MIN(CASE WHEN `retry_after` <= " in lite
    assert lite.endswith(
        " * 86400.0 FROM `email_jobs` WHERE `name` IN (?) AND `processed_at` IS NULL "
        "GROUP BY `name`"
    )


def test_depth_without_a_lease_or_a_time() -> None:
    # Row lock, grouped, a RetryAfter: nothing tells the rows in work.
    statement, columns = sql.depth(PG, spec_of(EmailJob), 1)
    assert statement.sql == (
        'SELECT "name", COUNT(*), '
        'COALESCE(SUM(CASE WHEN "retry_after" <= statement_timestamp() THEN 1 ELSE 0 END), 0), '
        'COALESCE(SUM(CASE WHEN "retry_after" > statement_timestamp() THEN 1 ELSE 0 END), 0), '
        "EXTRACT(EPOCH FROM statement_timestamp() - "
        'MIN(CASE WHEN "retry_after" <= statement_timestamp() THEN "retry_after" END)) '
        'FROM "email_jobs" WHERE "name" IN ($1) AND "processed_at" IS NULL GROUP BY "name"'
    )
    assert columns == sql.DepthColumns(grouped=True, in_work=False)
    # No group, no time, no lease: one row, every row due.
    statement, columns = sql.depth(PG, spec_of(PlainJob), 0)
    assert statement == Statement("depth", 'SELECT COUNT(*), COUNT(*), 0, NULL FROM "plain_jobs"')
    assert columns == sql.DepthColumns(grouped=False, in_work=False)


def test_dead_letters_of_a_group_and_of_a_table() -> None:
    email, plain = spec_of(LeasedEmail), spec_of(LeasedPlain)
    assert sql.count_rows(PG, email, DEAD_EMAILS) == Statement(
        "dead_count",
        'SELECT COUNT(*) FROM "email_jobs" WHERE "name" = $1 AND "processed_at" IS NULL',
        ("dest",),
    )
    assert sql.count_rows(MY, plain, DEAD_PLAIN) == Statement(
        "dead_count", "SELECT COUNT(*) FROM `plain_jobs_dead`"
    )
    assert sql.list_dead(LITE, plain, DEAD_PLAIN) == Statement(
        "dead_list",
        "SELECT `id`, `attempt`, `tenant_name`, `locked_until`, `payload` FROM `plain_jobs_dead` "
        "ORDER BY `id` LIMIT ?",
        ("limit",),
    )
    assert sql.dead_ids(PG, email, DEAD_EMAILS, 2) == Statement(
        "dead_ids",
        'SELECT "job_id" FROM "email_jobs" WHERE "name" = $1 AND "processed_at" IS NULL AND '
        '"job_id" IN ($2, $3) ORDER BY "job_id" FOR UPDATE',
        ("dest", "i0", "i1"),
    )
    # SQLite locks the whole database at BEGIN IMMEDIATE: no row locks to take.
    assert sql.dead_ids(LITE, plain, DEAD_PLAIN, None).sql == (
        "SELECT `id` FROM `plain_jobs_dead` ORDER BY `id`"
    )


def test_redrive_of_a_group_is_one_update_making_first_deliveries_due_statement_timestamp() -> None:
    assert sql.redrive(MY, spec_of(LeasedEmail), DEAD_EMAILS, 2) == (
        Statement(
            "redrive",
            "UPDATE `email_jobs` SET `name` = %s, `retry_after` = UTC_TIMESTAMP(6), "
            "`attempt` = 1, `locked_until` = NULL, `processed_at` = NULL WHERE `name` = %s AND "
            "`processed_at` IS NULL AND `job_id` IN (%s, %s)",
            ("group", "dest", "i0", "i1"),
        ),
    )
    lite = sql.redrive(LITE, spec_of(LeasedEmail), DEAD_EMAILS, 1)[0].sql
    assert f"`retry_after` = {LITE_NOW}, `attempt` = 1" in lite


def test_redrive_of_a_table_copies_then_deletes() -> None:
    assert sql.redrive(PG, spec_of(LeasedPlain), DEAD_PLAIN, 2) == (
        Statement(
            "redrive",
            'INSERT INTO "app"."plain_jobs" ("id", "attempt", "tenant_name", "locked_until", '
            '"payload") OVERRIDING SYSTEM VALUE SELECT "id", 1, "tenant_name", NULL, "payload" '
            'FROM "plain_jobs_dead" WHERE "id" IN ($1, $2)',
            ("i0", "i1"),
        ),
        Statement("redrive", 'DELETE FROM "plain_jobs_dead" WHERE "id" IN ($1, $2)', ("i0", "i1")),
    )
    assert sql.bind_ids([5, 6]) == {"i0": 5, "i1": 6}


def test_names_stay_names() -> None:
    # Quotes doubled, and on MySQL every % of the text written %% (PyMySQL interpolates).
    dead = DeadLetter(table="odd%dead`")
    assert sql.redrive(MY, spec_of(OddNames), dead, 1) == (
        Statement(
            "redrive",
            'INSERT INTO `odd"jobs``%%` (`i"d```, `payload`) SELECT `i"d```, `payload` FROM '
            '`odd%%dead``` WHERE `i"d``` IN (%s)',
            ("i0",),
        ),
        Statement("redrive", 'DELETE FROM `odd%%dead``` WHERE `i"d``` IN (%s)', ("i0",)),
    )
    assert sql.depth(PG, spec_of(OddNames), 0)[0].sql == (
        'SELECT COUNT(*), COUNT(*), 0, NULL FROM "odd""jobs`%"'
    )


def test_redrive_begins_where_it_can_write() -> None:
    assert sql.redrive_begin(LITE) == "BEGIN IMMEDIATE"
    assert sql.redrive_begin(PG) == "BEGIN"
    assert sql.redrive_begin(MY) == "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"


def test_deliveries_made_by_form() -> None:
    # The row lock form counts at the failed settlement; the others at the claim, one ahead.
    assert sql.deliveries_made(spec_of(EmailJob), 3) == 3
    assert sql.deliveries_made(spec_of(LeasedEmail), 4) == 3
    assert sql.deliveries_made(spec_of(LeasedEmail), 0) == 0
