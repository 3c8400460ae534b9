"""Golden tests of the ``Priority()`` role: the claim's ORDER BY in every form and dialect
(priority, then retry_after, then id), the DDL's column and claim index, the declaration's
rules, and the publish's value. tests/integration/matrix/test_priority.py runs it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import pytest

from trinbox import (
    Advisory,
    Attempt,
    DeclarationError,
    Group,
    Id,
    Inbox,
    InboxSpec,
    JsonCodec,
    Lease,
    LockedUntil,
    Payload,
    Priority,
    RetryAfter,
    RowLock,
)
from trinbox._broker.publishing import insert_values
from trinbox._declare._inbox import spec_of
from trinbox._dialects._columns import FoundColumn
from trinbox._dialects.ddl import claim_index_columns, render_ddl
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()


class RankedLock(Inbox[RowLock], table="ranked"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class RankedLease(Inbox[Lease], table="ranked"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class RankedKeyed(Inbox[Advisory], table="ranked", advisory_lock="ranked-{queue}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class RankedOnly(Inbox[Lease], table="ranked_only"):
    """No group, no RetryAfter: the priority alone comes before the id."""

    id: Annotated[int, Id(generated=True)]
    rank: Annotated[int, Priority()]
    locked_until: Annotated[datetime | None, LockedUntil()]


# -- the claim's order, per form and dialect --------------------------------------------------


def test_postgres_row_lock_claim_orders_by_priority_then_due_time_then_id() -> None:
    (claim,) = build_plan(PG, spec_of(RankedLock)).claim
    assert claim.sql == (
        'SELECT "id", "queue", "priority", "retry_after", "attempt", "payload" FROM "ranked" '
        'WHERE "queue" = $1 AND "retry_after" <= $2 ORDER BY "priority", "retry_after", "id" '
        "LIMIT $3 FOR UPDATE SKIP LOCKED"
    )


def test_postgres_lease_claim_orders_the_lock_and_the_returned_rows() -> None:
    (claim,) = build_plan(PG, spec_of(RankedLease)).claim
    assert claim.sql == (
        'WITH __claimed AS (SELECT "id", "queue", "priority", "retry_after", "attempt", '
        '"locked_until", "payload" FROM "ranked" WHERE "queue" = $1 AND "retry_after" <= $2 '
        'AND ("locked_until" IS NULL OR "locked_until" <= $2) ORDER BY "priority", '
        '"retry_after", "id" LIMIT $3 FOR UPDATE SKIP LOCKED), __stamped AS (UPDATE "ranked" '
        'AS __row SET "locked_until" = $4, "attempt" = __row."attempt" + 1 FROM __claimed '
        'WHERE __row."id" = __claimed."id") SELECT * FROM __claimed ORDER BY "priority", '
        '"retry_after", "id"'
    )


def test_postgres_advisory_candidates_order_by_priority() -> None:
    (claim,) = build_plan(PG, spec_of(RankedKeyed)).claim
    assert claim.sql == (
        'SELECT "id", "__lock" FROM (SELECT "id", concat(\'ranked-\', COALESCE("queue"::text, '
        '\'\')) AS "__lock" FROM "ranked" WHERE "queue" = $1 AND "retry_after" <= $2 ORDER BY '
        '"priority", "retry_after", "id" OFFSET 0) AS __candidates WHERE '
        'pg_try_advisory_xact_lock_shared(hashtextextended("__lock", 0)) LIMIT $3'
    )


def test_mysql_row_lock_and_lease_claims_order_by_priority() -> None:
    (lock,) = build_plan(MY, spec_of(RankedLock)).claim
    assert lock.sql == (
        "SELECT `id`, `queue`, `priority`, `retry_after`, `attempt`, `payload` FROM `ranked` "
        "WHERE `queue` = %s AND `retry_after` <= %s ORDER BY `priority`, `retry_after`, `id` "
        "LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    select, _stamp = build_plan(MY, spec_of(RankedLease)).claim
    assert select.sql == (
        "SELECT `id`, `queue`, `priority`, `retry_after`, `attempt`, `locked_until`, `payload` "
        "FROM `ranked` WHERE `queue` = %s AND `retry_after` <= %s AND (`locked_until` IS NULL "
        "OR `locked_until` <= %s) ORDER BY `priority`, `retry_after`, `id` LIMIT %s FOR UPDATE "
        "SKIP LOCKED"
    )


def test_mysql_advisory_candidates_order_by_priority() -> None:
    (claim,) = build_plan(MY, spec_of(RankedKeyed)).claim
    assert claim.sql.endswith(" IS NULL ORDER BY `priority`, `retry_after`, `id` LIMIT %s")


def test_sqlite_lease_claim_and_advisory_candidates_order_by_priority() -> None:
    (lease,) = build_plan(LITE, spec_of(RankedLease)).claim
    assert lease.sql == (
        "UPDATE `ranked` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN "
        "(SELECT `id` FROM `ranked` WHERE `queue` = ? AND `retry_after` <= ? AND "
        "(`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `priority`, `retry_after`, "
        "`id` LIMIT ?) RETURNING `id`, `queue`, `priority`, `retry_after`, `attempt` - 1 AS "
        "`attempt`, `locked_until`, `payload`"
    )
    (candidates,) = build_plan(LITE, spec_of(RankedKeyed)).claim
    assert candidates.sql == (
        "SELECT `id`, CAST('ranked-' || ifnull(`queue`, '') AS TEXT) AS `__lock` FROM `ranked` "
        "WHERE `queue` = ? AND `retry_after` <= ? AND CAST('ranked-' || ifnull(`queue`, '') AS "
        "TEXT) NOT IN (SELECT value FROM json_each(?)) ORDER BY `priority`, `retry_after`, `id` "
        "LIMIT ?"
    )


def test_without_retry_after_the_priority_comes_before_the_id() -> None:
    assert PG.order_by(spec_of(RankedOnly)) == '"rank", "id"'
    assert LITE.order_by(spec_of(RankedOnly), prefix="t.") == "t.`rank`, t.`id`"


def test_no_settlement_writes_the_priority() -> None:
    for dialect, rows in ((PG, (RankedLock, RankedLease, RankedKeyed)), (LITE, (RankedLease,))):
        for row in rows:
            statements = build_plan(dialect, spec_of(row))
            settles = [statements.ack, statements.retry, statements.retry_after]
            settles += statements.batch
            assert statements.retry_after is not None
            for statement in settles:
                if statement is not None:
                    assert "priority" not in statement.sql, statement


# -- the DDL ----------------------------------------------------------------------------------


def test_the_ddl_writes_an_integer_defaulting_to_zero_and_indexes_it() -> None:
    assert [c.column for c in claim_index_columns(spec_of(RankedLease))] == [
        "queue",
        "priority",
        "retry_after",
        "id",
    ]
    pg_table, pg_index = render_ddl(PG, spec_of(RankedLease))
    assert '    "priority" INTEGER NOT NULL DEFAULT 0,\n' in pg_table
    assert pg_index == (
        'CREATE INDEX IF NOT EXISTS "ranked_claim" ON "ranked" '
        '("queue", "priority", "retry_after", "id")'
    )
    (my_table,) = render_ddl(MY, spec_of(RankedLease))
    assert "    `priority` INT NOT NULL DEFAULT 0,\n" in my_table
    assert "    INDEX `ranked_claim` (`queue`, `priority`, `retry_after`, `id`)\n" in my_table
    lite_table, lite_index = render_ddl(LITE, spec_of(RankedLease))
    assert "    `priority` INTEGER NOT NULL DEFAULT 0,\n" in lite_table
    assert lite_index == (
        "CREATE INDEX IF NOT EXISTS `ranked_claim` ON `ranked` "
        "(`queue`, `priority`, `retry_after`, `id`)"
    )


def test_a_priority_alone_gets_an_index_beside_the_key() -> None:
    assert render_ddl(PG, spec_of(RankedOnly))[1] == (
        'CREATE INDEX IF NOT EXISTS "ranked_only_claim" ON "ranked_only" ("rank", "id")'
    )


# -- the declaration --------------------------------------------------------------------------


def test_a_priority_is_an_int() -> None:
    with pytest.raises(DeclarationError) as info:

        class Loose(Inbox[Lease], table="loose"):
            id: Annotated[int, Id(generated=True)]
            rank: Annotated[int | None, Priority()]
            locked_until: Annotated[datetime | None, LockedUntil()]

    assert str(info.value) == (
        "class test_a_priority_is_an_int.<locals>.Loose: a Priority field is an int (the claim "
        "takes smaller first; a publish that leaves it out writes 0), found 'rank' of type "
        "int | None; declare rank: Annotated[int, Priority()]"
    )
    with pytest.raises(DeclarationError, match="found 'rank' of type str;"):

        class Worded(Inbox[Lease], table="worded"):
            id: Annotated[int, Id(generated=True)]
            rank: Annotated[str, Priority()]
            locked_until: Annotated[datetime | None, LockedUntil()]


def test_a_priority_is_not_generated_and_comes_once() -> None:
    with pytest.raises(DeclarationError, match=r"found Priority\(generated=True\) on 'rank'"):

        class Filled(Inbox[Lease], table="filled"):
            id: Annotated[int, Id(generated=True)]
            rank: Annotated[int, Priority(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]

    with pytest.raises(DeclarationError, match="found Priority on both 'a' and 'b'"):

        class Twice(Inbox[Lease], table="twice"):
            id: Annotated[int, Id(generated=True)]
            a: Annotated[int, Priority()]
            b: Annotated[int, Priority()]
            locked_until: Annotated[datetime | None, LockedUntil()]


def test_the_manual_builder_declares_the_same_priority() -> None:
    spec = InboxSpec("ranked_only", "id", generated=True).priority("rank").lease("locked_until")

    class Built(Inbox[Lease], spec=spec):
        id: int
        rank: int
        locked_until: datetime | None

    assert spec_of(Built).columns == spec_of(RankedOnly).columns


# -- the publish and the column check ---------------------------------------------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_publish_without_a_priority_writes_zero_and_one_with_it_writes_it() -> None:
    spec = spec_of(RankedLease)
    left_out = insert_values(spec, {"n": 1}, {"queue": "q"}, NOW, None, JsonCodec())
    assert left_out["priority"] == 0
    given = insert_values(spec, {"n": 1}, {"queue": "q", "priority": -3}, NOW, None, JsonCodec())
    assert given["priority"] == -3


@pytest.mark.parametrize("value", ["5", 1.5, True, None])
def test_a_published_priority_is_an_int(value: object) -> None:
    columns = {"queue": "q", "priority": value}
    with pytest.raises(DeclarationError) as info:
        insert_values(spec_of(RankedLease), {"n": 1}, columns, NOW, None, JsonCodec())
    assert str(info.value) == (
        "publish into ranked (RankedLease): a priority is an int (the Priority field priority; "
        f"smaller is taken first), found {type(value).__name__} {value!r}; pass an int, like "
        "priority=5"
    )


def test_the_column_check_takes_an_integer_priority_only() -> None:
    spec = spec_of(RankedLease)
    found = [FoundColumn("priority", "smallint", None, nullable=False)]
    assert PG.check_columns(spec, found) is None
    assert MY.check_columns(spec, [FoundColumn("priority", "bigint(20)", "0", False)]) is None
    problem = PG.check_columns(spec, [FoundColumn("priority", "text", None, nullable=False)])
    assert problem is not None
    assert problem.startswith(
        "the Priority column of ranked (RankedLease) orders the claim by an integer, "
    )
    assert "found column 'priority' of type text;" in problem
