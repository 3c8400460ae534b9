"""Golden tests of the database clock's statements (trinbox/_dialects/_clock.py): on a dialect
made with ``database_clock=True`` the ``now`` and ``retry_at`` slots render as the server's
clock, the lease claims write the server's expiry and return it as their last column, and
the publish writes a left-out RetryAfter field as the server's now plus the delay. The host
clock's statements are the dialect golden tests' (test_dialect_*.py), unchanged.

Each expression was run by hand against PostgreSQL 15 and MariaDB 10.11 (in sessions of
another time zone too) and SQLite 3.40.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Annotated

import pytest

from trinbox import Id, Inbox, Lease, LockedUntil, Payload, RetryAfter
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import Dialect
from trinbox._dialects._statement import P, Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

from ._tables import EmailJob, LeasedEmail, LeasedPlain

PG = PostgresDialect(database_clock=True)
MY = MySqlDialect(database_clock=True)
LITE = SqliteDialect(database_clock=True)

PG_EXPIRY = "to_timestamp(ceil(extract(epoch FROM statement_timestamp()) + $3::integer))"
MY_EXPIRY = (
    "(UTC_TIMESTAMP(6) - INTERVAL MICROSECOND(UTC_TIMESTAMP(6)) MICROSECOND + INTERVAL "
    "(%s + (MICROSECOND(UTC_TIMESTAMP(6)) > 0)) SECOND)"
)
LITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def test_the_host_clock_binds_now_and_leaves_the_servers_clock_out() -> None:
    for host in (PostgresDialect(), MySqlDialect(), SqliteDialect()):
        for row in (LeasedEmail, LeasedPlain, EmailJob):
            if row is EmailJob and isinstance(host, SqliteDialect):
                continue  # no row locks on SQLite
            for st in build_plan(host, spec_of(row)).all():
                assert "statement_timestamp" not in st.sql
                assert "UTC_TIMESTAMP" not in st.sql
                assert "'now'" not in st.sql
                assert "__token" not in st.sql
                assert "lease_seconds" not in st.params and "delay" not in st.params


def test_a_postgresql_lease_claim_writes_and_returns_the_servers_expiry() -> None:
    (claim,) = build_plan(PG, spec_of(LeasedPlain)).claim
    assert claim == Statement(
        "claim",
        'WITH __claimed AS (SELECT "id", "attempt", "tenant_name", "locked_until", "payload" '
        'FROM "app"."plain_jobs" WHERE ("locked_until" IS NULL OR "locked_until" <= '
        'statement_timestamp()) ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED), '
        '__stamped AS (UPDATE "app"."plain_jobs" AS __row SET "locked_until" = '
        + PG_EXPIRY.replace("$3", "$2")
        + ', "attempt" = __row."attempt" + 1 FROM __claimed WHERE __row."id" = '
        '__claimed."id") SELECT *, '
        + PG_EXPIRY.replace("$3", "$2")
        + ' AS "__token" FROM __claimed ORDER BY "id"',
        ("limit", "lease_seconds"),
    )


def test_a_mysql_lease_claim_selects_the_servers_expiry_and_stamps_it() -> None:
    select, stamp = build_plan(MY, spec_of(LeasedEmail)).claim
    assert select == Statement(
        "claim",
        "SELECT `job_id`, `name`, `retry_after`, `attempt`, `locked_until`, `processed_at`, "
        f"`payload`, {MY_EXPIRY} AS `__token` FROM `email_jobs` WHERE `name` = %s AND "
        "`retry_after` <= UTC_TIMESTAMP(6) AND `processed_at` IS NULL AND (`locked_until` IS "
        "NULL OR `locked_until` <= UTC_TIMESTAMP(6)) ORDER BY `retry_after`, `job_id` LIMIT %s "
        "FOR UPDATE SKIP LOCKED",
        ("lease_seconds", "group", "limit"),
    )
    # The stamp binds the token the select read: one expiry for every row of the claim.
    assert stamp == Statement(
        "stamp",
        "UPDATE `email_jobs` SET `locked_until` = %s, `attempt` = `attempt` + 1 WHERE "
        "`job_id` = %s AND (`locked_until` IS NULL OR `locked_until` <= UTC_TIMESTAMP(6))",
        ("lease", "id"),
    )


def test_a_sqlite_lease_claim_returns_the_lease_it_stamped() -> None:
    (claim,) = build_plan(LITE, spec_of(LeasedPlain)).claim
    assert claim == Statement(
        "claim",
        "UPDATE `app`.`plain_jobs` SET `locked_until` = (strftime('%Y-%m-%d %H:%M:%S', "
        "'now', '+' || ? || ' seconds', '+0.999 seconds') || '.000000'), "
        "`attempt` = `attempt` + 1 WHERE "
        f"`id` IN (SELECT `id` FROM `app`.`plain_jobs` WHERE (`locked_until` IS NULL OR "
        f"`locked_until` <= {LITE_NOW}) ORDER BY `id` LIMIT ?) RETURNING `id`, `attempt` - 1 "
        "AS `attempt`, `tenant_name`, `locked_until`, `payload`, `locked_until` AS `__token`",
        ("lease_seconds", "limit"),
    )


@pytest.mark.parametrize(
    ("dialect", "ack", "retry_after"),
    [
        (
            PG,
            'UPDATE "email_jobs" SET "processed_at" = statement_timestamp() WHERE "job_id" = $1',
            'UPDATE "email_jobs" SET "retry_after" = (statement_timestamp() + $1::bigint * '
            'interval \'1 microsecond\'), "attempt" = "attempt" + 1 WHERE "job_id" = $2',
        ),
        (
            MY,
            "UPDATE `email_jobs` SET `processed_at` = UTC_TIMESTAMP(6) WHERE `job_id` = %s",
            "UPDATE `email_jobs` SET `retry_after` = (UTC_TIMESTAMP(6) + INTERVAL %s "
            "MICROSECOND), `attempt` = `attempt` + 1 WHERE `job_id` = %s",
        ),
    ],
    ids=["postgres", "mysql"],
)
def test_row_lock_settlements_stamp_the_servers_time(
    dialect: Dialect, ack: str, retry_after: str
) -> None:
    st = build_plan(dialect, spec_of(EmailJob))
    assert st.ack == Statement("ack", ack, ("id",))
    assert st.retry_after == Statement("retry_after", retry_after, ("delay", "id"))
    # The claim's due check reads the server's now too.
    assert "<= statement_timestamp()" in st.claim[0].sql or "<= UTC_TIMESTAMP(6)" in (
        st.claim[0].sql
    )
    assert "now" not in st.claim[0].params


class Timed(Inbox[Lease], table="timed"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class DelayNamed(Inbox[Lease], table="timed"):
    """A column named as the delay's slot would be: the slot takes another name."""

    id: Annotated[int, Id(generated=True)]
    delay_us: int
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]


def test_the_publish_writes_a_left_out_due_time_as_the_servers_now_plus_the_delay() -> None:
    spec = spec_of(Timed)
    assert PG.insert(spec) == Statement(
        "insert",
        'INSERT INTO "timed" ("retry_after", "locked_until", "payload") VALUES (COALESCE($1, '
        "(statement_timestamp() + $2::bigint * interval '1 microsecond')), $3, $4)",
        ("retry_after", "delay_us", "locked_until", "payload"),
    )
    assert MY.insert(spec) == Statement(
        "insert",
        "INSERT INTO `timed` (`retry_after`, `locked_until`, `payload`) VALUES (COALESCE(%s, "
        "(UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND)), %s, %s)",
        ("retry_after", "delay_us", "locked_until", "payload"),
    )
    assert LITE.insert(spec).params == ("retry_after", "delay_us", "locked_until", "payload")
    assert PG.insert(spec_of(DelayNamed)).params == (
        "retry_after",
        "delay_us_2",
        "locked_until",
        "delay_us",
    )
    # A generated RetryAfter is the column's default: the insert leaves it out either way.
    assert PG.insert(spec_of(LeasedEmail)) == PostgresDialect().insert(spec_of(LeasedEmail))


def test_a_keeper_round_writes_the_servers_expiry_and_returns_it() -> None:
    spec = spec_of(LeasedEmail)
    # PostgreSQL and SQLite: one statement writes it, and returns each row moved with it.
    assert build_plan(PG, spec).extend == (
        Statement(
            "extend",
            'UPDATE "email_jobs" SET "locked_until" = '
            + PG_EXPIRY.replace("$3", "$1")
            + ' WHERE "job_id" = ANY($2) AND "locked_until" = ANY($3) AND ("job_id", '
            '"locked_until") IN (SELECT * FROM unnest($2, $3)) RETURNING "job_id", '
            '"locked_until" AS "__token"',
            ("lease_seconds", "ids", "tokens"),
        ),
    )
    (lite,) = build_plan(LITE, spec).extend
    assert lite.sql.startswith("UPDATE `email_jobs` SET `locked_until` = (strftime(")
    assert lite.sql.endswith(" RETURNING `job_id`, `locked_until` AS `__token`")
    assert lite.params == ("lease_seconds", "ids", "ids", "tokens")
    # MySQL: the locking select reads it, and the update writes what the select read.
    assert MY.lease_extend(spec, 2) == (
        Statement(
            "extend",
            f"SELECT `job_id`, {MY_EXPIRY} AS `__token` FROM `email_jobs` WHERE (`job_id`, "
            "`locked_until`) IN ((%s, %s), (%s, %s)) FOR UPDATE",
            ("lease_seconds", "id0", "token0", "id1", "token1"),
        ),
        Statement(
            "extend",
            "UPDATE `email_jobs` SET `locked_until` = %s WHERE (`job_id`, `locked_until`) IN "
            "((%s, %s), (%s, %s))",
            ("lease", "id0", "token0", "id1", "token1"),
        ),
    )


def test_a_statement_without_now_is_left_as_it_is() -> None:
    sql = "SELECT " + P("id")
    assert PG.on_server_clock(sql) is sql
    assert PostgresDialect().on_server_clock("UPDATE t SET " + P("now")) == (
        "UPDATE t SET " + P("now")
    )


# -- SQLite's expressions, run ----------------------------------------------------------------


def test_sqlites_expressions_write_the_text_trinbox_stores() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        expiry = LITE.render("clock", "SELECT " + LITE.lease_at())
        before = datetime.now(UTC).replace(tzinfo=None)
        (token,) = conn.execute(expiry.sql, (30,)).fetchone()
        (now,) = conn.execute(f"SELECT {LITE_NOW}").fetchone()
        due_sql = build_plan(LITE, spec_of(LeasedEmail)).retry_after
        assert due_sql is not None
        (due,) = conn.execute(
            "SELECT (strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000000.0) || "
            "' seconds') || '000')",
            (1_500_000,),
        ).fetchone()
    finally:
        conn.close()
    for text in (token, now, due):
        # "YYYY-MM-DD HH:MM:SS.ffffff", as trinbox's driver writes a datetime.
        assert datetime.fromisoformat(text).isoformat(" ", "microseconds") == text
    assert token.endswith(".000000")
    expires = datetime.fromisoformat(token)
    assert before + timedelta(seconds=30) - timedelta(seconds=1) < expires
    assert expires <= before + timedelta(seconds=32)
    assert datetime.fromisoformat(due) - datetime.fromisoformat(now) >= timedelta(seconds=1.4)
    assert "(? / 1000000.0)" in due_sql.sql
