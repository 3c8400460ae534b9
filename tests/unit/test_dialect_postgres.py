"""Golden tests of the PostgreSQL dialect: the exact SQL text and parameter order of every statement
it renders, per form (docs/reference.md#claim-forms, docs/reference.md#support-matrix). No database
is needed here; each shape was also run once by hand against PostgreSQL 15 in a scratch database.

``$n`` numbers parameters by first appearance and a repeated name reuses its number, so
``params`` names each value once; ``Statement.bind`` lays values out in that order.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from trinbox._declare._inbox import spec_of
from trinbox._declare._markers import (
    Default,
    Deferred,
    Immediate,
    Isolation,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    Serializable,
)
from trinbox._dialects._base import DeadLetter
from trinbox._dialects._statement import Statement
from trinbox._dialects.plans import Plan, build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox.errors import DeclarationError, IdentifierTooLong, UnsupportedIsolation

from ._tables import (
    DEAD_APP_PLAIN,
    DEAD_EMAILS,
    DEAD_KEYED,
    DEAD_PLAIN,
    EmailJob,
    KeyedJob,
    LeasedEmail,
    LeasedPlain,
    OddNames,
    PlainJob,
    TenantJob,
    Ticket,
)

PG = PostgresDialect()
PG_BEGIN = Statement("begin", "BEGIN", ())
"""The claim's and the plain transaction's begin."""


def by_event(found: Plan) -> Plan:
    """``found`` without the lease form's release and keeper rounds and the snooze, which the
    golden plans check (test_plans_golden.py)."""
    return replace(found, release=None, rounds=None, snooze=None)


# -- row lock ---------------------------------------------------------------------------------


def test_row_lock_claims_due_rows_of_its_group_and_counts_attempts_when_it_settles() -> None:
    assert by_event(build_plan(PG, spec_of(EmailJob), DEAD_EMAILS)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "claim",
                'SELECT "job_id", "name", "customer", "retry_after", "attempt", '
                '"processed_at", "payload" FROM "email_jobs" WHERE "name" = $1 AND '
                '"retry_after" <= $2 AND "processed_at" IS NULL ORDER BY '
                '"retry_after", "job_id" LIMIT $3 FOR UPDATE SKIP LOCKED',
                ("group", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            'UPDATE "email_jobs" SET "processed_at" = $1 WHERE "job_id" = $2',
            ("now", "id"),
        ),
        retry=Statement(
            "retry",
            'UPDATE "email_jobs" SET "attempt" = "attempt" + 1 WHERE "job_id" = $1',
            ("id",),
        ),
        retry_after=Statement(
            "retry_after",
            'UPDATE "email_jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1 '
            'WHERE "job_id" = $2',
            ("retry_at", "id"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                'UPDATE "email_jobs" SET "name" = $1 WHERE "job_id" = $2',
                ("dest", "id"),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "email_jobs" ("name", "payload", "customer") VALUES ($1, $2, $3)',
            ("name", "payload", "customer"),
        ),
        begin=Statement("begin", "BEGIN", ()),
    )


def test_row_lock_without_group_moves_a_dead_letter_in_one_statement() -> None:
    assert by_event(build_plan(PG, spec_of(PlainJob), DEAD_PLAIN)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "claim",
                'SELECT "id", "attempt", "tenant" FROM "plain_jobs" ORDER BY "id" '
                "LIMIT $1 FOR UPDATE SKIP LOCKED",
                ("limit",),
            ),
        ),
        ack=Statement("ack", 'DELETE FROM "plain_jobs" WHERE "id" = $1', ("id",)),
        retry=Statement(
            "retry",
            'UPDATE "plain_jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1',
            ("id",),
        ),
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                'WITH moved AS (DELETE FROM "plain_jobs" WHERE "id" = $1 RETURNING '
                '"id", "attempt", "tenant") INSERT INTO "plain_jobs_dead" ("id", '
                '"attempt", "tenant") SELECT "id", "attempt", "tenant" FROM moved',
                ("id",),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "plain_jobs" ("id", "tenant") VALUES ($1, $2)',
            ("id", "tenant"),
        ),
        begin=Statement("begin", "BEGIN", ()),
    )


# -- lease ------------------------------------------------------------------------------------


def test_lease_claim_is_one_statement_returning_the_rows_as_before_the_stamp() -> None:
    assert by_event(build_plan(PG, spec_of(LeasedEmail), DEAD_EMAILS)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "claim",
                'WITH __claimed AS (SELECT "job_id", "name", "retry_after", '
                '"attempt", "locked_until", "processed_at", "payload" FROM '
                '"email_jobs" WHERE "name" = $1 AND "retry_after" <= $2 AND '
                '"processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" '
                '<= $2) ORDER BY "retry_after", "job_id" LIMIT $3 FOR UPDATE SKIP '
                'LOCKED), __stamped AS (UPDATE "email_jobs" AS __row SET '
                '"locked_until" = $4, "attempt" = __row."attempt" + 1 FROM __claimed '
                'WHERE __row."job_id" = __claimed."job_id") SELECT * FROM __claimed '
                'ORDER BY "retry_after", "job_id"',
                ("group", "now", "limit", "lease"),
            ),
        ),
        ack=Statement(
            "ack",
            'UPDATE "email_jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE '
            '"job_id" = $2 AND "locked_until" = $3',
            ("now", "id", "token"),
        ),
        retry=Statement(
            "retry",
            'UPDATE "email_jobs" SET "locked_until" = NULL WHERE "job_id" = $1 AND '
            '"locked_until" = $2',
            ("id", "token"),
        ),
        retry_after=Statement(
            "retry_after",
            'UPDATE "email_jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE '
            '"job_id" = $2 AND "locked_until" = $3',
            ("retry_at", "id", "token"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                'UPDATE "email_jobs" SET "name" = $1, "locked_until" = NULL WHERE '
                '"job_id" = $2 AND "locked_until" = $3',
                ("dest", "id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "email_jobs" ("name", "payload") VALUES ($1, $2)',
            ("name", "payload"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                'UPDATE "email_jobs" SET "locked_until" = $1 WHERE "job_id" = ANY($2) AND '
                '"locked_until" = ANY($3) AND ("job_id", "locked_until") IN (SELECT * FROM '
                'unnest($2, $3)) RETURNING "job_id"',
                ("lease", "ids", "tokens"),
            ),
        ),
        # A batch's rows settled alike: one statement, the rows it settled returned.
        batch=(
            Statement(
                "ack",
                'UPDATE "email_jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE '
                '"job_id" = ANY($2) AND "locked_until" = $3 RETURNING "job_id"',
                ("now", "ids", "token"),
            ),
            Statement(
                "retry",
                'UPDATE "email_jobs" SET "locked_until" = NULL WHERE "job_id" = ANY($1) AND '
                '"locked_until" = $2 RETURNING "job_id"',
                ("ids", "token"),
            ),
            Statement(
                "retry_after",
                'UPDATE "email_jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE '
                '"job_id" = ANY($2) AND "locked_until" = $3 RETURNING "job_id"',
                ("retry_at", "ids", "token"),
            ),
            # A snooze gives back the attempt the claim counted.
            Statement(
                "snooze",
                'UPDATE "email_jobs" SET "retry_after" = $1, "attempt" = "attempt" - 1, '
                '"locked_until" = NULL WHERE "job_id" = ANY($2) AND "locked_until" = $3 '
                'RETURNING "job_id"',
                ("retry_at", "ids", "token"),
            ),
        ),
    )


def test_lease_table_in_a_schema_moves_a_dead_letter_with_its_lease_cleared() -> None:
    assert by_event(build_plan(PG, spec_of(LeasedPlain), DEAD_APP_PLAIN)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "claim",
                'WITH __claimed AS (SELECT "id", "attempt", "tenant_name", '
                '"locked_until", "payload" FROM "app"."plain_jobs" WHERE '
                '("locked_until" IS NULL OR "locked_until" <= $1) ORDER BY "id" LIMIT '
                '$2 FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "app"."plain_jobs" '
                'AS __row SET "locked_until" = $3, "attempt" = __row."attempt" + 1 '
                'FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM '
                '__claimed ORDER BY "id"',
                ("now", "limit", "lease"),
            ),
        ),
        ack=Statement(
            "ack",
            'DELETE FROM "app"."plain_jobs" WHERE "id" = $1 AND "locked_until" = $2',
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            'UPDATE "app"."plain_jobs" SET "locked_until" = NULL WHERE "id" = $1 AND '
            '"locked_until" = $2',
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                'WITH moved AS (DELETE FROM "app"."plain_jobs" WHERE "id" = $1 AND '
                '"locked_until" = $2 RETURNING "id", "attempt", "tenant_name", '
                '"locked_until", "payload") INSERT INTO "app"."plain_jobs_dead" '
                '("id", "attempt", "tenant_name", "locked_until", "payload") SELECT '
                '"id", "attempt", "tenant_name", NULL, "payload" FROM moved',
                ("id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "app"."plain_jobs" ("locked_until", "payload", '
            '"tenant_name") VALUES ($1, $2, $3)',
            ("locked_until", "payload", "tenant_name"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                'UPDATE "app"."plain_jobs" SET "locked_until" = $1 WHERE "id" = ANY($2) AND '
                '"locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM '
                'unnest($2, $3)) RETURNING "id"',
                ("lease", "ids", "tokens"),
            ),
        ),
        batch=(
            Statement(
                "ack",
                'DELETE FROM "app"."plain_jobs" WHERE "id" = ANY($1) AND "locked_until" = $2 '
                'RETURNING "id"',
                ("ids", "token"),
            ),
            Statement(
                "retry",
                'UPDATE "app"."plain_jobs" SET "locked_until" = NULL WHERE "id" = ANY($1) AND '
                '"locked_until" = $2 RETURNING "id"',
                ("ids", "token"),
            ),
        ),
    )


def test_lease_table_without_attempt_stamps_the_lease_alone_and_inserts_defaults() -> None:
    assert by_event(build_plan(PG, spec_of(Ticket))) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "claim",
                'WITH __claimed AS (SELECT "id", "locked_until" FROM "tickets" WHERE '
                '("locked_until" IS NULL OR "locked_until" <= $1) ORDER BY "id" LIMIT '
                '$2 FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "tickets" AS __row '
                'SET "locked_until" = $3 FROM __claimed WHERE __row."id" = '
                '__claimed."id") SELECT * FROM __claimed ORDER BY "id"',
                ("now", "limit", "lease"),
            ),
        ),
        ack=Statement(
            "ack",
            'DELETE FROM "tickets" WHERE "id" = $1 AND "locked_until" = $2',
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            'UPDATE "tickets" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2',
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(),
        insert=Statement("insert", 'INSERT INTO "tickets" DEFAULT VALUES', ()),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                'UPDATE "tickets" SET "locked_until" = $1 WHERE "id" = ANY($2) AND '
                '"locked_until" = ANY($3) AND ("id", "locked_until") IN (SELECT * FROM '
                'unnest($2, $3)) RETURNING "id"',
                ("lease", "ids", "tokens"),
            ),
        ),
        batch=(
            Statement(
                "ack",
                'DELETE FROM "tickets" WHERE "id" = ANY($1) AND "locked_until" = $2 RETURNING "id"',
                ("ids", "token"),
            ),
            Statement(
                "retry",
                'UPDATE "tickets" SET "locked_until" = NULL WHERE "id" = ANY($1) AND '
                '"locked_until" = $2 RETURNING "id"',
                ("ids", "token"),
            ),
        ),
    )


# -- advisory ---------------------------------------------------------------------------------


def test_advisory_candidates_probe_each_key_and_the_take_counts_the_attempt() -> None:
    assert by_event(build_plan(PG, spec_of(TenantJob), DEAD_EMAILS)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "candidates",
                """SELECT "id", "__lock" FROM (SELECT "id", concat('tenant_jobs-', """
                """COALESCE("tenant"::text, '')) AS "__lock" FROM "tenant_jobs" WHERE """
                '"name" = $1 AND "retry_after" <= $2 AND "processed_at" IS NULL ORDER '
                'BY "retry_after", "id" OFFSET 0) AS __candidates WHERE '
                'pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) '
                "LIMIT $3",
                ("group", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            'UPDATE "tenant_jobs" SET "processed_at" = $1 WHERE "id" = $2',
            ("now", "id"),
        ),
        retry=None,
        retry_after=Statement(
            "retry_after",
            'UPDATE "tenant_jobs" SET "retry_after" = $1 WHERE "id" = $2',
            ("retry_at", "id"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                'UPDATE "tenant_jobs" SET "name" = $1 WHERE "id" = $2',
                ("dest", "id"),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "tenant_jobs" ("name", "payload", "tenant") VALUES ($1, $2, $3)',
            ("name", "payload", "tenant"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                'UPDATE "tenant_jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 '
                'AND "name" = $2 AND "retry_after" <= $3 AND "processed_at" IS NULL '
                'RETURNING "id", "name", "tenant", "retry_after", ("attempt" - 1) AS '
                '"attempt", "processed_at", "payload"',
                ("id", "group", "now"),
            ),
        ),
        lock=Statement(
            "lock",
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
        unlock=Statement(
            "unlock",
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
    )


def test_advisory_table_without_attempt_takes_by_reading_the_row() -> None:
    assert by_event(build_plan(PG, spec_of(KeyedJob), DEAD_KEYED)) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "candidates",
                'SELECT "id", "__lock" FROM (SELECT "id", concat(COALESCE("id"::text, '
                '\'\')) AS "__lock" FROM "app"."keyed_jobs" ORDER BY "id" OFFSET 0) AS '
                "__candidates WHERE "
                'pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) '
                "LIMIT $1",
                ("limit",),
            ),
        ),
        ack=Statement("ack", 'DELETE FROM "app"."keyed_jobs" WHERE "id" = $1', ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                'WITH moved AS (DELETE FROM "app"."keyed_jobs" WHERE "id" = $1 '
                'RETURNING "id", "payload") INSERT INTO "keyed_jobs_dead" ("id", '
                '"payload") SELECT "id", "payload" FROM moved',
                ("id",),
            ),
        ),
        insert=Statement(
            "insert",
            'INSERT INTO "app"."keyed_jobs" ("payload") VALUES ($1)',
            ("payload",),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                'SELECT "id", "payload" FROM "app"."keyed_jobs" WHERE "id" = $1',
                ("id",),
            ),
        ),
        lock=Statement(
            "lock",
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
        unlock=Statement(
            "unlock",
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
    )


# -- quoting and placeholders -----------------------------------------------------------------


def test_a_quote_in_a_name_or_a_key_literal_is_doubled() -> None:
    assert PG.quoted('odd"jobs`') == '"odd""jobs`"'
    assert PG.literal("it's") == "'it''s'"
    # A backslash stays as it is (standard_conforming_strings); '%' means nothing to asyncpg.
    assert by_event(build_plan(PG, spec_of(OddNames))) == Plan(
        claim_begin=PG_BEGIN,
        plain_begin=PG_BEGIN,
        claim=(
            Statement(
                "candidates",
                r"""SELECT "i""d`", "__lock" FROM (SELECT "i""d`", concat('it''s 100%\', """
                """COALESCE("i""d`"::text, '')) AS "__lock" FROM "odd""jobs`%" ORDER BY """
                '"i""d`" OFFSET 0) AS __candidates WHERE '
                'pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) '
                "LIMIT $1",
                ("limit",),
            ),
        ),
        ack=Statement("ack", 'DELETE FROM "odd""jobs`%" WHERE "i""d`" = $1', ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(),
        insert=Statement(
            "insert",
            'INSERT INTO "odd""jobs`%" ("payload") VALUES ($1)',
            ("payload",),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                'SELECT "i""d`", "payload" FROM "odd""jobs`%" WHERE "i""d`" = $1',
                ("id",),
            ),
        ),
        lock=Statement(
            "lock",
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
        unlock=Statement(
            "unlock",
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))::int::bigint",
            ("key",),
        ),
    )


def test_a_repeated_parameter_reuses_its_number_and_binds_once() -> None:
    claim = build_plan(PG, spec_of(LeasedEmail)).claim[0]
    assert claim.sql.count("$2") == 2
    assert "$5" not in claim.sql
    now = datetime(2030, 1, 1, tzinfo=UTC)
    lease = datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC)
    values = {"lease": lease, "limit": 4, "now": now, "group": "emails"}
    assert claim.bind(values) == ("emails", now, 4, lease)


# -- isolation levels ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isolation", "sql"),
    [
        (Default, "BEGIN"),
        (ReadCommitted, "BEGIN ISOLATION LEVEL READ COMMITTED"),
        (RepeatableRead, "BEGIN ISOLATION LEVEL REPEATABLE READ"),
        (Serializable, "BEGIN ISOLATION LEVEL SERIALIZABLE"),
    ],
)
def test_begin_names_the_declared_isolation_level(isolation: type[Isolation], sql: str) -> None:
    for row in (EmailJob, LeasedEmail, TenantJob):
        spec = replace(spec_of(row), isolation=isolation)
        assert build_plan(PG, spec).begin == Statement("begin", sql, ())


def test_read_uncommitted_is_refused() -> None:
    spec = replace(spec_of(EmailJob), isolation=ReadUncommitted)
    with pytest.raises(
        UnsupportedIsolation,
        match=(
            r"^email_jobs \(EmailJob\): PostgreSQL opens no transaction at ReadUncommitted "
            r"\(it opens Default, ReadCommitted, RepeatableRead, Serializable\); PostgreSQL "
            r"runs READ UNCOMMITTED as READ COMMITTED; declare ReadCommitted \(or leave the "
            r"isolation level out\)$"
        ),
    ):
        build_plan(PG, spec)


@pytest.mark.parametrize("mode", [Deferred, Immediate])
def test_a_sqlite_mode_is_refused(mode: type[Isolation]) -> None:
    spec = replace(spec_of(LeasedEmail), isolation=mode)
    with pytest.raises(
        UnsupportedIsolation,
        match=(
            rf"^email_jobs \(LeasedEmail\): PostgreSQL opens no transaction at {mode.__name__} "
            r"\(it opens Default, ReadCommitted, RepeatableRead, Serializable\); declare one "
            r"of those as the table's isolation level$"
        ),
    ):
        build_plan(PG, spec)


# -- identifiers ------------------------------------------------------------------------------

# 32 characters of two bytes each: 64 bytes, one past the limit.
WIDE = "é" * 32


def test_an_identifier_of_63_bytes_fits() -> None:
    fits = "é" * 31 + "e"
    ticket = spec_of(Ticket)
    build_plan(PG, replace(ticket, table=fits, schema=fits), DeadLetter(table=fits, schema=fits))


@pytest.mark.parametrize(
    ("where", "label"),
    [
        ("table", WIDE),
        ("schema", f"{WIDE}.tickets"),
        ("column", "tickets"),
        ("dead letter table", "tickets"),
        ("dead letter schema", "tickets"),
    ],
)
def test_an_identifier_over_63_bytes_is_refused(where: str, label: str) -> None:
    ticket = spec_of(Ticket)
    dead: DeadLetter | None = None
    if where == "table":
        ticket = replace(ticket, table=WIDE)
    elif where == "schema":
        ticket = replace(ticket, schema=WIDE)
    elif where == "column":
        locked = replace(ticket.columns[1], column=WIDE)
        ticket = replace(ticket, columns=(ticket.columns[0], locked))
    elif where == "dead letter table":
        dead = DeadLetter(table=WIDE)
    else:
        dead = DeadLetter(table="tickets_dead", schema=WIDE)
    with pytest.raises(
        IdentifierTooLong,
        match=(
            rf"^{label} \(Ticket\): PostgreSQL identifiers are at most 63 bytes, found "
            rf"'{WIDE}' \(64\); use a shorter name$"
        ),
    ):
        build_plan(PG, ticket, dead)


# -- other rules ------------------------------------------------------------------------------


def test_a_dead_letter_group_needs_a_group_column() -> None:
    with pytest.raises(
        DeclarationError,
        match=(
            r"^plain_jobs \(PlainJob\): a dead letter group moves rows within a table's group "
            r"column, found no Group field; add one or name a dead letter table$"
        ),
    ):
        build_plan(PG, spec_of(PlainJob), DEAD_EMAILS)


def test_claims_of_every_form_may_run_side_by_side() -> None:
    for row in (EmailJob, LeasedEmail, TenantJob):
        assert not PG.claims_one_at_a_time(spec_of(row))
