"""Golden tests of the SQLite dialect: the exact SQL text and parameter order of every statement it
renders, per form (docs/reference.md#claim-forms, docs/reference.md#support-matrix). No database is
needed here; each shape was also run once by hand against SQLite 3.40 (Python's sqlite3).

``?`` is positional, so a repeated name is bound again each time it appears.
"""

from __future__ import annotations

from dataclasses import replace

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
from trinbox._dialects.plans import Plan, build_plan
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.errors import UnsupportedForm, UnsupportedIsolation

from ._tables import (
    DEAD_APP_PLAIN,
    DEAD_EMAILS,
    DEAD_KEYED,
    EmailJob,
    KeyedJob,
    LeasedEmail,
    LeasedPlain,
    OddNames,
    PlainJob,
    TenantJob,
    Ticket,
)

LITE = SqliteDialect()
LITE_BEGIN = Statement("begin", "BEGIN", ())
"""The claim's and the plain transaction's begin."""


def by_event(found: Plan) -> Plan:
    """``found`` without the lease form's release and keeper rounds and the snooze, which the
    golden plans check (test_plans_golden.py)."""
    return replace(found, release=None, rounds=None, snooze=None)


# -- lease ------------------------------------------------------------------------------------


def test_lease_claim_is_one_update_returning_the_attempt_before_its_count() -> None:
    assert by_event(build_plan(LITE, spec_of(LeasedEmail), DEAD_EMAILS)) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "claim",
                "UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + "
                "1 WHERE `job_id` IN (SELECT `job_id` FROM `email_jobs` WHERE `name` "
                "= ? AND `retry_after` <= ? AND `processed_at` IS NULL AND "
                "(`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY "
                "`retry_after`, `job_id` LIMIT ?) RETURNING `job_id`, `name`, "
                "`retry_after`, `attempt` - 1 AS `attempt`, `locked_until`, "
                "`processed_at`, `payload`",
                ("lease", "group", "now", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "UPDATE `email_jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE "
            "`job_id` = ? AND `locked_until` = ?",
            ("now", "id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `email_jobs` SET `locked_until` = NULL WHERE `job_id` = ? AND "
            "`locked_until` = ?",
            ("id", "token"),
        ),
        retry_after=Statement(
            "retry_after",
            "UPDATE `email_jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE "
            "`job_id` = ? AND `locked_until` = ?",
            ("retry_at", "id", "token"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                "UPDATE `email_jobs` SET `name` = ?, `locked_until` = NULL WHERE "
                "`job_id` = ? AND `locked_until` = ?",
                ("dest", "id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `email_jobs` (`name`, `payload`) VALUES (?, ?)",
            ("name", "payload"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                "UPDATE `email_jobs` SET `locked_until` = ? WHERE `job_id` IN (SELECT value FROM "
                "json_each(?)) AND (`job_id`, `locked_until`) IN (SELECT `__ids`.value, "
                "`__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` "
                "ON `__leases`.key = `__ids`.key) RETURNING `job_id`",
                ("lease", "ids", "ids", "tokens"),
            ),
        ),
        # A batch's rows settled alike: one statement, the ids as one JSON array.
        batch=(
            Statement(
                "ack",
                "UPDATE `email_jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE "
                "`job_id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? "
                "RETURNING `job_id`",
                ("now", "ids", "token"),
            ),
            Statement(
                "retry",
                "UPDATE `email_jobs` SET `locked_until` = NULL WHERE `job_id` IN (SELECT value "
                "FROM json_each(?)) AND `locked_until` = ? RETURNING `job_id`",
                ("ids", "token"),
            ),
            Statement(
                "retry_after",
                "UPDATE `email_jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE "
                "`job_id` IN (SELECT value FROM json_each(?)) AND `locked_until` = ? "
                "RETURNING `job_id`",
                ("retry_at", "ids", "token"),
            ),
            Statement(
                "snooze",
                "UPDATE `email_jobs` SET `retry_after` = ?, `attempt` = `attempt` - 1, "
                "`locked_until` = NULL WHERE `job_id` IN (SELECT value FROM json_each(?)) AND "
                "`locked_until` = ? RETURNING `job_id`",
                ("retry_at", "ids", "token"),
            ),
        ),
    )


def test_lease_table_in_a_schema_moves_a_dead_letter_in_two_statements() -> None:
    # Both statements carry the token: a move that finds no row is lost and rolled back.
    assert by_event(build_plan(LITE, spec_of(LeasedPlain), DEAD_APP_PLAIN)) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "claim",
                "UPDATE `app`.`plain_jobs` SET `locked_until` = ?, `attempt` = "
                "`attempt` + 1 WHERE `id` IN (SELECT `id` FROM `app`.`plain_jobs` "
                "WHERE (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `id` "
                "LIMIT ?) RETURNING `id`, `attempt` - 1 AS `attempt`, `tenant_name`, "
                "`locked_until`, `payload`",
                ("lease", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "DELETE FROM `app`.`plain_jobs` WHERE `id` = ? AND `locked_until` = ?",
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `app`.`plain_jobs` SET `locked_until` = NULL WHERE `id` = ? AND "
            "`locked_until` = ?",
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                "INSERT INTO `app`.`plain_jobs_dead` (`id`, `attempt`, `tenant_name`, "
                "`locked_until`, `payload`) SELECT `id`, `attempt`, `tenant_name`, "
                "NULL, `payload` FROM `app`.`plain_jobs` WHERE `id` = ? AND "
                "`locked_until` = ?",
                ("id", "token"),
            ),
            Statement(
                "dead_letter",
                "DELETE FROM `app`.`plain_jobs` WHERE `id` = ? AND `locked_until` = ?",
                ("id", "token"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `app`.`plain_jobs` (`locked_until`, `payload`, "
            "`tenant_name`) VALUES (?, ?, ?)",
            ("locked_until", "payload", "tenant_name"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                "UPDATE `app`.`plain_jobs` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM "
                "json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, "
                "`__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` "
                "ON `__leases`.key = `__ids`.key) RETURNING `id`",
                ("lease", "ids", "ids", "tokens"),
            ),
        ),
        batch=(
            Statement(
                "ack",
                "DELETE FROM `app`.`plain_jobs` WHERE `id` IN (SELECT value FROM "
                "json_each(?)) AND `locked_until` = ? RETURNING `id`",
                ("ids", "token"),
            ),
            Statement(
                "retry",
                "UPDATE `app`.`plain_jobs` SET `locked_until` = NULL WHERE `id` IN (SELECT "
                "value FROM json_each(?)) AND `locked_until` = ? RETURNING `id`",
                ("ids", "token"),
            ),
        ),
    )


def test_lease_table_without_attempt_stamps_the_lease_alone_and_inserts_defaults() -> None:
    assert by_event(build_plan(LITE, spec_of(Ticket))) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "claim",
                "UPDATE `tickets` SET `locked_until` = ? WHERE `id` IN (SELECT `id` "
                "FROM `tickets` WHERE (`locked_until` IS NULL OR `locked_until` <= ?) "
                "ORDER BY `id` LIMIT ?) RETURNING `id`, `locked_until`",
                ("lease", "now", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "DELETE FROM `tickets` WHERE `id` = ? AND `locked_until` = ?",
            ("id", "token"),
        ),
        retry=Statement(
            "retry",
            "UPDATE `tickets` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?",
            ("id", "token"),
        ),
        retry_after=None,
        dead_letter=(),
        insert=Statement("insert", "INSERT INTO `tickets` DEFAULT VALUES", ()),
        begin=Statement("begin", "BEGIN", ()),
        extend=(
            Statement(
                "extend",
                "UPDATE `tickets` SET `locked_until` = ? WHERE `id` IN (SELECT value FROM "
                "json_each(?)) AND (`id`, `locked_until`) IN (SELECT `__ids`.value, "
                "`__leases`.value FROM json_each(?) AS `__ids` JOIN json_each(?) AS `__leases` "
                "ON `__leases`.key = `__ids`.key) RETURNING `id`",
                ("lease", "ids", "ids", "tokens"),
            ),
        ),
        batch=(
            Statement(
                "ack",
                "DELETE FROM `tickets` WHERE `id` IN (SELECT value FROM json_each(?)) AND "
                "`locked_until` = ? RETURNING `id`",
                ("ids", "token"),
            ),
            Statement(
                "retry",
                "UPDATE `tickets` SET `locked_until` = NULL WHERE `id` IN (SELECT value FROM "
                "json_each(?)) AND `locked_until` = ? RETURNING `id`",
                ("ids", "token"),
            ),
        ),
    )


# -- advisory ---------------------------------------------------------------------------------


def test_advisory_candidates_carry_their_keys_and_pass_over_the_held_ones() -> None:
    # The process keeps the keys in work: no lock or unlock statement.
    assert by_event(build_plan(LITE, spec_of(TenantJob), DEAD_EMAILS)) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "candidates",
                "SELECT `id`, CAST('tenant_jobs-' || ifnull(`tenant`, '') AS TEXT) AS "
                "`__lock` FROM `tenant_jobs` WHERE `name` = ? AND `retry_after` <= ? "
                "AND `processed_at` IS NULL AND CAST('tenant_jobs-' || ifnull(`tenant`, '') "
                "AS TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `retry_after`, "
                "`id` LIMIT ?",
                ("group", "now", "held", "limit"),
            ),
        ),
        ack=Statement(
            "ack",
            "UPDATE `tenant_jobs` SET `processed_at` = ? WHERE `id` = ?",
            ("now", "id"),
        ),
        retry=None,
        retry_after=Statement(
            "retry_after",
            "UPDATE `tenant_jobs` SET `retry_after` = ? WHERE `id` = ?",
            ("retry_at", "id"),
        ),
        dead_letter=(
            Statement(
                "dead_letter",
                "UPDATE `tenant_jobs` SET `name` = ? WHERE `id` = ?",
                ("dest", "id"),
            ),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `tenant_jobs` (`name`, `payload`, `tenant`) VALUES (?, ?, ?)",
            ("name", "payload", "tenant"),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                "UPDATE `tenant_jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? "
                "AND `name` = ? AND `retry_after` <= ? AND `processed_at` IS NULL "
                "RETURNING `id`, `name`, `tenant`, `retry_after`, `attempt` - 1 AS "
                "`attempt`, `processed_at`, `payload`",
                ("id", "group", "now"),
            ),
        ),
    )


def test_advisory_table_without_attempt_takes_by_reading_the_row() -> None:
    assert by_event(build_plan(LITE, spec_of(KeyedJob), DEAD_KEYED)) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "candidates",
                "SELECT `id`, CAST(ifnull(`id`, '') AS TEXT) AS `__lock` FROM "
                "`app`.`keyed_jobs` WHERE CAST(ifnull(`id`, '') AS TEXT) NOT IN (SELECT "
                "value FROM json_each(?)) ORDER BY `id` LIMIT ?",
                ("held", "limit"),
            ),
        ),
        ack=Statement("ack", "DELETE FROM `app`.`keyed_jobs` WHERE `id` = ?", ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(
            Statement(
                "dead_letter",
                "INSERT INTO `keyed_jobs_dead` (`id`, `payload`) SELECT `id`, "
                "`payload` FROM `app`.`keyed_jobs` WHERE `id` = ?",
                ("id",),
            ),
            Statement("dead_letter", "DELETE FROM `app`.`keyed_jobs` WHERE `id` = ?", ("id",)),
        ),
        insert=Statement(
            "insert",
            "INSERT INTO `app`.`keyed_jobs` (`payload`) VALUES (?)",
            ("payload",),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                "SELECT `id`, `payload` FROM `app`.`keyed_jobs` WHERE `id` = ?",
                ("id",),
            ),
        ),
    )


# -- quoting and placeholders -----------------------------------------------------------------


def test_a_backtick_in_a_name_and_a_quote_in_a_key_literal_are_doubled() -> None:
    assert LITE.quoted('odd"jobs`') == '`odd"jobs```'
    assert by_event(build_plan(LITE, spec_of(OddNames))) == Plan(
        claim_begin=LITE_BEGIN,
        plain_begin=LITE_BEGIN,
        claim=(
            Statement(
                "candidates",
                r"""SELECT `i"d```, CAST('it''s 100%\' || ifnull(`i"d```, '') AS TEXT) """
                'AS `__lock` FROM `odd"jobs``%` WHERE '
                r"""CAST('it''s 100%\' || ifnull(`i"d```, '') AS TEXT) NOT IN (SELECT value """
                'FROM json_each(?)) ORDER BY `i"d``` LIMIT ?',
                ("held", "limit"),
            ),
        ),
        ack=Statement("ack", 'DELETE FROM `odd"jobs``%` WHERE `i"d``` = ?', ("id",)),
        retry=None,
        retry_after=None,
        dead_letter=(),
        insert=Statement(
            "insert",
            'INSERT INTO `odd"jobs``%` (`payload`) VALUES (?)',
            ("payload",),
        ),
        begin=Statement("begin", "BEGIN", ()),
        take=(
            Statement(
                "take",
                'SELECT `i"d```, `payload` FROM `odd"jobs``%` WHERE `i"d``` = ?',
                ("id",),
            ),
        ),
    )


def test_a_repeated_parameter_is_bound_each_time() -> None:
    claim = build_plan(LITE, spec_of(LeasedEmail)).claim[0]
    values = {"lease": "L", "limit": 4, "now": "N", "group": "emails"}
    assert claim.bind(values) == ("L", "emails", "N", "N", 4)


# -- forms and isolation levels --------------------------------------------------------------------


@pytest.mark.parametrize("row", [EmailJob, PlainJob])
def test_the_row_lock_form_is_refused(row: type[EmailJob] | type[PlainJob]) -> None:
    spec = spec_of(row)
    with pytest.raises(
        UnsupportedForm,
        match=(
            rf"^{spec.table} \({row.__name__}\): SQLite cannot serve the RowLock form \(it "
            r"serves Lease or Advisory\); SQLite has no row locks; declare Inbox\[Lease\] "
            r"with a LockedUntil field, or Inbox\[Advisory\] with advisory_lock=$"
        ),
    ):
        build_plan(LITE, spec)


@pytest.mark.parametrize(
    ("isolation", "sql"),
    [
        (Default, "BEGIN"),
        (Deferred, "BEGIN DEFERRED"),
        (Immediate, "BEGIN IMMEDIATE"),
        (Exclusive, "BEGIN EXCLUSIVE"),
    ],
)
def test_begin_names_the_declared_mode(isolation: type[Isolation], sql: str) -> None:
    for row in (LeasedEmail, TenantJob):
        spec = replace(spec_of(row), isolation=isolation)
        assert build_plan(LITE, spec).begin == Statement("begin", sql, ())


@pytest.mark.parametrize("level", [ReadUncommitted, ReadCommitted, RepeatableRead, Serializable])
def test_an_isolation_level_is_refused(level: type[Isolation]) -> None:
    spec = replace(spec_of(LeasedEmail), isolation=level)
    with pytest.raises(
        UnsupportedIsolation,
        match=(
            rf"^email_jobs \(LeasedEmail\): SQLite opens no transaction at {level.__name__} "
            r"\(it opens Default, Deferred, Immediate, Exclusive\); declare one of those as "
            r"the table's isolation level$"
        ),
    ):
        build_plan(LITE, spec)


# -- identifiers and claims in flight ---------------------------------------------------------


def test_identifiers_have_no_length_limit() -> None:
    wide = "é" * 1000
    ticket = spec_of(Ticket)
    found = build_plan(LITE, replace(ticket, table=wide), DeadLetter(table=wide, schema=wide))
    assert isinstance(found, Plan)
    assert found.ack.sql == f"DELETE FROM `{wide}` WHERE `id` = ? AND `locked_until` = ?"


def test_a_subscription_keeps_one_claim_in_flight() -> None:
    assert LITE.claims_one_at_a_time(spec_of(LeasedEmail))
    assert LITE.claims_one_at_a_time(spec_of(TenantJob))
