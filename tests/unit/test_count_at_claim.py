"""The row lock form's count at claim (``InboxQueue.count_attempt_at_claim()``) as the
PostgreSQL and MySQL dialects render it: the count, the relock reading the attempt as before
the count, the guard, and a retry that counts nothing more."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from trinbox import Attempt, Id, Inbox, Payload, RetryAfter, RowLock
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import DeadLetter
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect


class Job(Inbox[RowLock], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


DEAD = DeadLetter(table="jobs_dead")


def test_postgres_counts_at_claim_and_retries_by_rollback() -> None:
    plain = build_plan(PostgresDialect(), spec_of(Job), DEAD)
    counted = build_plan(PostgresDialect(), spec_of(Job), DEAD, count_at_claim=True)
    assert plain.retry is not None and '"attempt" + 1' in plain.retry.sql
    assert counted.retry is None
    assert counted.claim == plain.claim
    count, relock = counted.take
    assert count.sql == 'UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1'
    assert relock.sql == (
        'SELECT "id", ("attempt" - 1) AS "attempt", "payload" FROM "jobs" WHERE "id" = $1 '
        "FOR UPDATE SKIP LOCKED"
    )
    assert counted.lock is not None and counted.unlock is not None
    assert counted.lock.sql == ("SELECT 1 FROM pg_advisory_lock(hashtextextended($1, 0))")
    assert counted.unlock.sql == "SELECT pg_advisory_unlock(hashtextextended($1, 0))"


def test_mysql_guards_the_count_with_a_named_lock_of_the_database() -> None:
    counted = build_plan(MySqlDialect(), spec_of(Job), DEAD, count_at_claim=True)
    assert counted.retry is None
    count, relock = counted.take
    assert count.sql == "UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s"
    assert relock.sql.endswith("WHERE `id` = %s FOR UPDATE SKIP LOCKED")
    assert counted.lock is not None and counted.unlock is not None
    assert counted.lock.sql == (
        # A year, not -1: MariaDB refuses a negative timeout (NULL, no lock taken).
        "SELECT GET_LOCK(SHA2(CONCAT_WS('.', DATABASE(), %s), 256), 31536000)"
    )
    assert counted.unlock.sql == "SELECT RELEASE_LOCK(SHA2(CONCAT_WS('.', DATABASE(), %s), 256))"


class Due(Inbox[RowLock], table="due"):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


def test_the_relock_reads_the_database_clock_when_the_broker_does() -> None:
    _, relock = build_plan(
        PostgresDialect(database_clock=True), spec_of(Due), DEAD, count_at_claim=True
    ).take
    assert relock.sql.endswith(
        '"id" = $1 AND "retry_after" <= statement_timestamp() FOR UPDATE SKIP LOCKED'
    )
    _, relock = build_plan(
        MySqlDialect(database_clock=True), spec_of(Due), DEAD, count_at_claim=True
    ).take
    assert relock.sql.endswith(
        "`id` = %s AND `retry_after` <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED"
    )
    _, relock = build_plan(PostgresDialect(), spec_of(Due), DEAD, count_at_claim=True).take
    assert relock.params == ("id", "now")
