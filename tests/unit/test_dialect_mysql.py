"""Golden tests of the MySQL/MariaDB dialect: the exact SQL text and parameter order of every
statement it renders, per form (docs/reference.md#claim-forms, docs/reference.md#support-matrix). No
database is needed here; each shape was also run once by hand against MariaDB 10.11 in a scratch
database (with PyMySQL's client side ``%`` interpolation, and as server side ``PREPARE``).

``%s`` is positional, so a repeated name is bound again each time it appears.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from trinbox._declare._inbox import spec_of
from trinbox._declare._markers import (
    Default,
    Deferred,
    Exclusive,
    Immediate,
    Isolation,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    Serializable,
)
from trinbox._dialects._base import DeadLetter
from trinbox._dialects._statement import Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import Plan, build_plan
from trinbox.errors import IdentifierTooLong, ServerTooOld, UnsupportedIsolation

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

MY = MySqlDialect()
MY_BEGIN = Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ())
"""The claim's and the plain transaction's begin."""


def by_event(found: Plan) -> Plan:
    """``found`` without the lease form's release and keeper rounds and the snooze, which the
    golden plans check (test_plans_golden.py)."""
    return replace(found, release=None, rounds=None, snooze=None)


# The GET_LOCK name of a tenant_jobs row: its database, a dot and the key, used as is from 1 to
# 64 characters, else its SHA-256 (64 hex characters).
TENANT_KEY = (
    "CONCAT_WS('', LOWER(DATABASE()), '.', 'tenant_jobs-', COALESCE(CAST(`tenant` AS CHAR), ''))"
)
TENANT_LOCK = (
    f"IF(CHAR_LENGTH({TENANT_KEY}) BETWEEN 1 AND 64, {TENANT_KEY}, SHA2({TENANT_KEY}, 256))"
)
# A table in a named database puts that name first instead of the connection's database.
KEYED_KEY = "CONCAT_WS('', LOWER('app'), '.', COALESCE(CAST(`id` AS CHAR), ''))"
KEYED_LOCK = f"IF(CHAR_LENGTH({KEYED_KEY}) BETWEEN 1 AND 64, {KEYED_KEY}, SHA2({KEYED_KEY}, 256))"
# A quote doubles, a backslash doubles, and '%' is written '%%' for the client's interpolation.
ODD_KEY = (
    r"""CONCAT_WS('', LOWER(DATABASE()), '.', 'it''s 100%%\\', """
    r"""COALESCE(CAST(`i"d``` AS CHAR), ''))"""
)
ODD_LOCK = f"IF(CHAR_LENGTH({ODD_KEY}) BETWEEN 1 AND 64, {ODD_KEY}, SHA2({ODD_KEY}, 256))"


# -- row lock ---------------------------------------------------------------------------------


def test_row_lock_claims_due_rows_of_its_group_and_counts_attempts_when_it_settles() -> None:
    assert by_event(build_plan(MY, spec_of(EmailJob), DEAD_EMAILS)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "claim",
                "SELECT `job_id`, `name`, `customer`, `retry_after`, `attempt`, "
                "`processed_at`, `payload` FROM `email_jobs` WHERE `name` = %s AND "
                "`retry_after` <= %s AND `processed_at` IS NULL ORDER BY "
                "`retry_after`, `job_id` LIMIT %s FOR UPDATE SKIP LOCKED",
                ("group", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "UPDATE `email_jobs` SET `processed_at` = %s WHERE `job_id` = %s",
            ("now", "id"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `email_jobs` SET `attempt` = `attempt` + 1 WHERE `job_id` = %s",
            ("id",),
        ),
        retry_after=Statement(
            "retry_after",
            "UPDATE `email_jobs` SET `retry_after` = %s, `attempt` = `attempt` + 1 "
            "WHERE `job_id` = %s",
            ("retry_at", "id"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                "UPDATE `email_jobs` SET `name` = %s WHERE `job_id` = %s",
                ("dest", "id"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `email_jobs` (`name`, `payload`, `customer`) VALUES (%s, %s, %s)",
            ("name", "payload", "customer"),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
    )


def test_row_lock_without_group_moves_a_dead_letter_in_two_statements() -> None:
    # Copy, then delete: the form runs both in the claim's transaction.
    assert by_event(build_plan(MY, spec_of(PlainJob), DEAD_PLAIN)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "claim",
                "SELECT `id`, `attempt`, `tenant` FROM `plain_jobs` ORDER BY `id` "
                "LIMIT %s FOR UPDATE SKIP LOCKED",
                ("limit",),
            ),
        ),
        ack=Statement("ack", "DELETE FROM `plain_jobs` WHERE `id` = %s", ("id",)),
        retry=Statement(
            "retry",
            "UPDATE `plain_jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s",
            ("id",),
        ),
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                "INSERT INTO `plain_jobs_dead` (`id`, `attempt`, `tenant`) SELECT "
                "`id`, `attempt`, `tenant` FROM `plain_jobs` WHERE `id` = %s",
                ("id",),
            ),
            Statement("dead_letter", "DELETE FROM `plain_jobs` WHERE `id` = %s", ("id",)),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `plain_jobs` (`id`, `tenant`) VALUES (%s, %s)",
            ("id", "tenant"),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
    )


# -- lease ------------------------------------------------------------------------------------


def test_lease_claim_selects_then_stamps_each_row_at_read_committed() -> None:
    assert by_event(build_plan(MY, spec_of(LeasedEmail), DEAD_EMAILS)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "claim",
                "SELECT `job_id`, `name`, `retry_after`, `attempt`, `locked_until`, "
                "`processed_at`, `payload` FROM `email_jobs` WHERE `name` = %s AND "
                "`retry_after` <= %s AND `processed_at` IS NULL AND (`locked_until` "
                "IS NULL OR `locked_until` <= %s) ORDER BY `retry_after`, `job_id` "
                "LIMIT %s FOR UPDATE SKIP LOCKED",
                ("group", "now", "now", "limit"),
            ),
            Statement(
                "stamp",
                "UPDATE `email_jobs` SET `locked_until` = %s, `attempt` = `attempt` + "
                "1 WHERE `job_id` = %s AND (`locked_until` IS NULL OR `locked_until` "
                "<= %s)",
                ("lease", "id", "now"),
            ),
        ),
        ack=Statement(
            "ack",
            "UPDATE `email_jobs` SET `processed_at` = %s, `locked_until` = NULL WHERE "
            "`job_id` = %s AND `locked_until` = %s",
            ("now", "id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `email_jobs` SET `locked_until` = NULL WHERE `job_id` = %s AND "
            "`locked_until` = %s",
            ("id", "token"),
        ),
        retry_after=Statement(
            "retry_after",
            "UPDATE `email_jobs` SET `retry_after` = %s, `locked_until` = NULL WHERE "
            "`job_id` = %s AND `locked_until` = %s",
            ("retry_at", "id", "token"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                "UPDATE `email_jobs` SET `name` = %s, `locked_until` = NULL WHERE "
                "`job_id` = %s AND `locked_until` = %s",
                ("dest", "id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `email_jobs` (`name`, `payload`) VALUES (%s, %s)",
            ("name", "payload"),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        extend=(
            Statement(
                "extend",
                "SELECT `job_id` FROM `email_jobs` WHERE (`job_id`, `locked_until`) IN ((%s, %s)) "
                "FOR UPDATE",
                ("id0", "token0"),
            ),
            Statement(
                "extend",
                "UPDATE `email_jobs` SET `locked_until` = %s WHERE (`job_id`, `locked_until`) IN "
                "((%s, %s))",
                ("lease", "id0", "token0"),
            ),
        ),
    )


def test_lease_table_in_a_schema_moves_a_dead_letter_with_its_lease_cleared() -> None:
    # Both statements carry the token: a move that finds no row is lost and rolled back.
    assert by_event(build_plan(MY, spec_of(LeasedPlain), DEAD_APP_PLAIN)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "claim",
                "SELECT `id`, `attempt`, `tenant_name`, `locked_until`, `payload` "
                "FROM `app`.`plain_jobs` WHERE (`locked_until` IS NULL OR "
                "`locked_until` <= %s) ORDER BY `id` LIMIT %s FOR UPDATE SKIP LOCKED",
                ("now", "limit"),
            ),
            Statement(
                "stamp",
                "UPDATE `app`.`plain_jobs` SET `locked_until` = %s, `attempt` = "
                "`attempt` + 1 WHERE `id` = %s AND (`locked_until` IS NULL OR "
                "`locked_until` <= %s)",
                ("lease", "id", "now"),
            ),
        ),
        ack=Statement(
            "ack",
            "DELETE FROM `app`.`plain_jobs` WHERE `id` = %s AND `locked_until` = %s",
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `app`.`plain_jobs` SET `locked_until` = NULL WHERE `id` = %s AND "
            "`locked_until` = %s",
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                "INSERT INTO `app`.`plain_jobs_dead` (`id`, `attempt`, `tenant_name`, "
                "`locked_until`, `payload`) SELECT `id`, `attempt`, `tenant_name`, "
                "NULL, `payload` FROM `app`.`plain_jobs` WHERE `id` = %s AND "
                "`locked_until` = %s",
                ("id", "token"),
            ),
            Statement(
                "dead_letter",
                "DELETE FROM `app`.`plain_jobs` WHERE `id` = %s AND `locked_until` = %s",
                ("id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `app`.`plain_jobs` (`locked_until`, `payload`, "
            "`tenant_name`) VALUES (%s, %s, %s)",
            ("locked_until", "payload", "tenant_name"),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        extend=(
            Statement(
                "extend",
                "SELECT `id` FROM `app`.`plain_jobs` WHERE (`id`, `locked_until`) IN ((%s, %s)) "
                "FOR UPDATE",
                ("id0", "token0"),
            ),
            Statement(
                "extend",
                "UPDATE `app`.`plain_jobs` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN "
                "((%s, %s))",
                ("lease", "id0", "token0"),
            ),
        ),
    )


def test_lease_table_without_attempt_stamps_the_lease_alone_and_inserts_defaults() -> None:
    assert by_event(build_plan(MY, spec_of(Ticket))) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "claim",
                "SELECT `id`, `locked_until` FROM `tickets` WHERE (`locked_until` IS "
                "NULL OR `locked_until` <= %s) ORDER BY `id` LIMIT %s FOR UPDATE SKIP "
                "LOCKED",
                ("now", "limit"),
            ),
            Statement(
                "stamp",
                "UPDATE `tickets` SET `locked_until` = %s WHERE `id` = %s AND "
                "(`locked_until` IS NULL OR `locked_until` <= %s)",
                ("lease", "id", "now"),
            ),
        ),
        ack=Statement(
            "ack",
            "DELETE FROM `tickets` WHERE `id` = %s AND `locked_until` = %s",
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `tickets` SET `locked_until` = NULL WHERE `id` = %s AND `locked_until` = %s",
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(),
        insert=Statement("insert", "INSERT INTO `tickets` () VALUES ()", ()),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        extend=(
            Statement(
                "extend",
                "SELECT `id` FROM `tickets` WHERE (`id`, `locked_until`) IN ((%s, %s)) FOR UPDATE",
                ("id0", "token0"),
            ),
            Statement(
                "extend",
                "UPDATE `tickets` SET `locked_until` = %s WHERE (`id`, `locked_until`) IN "
                "((%s, %s))",
                ("lease", "id0", "token0"),
            ),
        ),
    )


# -- advisory ---------------------------------------------------------------------------------


def test_advisory_candidates_skip_names_in_use_and_the_take_counts_then_reads() -> None:
    assert by_event(build_plan(MY, spec_of(TenantJob), DEAD_EMAILS)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "candidates",
                f"SELECT `id`, {TENANT_LOCK} AS `__lock` FROM `tenant_jobs` WHERE "
                "`name` = %s AND `retry_after` <= %s AND `processed_at` IS NULL AND "
                f"IS_USED_LOCK({TENANT_LOCK}) IS NULL ORDER BY `retry_after`, `id` LIMIT %s",
                ("group", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "UPDATE `tenant_jobs` SET `processed_at` = %s WHERE `id` = %s",
            ("now", "id"),
        ),
        retry=None,
        retry_after=Statement(
            "retry_after",
            "UPDATE `tenant_jobs` SET `retry_after` = %s WHERE `id` = %s",
            ("retry_at", "id"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                "UPDATE `tenant_jobs` SET `name` = %s WHERE `id` = %s",
                ("dest", "id"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `tenant_jobs` (`name`, `payload`, `tenant`) VALUES (%s, %s, %s)",
            ("name", "payload", "tenant"),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        take=(
            Statement(
                "take",
                "UPDATE `tenant_jobs` SET `attempt` = `attempt` + 1 WHERE `id` = %s "
                "AND `name` = %s AND `retry_after` <= %s AND `processed_at` IS NULL",
                ("id", "group", "now"),
            ),
            Statement(
                "take",
                "SELECT `id`, `name`, `tenant`, `retry_after`, `attempt` - 1 AS "
                "`attempt`, `processed_at`, `payload` FROM `tenant_jobs` WHERE `id` = "
                "%s",
                ("id",),
            ),
        ),
        lock=Statement("lock", "SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)", ("key",)),
        unlock=Statement(
            "unlock",
            "SELECT CAST(COALESCE(RELEASE_LOCK(%s), 0) AS SIGNED)",
            ("key",),
        ),
    )


def test_advisory_table_without_attempt_takes_by_reading_the_row() -> None:
    assert by_event(build_plan(MY, spec_of(KeyedJob), DEAD_KEYED)) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "candidates",
                f"SELECT `id`, {KEYED_LOCK} AS `__lock` FROM `app`.`keyed_jobs` WHERE "
                f"IS_USED_LOCK({KEYED_LOCK}) IS NULL ORDER BY `id` LIMIT %s",
                ("limit",),
            ),
        ),
        ack=Statement("ack", "DELETE FROM `app`.`keyed_jobs` WHERE `id` = %s", ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                "INSERT INTO `keyed_jobs_dead` (`id`, `payload`) SELECT `id`, "
                "`payload` FROM `app`.`keyed_jobs` WHERE `id` = %s",
                ("id",),
            ),
            Statement("dead_letter", "DELETE FROM `app`.`keyed_jobs` WHERE `id` = %s", ("id",)),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `app`.`keyed_jobs` (`payload`) VALUES (%s)",
            ("payload",),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        take=(
            Statement(
                "take",
                "SELECT `id`, `payload` FROM `app`.`keyed_jobs` WHERE `id` = %s",
                ("id",),
            ),
        ),
        lock=Statement("lock", "SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)", ("key",)),
        unlock=Statement(
            "unlock",
            "SELECT CAST(COALESCE(RELEASE_LOCK(%s), 0) AS SIGNED)",
            ("key",),
        ),
    )


# -- quoting and placeholders -----------------------------------------------------------------


def test_a_backtick_in_a_name_is_doubled_and_a_percent_sign_is_escaped() -> None:
    assert MY.quoted('odd"jobs`') == '`odd"jobs```'
    assert MY.literal("it's a\\b") == "'it''s a\\\\b'"
    assert by_event(build_plan(MY, spec_of(OddNames))) == Plan(
        claim_begin=MY_BEGIN,
        plain_begin=MY_BEGIN,
        claim=(
            Statement(
                "candidates",
                f'SELECT `i"d```, {ODD_LOCK} AS `__lock` FROM `odd"jobs``%%` WHERE '
                f'IS_USED_LOCK({ODD_LOCK}) IS NULL ORDER BY `i"d``` LIMIT %s',
                ("limit",),
            ),
        ),
        ack=Statement("ack", 'DELETE FROM `odd"jobs``%%` WHERE `i"d``` = %s', ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(),
        insert=Statement(
            "insert",
            'INSERT INTO `odd"jobs``%%` (`payload`) VALUES (%s)',
            ("payload",),
        ),
        begin=Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ()),
        take=(
            Statement(
                "take",
                'SELECT `i"d```, `payload` FROM `odd"jobs``%%` WHERE `i"d``` = %s',
                ("id",),
            ),
        ),
        lock=Statement("lock", "SELECT CAST(COALESCE(GET_LOCK(%s, 0), 0) AS SIGNED)", ("key",)),
        unlock=Statement(
            "unlock",
            "SELECT CAST(COALESCE(RELEASE_LOCK(%s), 0) AS SIGNED)",
            ("key",),
        ),
    )


def test_the_client_interpolation_reads_a_doubled_percent_sign_as_one() -> None:
    # PyMySQL runs ``query % escaped_args``: the driver always passes a tuple, an empty one too.
    found = build_plan(MY, spec_of(OddNames))
    take = 'SELECT `i"d```, `payload` FROM `odd"jobs``%` WHERE `i"d``` = 1'
    assert found.take[0].sql % ("1",) == take
    assert found.insert.sql % ("x",) == 'INSERT INTO `odd"jobs``%` (`payload`) VALUES (x)'
    ticket = build_plan(MY, replace(spec_of(Ticket), table="t%")).insert
    assert ticket.sql % () == "INSERT INTO `t%` () VALUES ()"


def test_a_repeated_parameter_is_bound_each_time() -> None:
    select, stamp = build_plan(MY, spec_of(LeasedEmail)).claim
    now = datetime(2030, 1, 1)
    lease = datetime(2030, 1, 1, 0, 0, 30)
    values = {"lease": lease, "limit": 4, "now": now, "group": "emails", "id": 7}
    assert select.bind(values) == ("emails", now, now, 4)
    assert stamp.bind(values) == (lease, 7, now)


# -- isolation levels ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isolation", "sql"),
    [
        (Default, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        (ReadUncommitted, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"),
        (ReadCommitted, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        (RepeatableRead, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
        (Serializable, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
    ],
)
def test_begin_sets_the_declared_level_of_the_next_transaction(
    isolation: type[Isolation], sql: str
) -> None:
    for row in (EmailJob, LeasedEmail, TenantJob):
        spec = replace(spec_of(row), isolation=isolation)
        assert build_plan(MY, spec).begin == Statement("begin", sql, ())


def test_the_lease_claim_and_the_plain_transactions_open_at_read_committed() -> None:
    # The lease claim whatever the table declares (a select and stamps that lock rows);
    # transactions of no table's level (a dead letter move on an advisory session) by default.
    read_committed = Statement("begin", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ())
    assert MY.lease_claim_begin() == read_committed
    assert MY.plain_begin() == read_committed


@pytest.mark.parametrize("mode", [Deferred, Immediate, Exclusive])
def test_a_sqlite_mode_is_refused(mode: type[Isolation]) -> None:
    spec = replace(spec_of(EmailJob), isolation=mode)
    with pytest.raises(
        UnsupportedIsolation,
        match=(
            rf"^email_jobs \(EmailJob\): MySQL opens no transaction at {mode.__name__} \(it "
            r"opens Default, ReadUncommitted, ReadCommitted, RepeatableRead, Serializable\); "
            r"declare one of those as the table's isolation level$"
        ),
    ):
        build_plan(MY, spec)


# -- identifiers ------------------------------------------------------------------------------

# 65 characters (130 bytes): one character past the limit.
WIDE = "é" * 65


def test_an_identifier_of_64_characters_fits_whatever_its_bytes() -> None:
    fits = "é" * 64
    ticket = spec_of(Ticket)
    build_plan(MY, replace(ticket, table=fits, schema=fits), DeadLetter(table=fits, schema=fits))


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
def test_an_identifier_over_64_characters_is_refused(where: str, label: str) -> None:
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
            rf"^{label} \(Ticket\): MySQL identifiers are at most 64 characters, found "
            rf"'{WIDE}' \(65\); use a shorter name$"
        ),
    ):
        build_plan(MY, ticket, dead)


# -- claims in flight -------------------------------------------------------------------------


def test_a_subscription_keeps_one_lease_claim_in_flight() -> None:
    assert MY.claims_one_at_a_time(spec_of(LeasedEmail))
    assert not MY.claims_one_at_a_time(spec_of(EmailJob))
    assert not MY.claims_one_at_a_time(spec_of(TenantJob))
    assert not MY.one_claim_at_a_time


@pytest.mark.parametrize(
    "version",
    ["8.0.1", "8.0.36", "8.4.0-commercial", "10.6.0-MariaDB", "10.11.19-MariaDB-0+deb12u1"],
)
def test_server_floor_accepts(version: str) -> None:
    MySqlDialect().check_server(version)


@pytest.mark.parametrize(
    ("version", "required"),
    [
        ("8.0.0", "MySQL 8.0.1"),
        ("5.7.44-log", "MySQL 8.0.1"),
        ("10.5.23-MariaDB", "MariaDB 10.6.0"),
        ("garbage", "MySQL 8.0.1"),
        ("8.0", "MySQL 8.0.1"),
    ],
)
def test_server_floor_refuses(version: str, required: str) -> None:
    with pytest.raises(ServerTooOld) as caught:
        MySqlDialect().check_server(version)
    assert str(caught.value) == (
        f"trinbox needs MySQL 8.0.1+ or MariaDB 10.6+ (FOR UPDATE SKIP LOCKED), found server "
        f"version {version!r}; upgrade the server to {required} or later"
    )
    assert caught.value.required == required
