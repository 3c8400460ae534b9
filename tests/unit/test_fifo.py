"""Golden tests of FIFO groups (``Group(fifo=True)``): the head claim and the group guard in
every dialect and form, the declaration's rules, and the dialect's refusal of a MySQL row lock
FIFO table at SERIALIZABLE. tests/integration/matrix/test_fifo.py runs them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import pytest

from trinbox import (
    Advisory,
    Attempt,
    DeclarationError,
    FifoAtSerializable,
    Group,
    Id,
    Inbox,
    InboxQueue,
    InboxSpec,
    KeyColumn,
    KeyLiteral,
    Lease,
    LockedUntil,
    Payload,
    Priority,
    ProcessedAt,
    RetryAfter,
    RowLock,
    Serializable,
    UnsupportedOpening,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import DeadLetter
from trinbox._dialects.ddl import claim_index_columns
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()


class FifoLock(Inbox[RowLock], table="ledger", schema="bank"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class FifoLease(Inbox[Lease], table="ledger"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class Grouped(Inbox[RowLock], table="grouped"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]


# -- the declaration --------------------------------------------------------------------------


def test_a_fifo_group_marks_the_table() -> None:
    assert spec_of(FifoLock).fifo
    assert spec_of(FifoLease).fifo
    assert not spec_of(Grouped).fifo
    assert Group().fifo is False


def test_fifo_beside_an_advisory_key_is_refused_at_class_creation() -> None:
    with pytest.raises(DeclarationError) as caught:

        class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
            id: Annotated[int, Id()]
            account: Annotated[str, Group(fifo=True)]

    assert str(caught.value) == (
        "class test_fifo_beside_an_advisory_key_is_refused_at_class_creation.<locals>.Keyed: "
        "a FIFO group is served by the row lock and lease forms, found Group(fifo=True) on "
        "'account' beside the advisory key of an Inbox[Advisory] table (the advisory form "
        "orders rows through its key); use a key on the group column instead: drop fifo=True "
        "and put {account} in advisory_lock="
    )


def test_the_manual_spec_declares_a_fifo_group() -> None:
    spec = InboxSpec("ledger", "id").group("account", fifo=True).lease("locked_until")

    class Manual(Inbox[Lease], spec=spec):
        id: int
        account: str
        locked_until: datetime | None

    assert spec_of(Manual).fifo
    assert spec_of(Manual).group is not None

    keyed = InboxSpec("keyed", "id").group("account", fifo=True)
    with pytest.raises(DeclarationError, match="use a key on the group column instead"):

        class ManualKeyed(
            Inbox[Advisory], spec=keyed.advisory([KeyLiteral("k-"), KeyColumn("account")])
        ):
            id: int
            account: str


def test_the_manual_spec_says_fifo_itself() -> None:
    with pytest.raises(DeclarationError) as caught:

        class Marked(Inbox[RowLock], spec=InboxSpec("ledger", "id")):
            id: int
            account: Annotated[str, Group(fifo=True)]

    assert "found Group(fifo=True) on field 'account'" in str(caught.value)


# -- the statements ---------------------------------------------------------------------------


def test_postgres_row_lock_fifo_guard_and_head_claim() -> None:
    st = build_plan(PG, spec_of(FifoLock))
    assert st.guard is not None
    # The key: the table's name as declared, unquoted, a colon and the group.
    assert st.guard.sql == (
        "SELECT pg_try_advisory_xact_lock(hashtextextended('bank.ledger:' || CAST($1 AS text), "
        "0))::int::bigint"
    )
    assert st.guard.params == ("group",)
    (claim,) = st.claim
    assert claim.sql == (
        'SELECT "id", "account", "priority", "retry_after", "attempt", "payload" FROM '
        '"bank"."ledger" WHERE "id" = (SELECT "id" FROM "bank"."ledger" WHERE "account" = $1 ORDER '
        'BY "priority", "id" LIMIT 1) AND "account" = $1 AND "retry_after" <= $2 FOR UPDATE SKIP '
        "LOCKED"
    )
    assert claim.params == ("group", "now")
    assert st.guard in st.all()


def test_mysql_row_lock_fifo_guard_and_head_claim() -> None:
    st = build_plan(MY, spec_of(FifoLock))
    assert st.guard is not None
    assert st.guard.sql == (
        "SELECT CAST((SELECT COUNT(*) FROM `bank`.`ledger` WHERE `account` = %s) = (SELECT "
        "COUNT(*) FROM (SELECT `id` FROM `bank`.`ledger` WHERE `account` = %s FOR UPDATE SKIP "
        "LOCKED) AS __guard) AS SIGNED)"
    )
    assert st.guard.params == ("group", "group")
    (claim,) = st.claim
    assert claim.sql == (
        "SELECT `id`, `account`, `priority`, `retry_after`, `attempt`, `payload` FROM "
        "`bank`.`ledger` WHERE `id` = (SELECT `id` FROM `bank`.`ledger` WHERE `account` = %s "
        "ORDER BY `priority`, `id` LIMIT 1) AND `account` = %s AND `retry_after` "
        "<= %s FOR UPDATE SKIP LOCKED"
    )


def test_postgres_lease_fifo_claim_waits_while_a_row_of_the_group_is_in_work() -> None:
    st = build_plan(PG, spec_of(FifoLease))
    assert st.guard is not None
    assert "hashtextextended('ledger:' || CAST($1 AS text), 0)" in st.guard.sql
    (claim,) = st.claim
    assert claim.sql == (
        'WITH __claimed AS (SELECT "id", "account", "retry_after", "attempt", "locked_until", '
        '"processed_at", "payload" FROM "ledger" WHERE "id" = (SELECT "id" FROM "ledger" WHERE '
        '"account" = $1 AND "processed_at" IS NULL ORDER BY "id" LIMIT 1) AND "account" = $1 '
        'AND "processed_at" IS NULL AND "retry_after" <= $2 AND ("locked_until" IS NULL OR '
        '"locked_until" <= $2) AND NOT EXISTS (SELECT 1 FROM "ledger" AS __work WHERE '
        '__work."account" = $1 AND __work."locked_until" > $2) FOR UPDATE SKIP LOCKED), '
        '__stamped AS (UPDATE "ledger" AS __row SET "locked_until" = $3, "attempt" = '
        '__row."attempt" + 1 FROM __claimed WHERE __row."id" = __claimed."id") SELECT * FROM '
        "__claimed"
    )
    assert claim.params == ("group", "now", "lease")


def test_mysql_lease_fifo_claim_selects_the_head_then_stamps_it() -> None:
    st = build_plan(MY, spec_of(FifoLease))
    assert st.guard is not None
    assert st.guard.sql.startswith(
        "SELECT CAST((SELECT COUNT(*) FROM `ledger` WHERE `account` = %s AND `processed_at` IS "
        "NULL) = "
    )
    select, stamp = st.claim
    assert select.sql == (
        "SELECT `id`, `account`, `retry_after`, `attempt`, `locked_until`, `processed_at`, "
        "`payload` FROM `ledger` WHERE `id` = (SELECT `id` FROM `ledger` WHERE `account` = %s AND "
        "`processed_at` IS NULL ORDER BY `id` LIMIT 1) AND `account` = %s AND `processed_at` IS "
        "NULL AND `retry_after` <= %s AND (`locked_until` IS NULL OR `locked_until` <= %s) AND NOT "
        "EXISTS (SELECT 1 FROM `ledger` AS __work WHERE __work.`account` = %s AND "
        "__work.`locked_until` > %s) FOR UPDATE SKIP LOCKED"
    )
    assert select.params == ("group", "group", "now", "now", "group", "now")
    assert stamp == MY.lease_claim(spec_of(FifoLease))[1]


def test_sqlite_lease_fifo_claim_is_one_statement_without_a_guard() -> None:
    st = build_plan(LITE, spec_of(FifoLease))
    assert st.guard is None  # one writer at a time
    (claim,) = st.claim
    assert claim.sql == (
        "UPDATE `ledger` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` = (SELECT "
        "`id` FROM `ledger` WHERE `account` = ? AND `processed_at` IS NULL ORDER BY "
        "`id` LIMIT 1) AND `account` = ? AND `processed_at` IS NULL AND "
        "`retry_after` <= ? AND (`locked_until` IS NULL OR "
        "`locked_until` <= ?) AND NOT EXISTS (SELECT 1 FROM `ledger` AS __work WHERE "
        "__work.`account` = ? AND __work.`locked_until` > ?) RETURNING `id`, `account`, "
        "`retry_after`, `attempt` - 1 AS `attempt`, `locked_until`, `processed_at`, `payload`"
    )


def test_the_in_work_alias_keeps_clear_of_a_declared_name() -> None:
    class Clash(Inbox[Lease], table="__work"):
        id: Annotated[int, Id(generated=True)]
        account: Annotated[str, Group(fifo=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]

    (claim,) = build_plan(PG, spec_of(Clash)).claim
    assert 'FROM "__work" AS __work_2 WHERE __work_2."account" = $1' in claim.sql


def test_a_table_without_fifo_has_no_guard_and_claims_as_before() -> None:
    st = build_plan(PG, spec_of(Grouped))
    assert st.guard is None
    assert st.claim == (PG.row_lock_claim(spec_of(Grouped)),)


def test_a_fifo_subscription_keeps_one_claim_in_flight() -> None:
    assert PG.claims_one_at_a_time(spec_of(FifoLock))
    assert PG.claims_one_at_a_time(spec_of(FifoLease))
    assert not PG.claims_one_at_a_time(spec_of(Grouped))


# -- MySQL at SERIALIZABLE ----------------------------------------------------------------------


class SerialLock(Inbox[RowLock, Serializable], table="serial"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]


class SerialLease(Inbox[Lease, Serializable], table="serial"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class SerialGrouped(Inbox[RowLock, Serializable], table="serial"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]


def test_mysql_refuses_a_row_lock_fifo_table_at_serializable() -> None:
    with pytest.raises(FifoAtSerializable) as caught:
        build_plan(MY, spec_of(SerialLock))
    assert isinstance(caught.value, UnsupportedOpening)
    assert str(caught.value) == (
        "serial (SerialLock): a FIFO group's guard counts its rows without locking them, which "
        "MySQL and MariaDB do not do at SERIALIZABLE, found a row lock FIFO table at "
        "Serializable (the guard would wait for every delivery in work to settle); declare "
        "Inbox[RowLock, ReadCommitted] (or leave the opening out), or use Inbox[Lease]"
    )


def test_serializable_fifo_is_served_elsewhere() -> None:
    # MySQL's lease claim runs at READ COMMITTED whatever the table declares; PostgreSQL's
    # guard is an advisory lock; a group without fifo has no guard.
    assert build_plan(MY, spec_of(SerialLease)).guard is not None
    assert build_plan(PG, spec_of(SerialLock)).guard is not None
    assert build_plan(MY, spec_of(SerialGrouped)).guard is None


def test_the_claim_index_serves_the_head_select() -> None:
    # The head's select: the group by equality, then the group's order, as the index has it.
    columns = [c.column for c in claim_index_columns(spec_of(FifoLock))]
    assert columns == ["account", "priority", "id"]
    assert PG.fifo_order(spec_of(FifoLock)) == '"priority", "id"'
    columns = [c.column for c in claim_index_columns(spec_of(FifoBehind))]
    assert columns == ["account", "priority", "retry_after", "id"]
    # A table without FIFO groups keeps the claim's order.
    assert [c.column for c in claim_index_columns(spec_of(Grouped))] == ["account", "id"]


# -- delayed rows that move behind ------------------------------------------------------------


class FifoBehind(Inbox[RowLock], table="ledger"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True, delayed_rows_move_behind=True)]
    priority: Annotated[int, Priority()]
    retry_after: Annotated[datetime, RetryAfter()]
    payload: Annotated[bytes, Payload()]


def test_a_fifo_group_orders_by_priority_then_id_and_by_due_time_only_when_asked() -> None:
    assert not spec_of(FifoLock).delayed_rows_move_behind
    assert spec_of(FifoBehind).delayed_rows_move_behind
    (claim,) = build_plan(PG, spec_of(FifoBehind)).claim
    assert claim.sql == (
        'SELECT "id", "account", "priority", "retry_after", "payload" FROM "ledger" WHERE "id" '
        '= (SELECT "id" FROM "ledger" WHERE "account" = $1 ORDER BY "priority", "retry_after", '
        '"id" LIMIT 1) AND "account" = $1 AND "retry_after" <= $2 FOR UPDATE SKIP LOCKED'
    )
    assert MY.fifo_order(spec_of(FifoBehind)) == MY.order_by(spec_of(FifoBehind))


def test_delayed_rows_move_behind_needs_a_fifo_group_and_a_retry_after() -> None:
    with pytest.raises(DeclarationError) as caught:

        class NotFifo(Inbox[RowLock], table="ledger"):
            id: Annotated[int, Id(generated=True)]
            account: Annotated[str, Group(delayed_rows_move_behind=True)]
            retry_after: Annotated[datetime, RetryAfter()]

    assert str(caught.value) == (
        "class test_delayed_rows_move_behind_needs_a_fifo_group_and_a_retry_after.<locals>."
        "NotFifo: delayed_rows_move_behind orders the rows of a FIFO group, found "
        "Group(delayed_rows_move_behind=True) on 'account' without fifo=True; declare "
        "Group(fifo=True, delayed_rows_move_behind=True), or drop it"
    )
    with pytest.raises(DeclarationError) as caught:

        class Undated(Inbox[Lease], table="ledger"):
            id: Annotated[int, Id(generated=True)]
            account: Annotated[str, Group(fifo=True, delayed_rows_move_behind=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]

    assert str(caught.value).endswith(
        "Undated: delayed_rows_move_behind orders a FIFO group by each row's due time, its "
        "RetryAfter field, found none; add one, like retry_after: Annotated[datetime, "
        "RetryAfter()], or drop delayed_rows_move_behind=True"
    )


def test_the_manual_spec_moves_delayed_rows_behind() -> None:
    spec = (
        InboxSpec("ledger", "id")
        .group("account", fifo=True, delayed_rows_move_behind=True)
        .retry_after("retry_after")
        .lease("locked_until")
    )

    class Manual(Inbox[Lease], spec=spec):
        id: int
        account: str
        retry_after: datetime
        locked_until: datetime | None

    assert spec_of(Manual).fifo
    assert spec_of(Manual).delayed_rows_move_behind
    plain = InboxSpec("ledger", "id").group("account", fifo=True).lease("locked_until")

    class Plain(Inbox[Lease], spec=plain):
        id: int
        account: str
        locked_until: datetime | None

    assert not spec_of(Plain).delayed_rows_move_behind


# -- every group of the table ----------------------------------------------------------------


def test_over_every_group_the_heads_are_read_then_claimed_as_a_group_s() -> None:
    """Servers: the groups whose head is due, in the order of their heads, then each head by
    the claim and guard of a subscription to its group."""
    one = build_plan(PG, spec_of(FifoLock))
    st = build_plan(PG, spec_of(FifoLock), every_group=True)
    assert (st.claim, st.guard) == (one.claim, one.guard)
    assert one.heads is None
    assert st.heads is not None
    assert st.heads.sql == (
        'SELECT __head."account" FROM (SELECT DISTINCT "account" AS __group FROM '
        '"bank"."ledger") AS __groups JOIN "bank"."ledger" AS __head ON __head."id" = (SELECT '
        '__first."id" FROM "bank"."ledger" AS __first WHERE __first."account" = __groups.__group '
        'ORDER BY __first."priority", __first."id" LIMIT 1) WHERE __head."retry_after" <= $1 '
        'ORDER BY __head."priority", __head."id" LIMIT $2'
    )
    assert st.heads.params == ("now", "limit")
    assert st.heads in st.all()


def test_over_every_group_a_lease_head_is_read_while_no_row_of_its_group_is_in_work() -> None:
    st = build_plan(MY, spec_of(FifoLease), every_group=True)
    assert st.claim == build_plan(MY, spec_of(FifoLease)).claim
    assert st.heads is not None
    assert st.heads.sql == (
        "SELECT __head.`account` FROM (SELECT DISTINCT `account` AS __group FROM `ledger` WHERE "
        "`processed_at` IS NULL) AS __groups JOIN `ledger` AS __head ON __head.`id` = (SELECT "
        "__first.`id` FROM `ledger` AS __first WHERE __first.`account` = __groups.__group AND "
        "__first.`processed_at` IS NULL ORDER BY __first.`id` LIMIT 1) WHERE "
        "__head.`retry_after` <= %s AND NOT EXISTS (SELECT 1 FROM `ledger` AS __work WHERE "
        "__work.`account` = __groups.__group AND __work.`locked_until` > %s) ORDER BY "
        "__head.`id` LIMIT %s"
    )


def test_sqlite_claims_the_heads_of_every_group_in_one_statement() -> None:
    st = build_plan(LITE, spec_of(FifoLease), every_group=True)
    assert st.heads is None
    assert st.guard is None
    (claim,) = st.claim
    assert claim.sql == (
        "UPDATE `ledger` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (SELECT "
        "__head.`id` FROM (SELECT DISTINCT `account` AS __group FROM `ledger` WHERE "
        "`processed_at` IS NULL) AS __groups JOIN `ledger` AS __head ON __head.`id` = (SELECT "
        "__first.`id` FROM `ledger` AS __first WHERE __first.`account` = __groups.__group AND "
        "__first.`processed_at` IS NULL ORDER BY __first.`id` LIMIT 1) WHERE "
        "__head.`retry_after` <= ? AND NOT EXISTS (SELECT 1 FROM `ledger` AS __work WHERE "
        "__work.`account` = __groups.__group AND __work.`locked_until` > ?) ORDER BY "
        "__head.`id` LIMIT ?) RETURNING `id`, `account`, `retry_after`, `attempt` - 1 AS "
        "`attempt`, `locked_until`, `processed_at`, `payload`"
    )
    assert claim.params == ("lease", "now", "now", "limit")


def test_over_every_group_the_dead_letter_group_is_passed_over() -> None:
    dest = DeadLetter(group="it's dead")
    st = build_plan(PG, spec_of(FifoLock), dest, every_group=True)
    assert st.heads is not None
    assert 'FROM "bank"."ledger" WHERE "account" <> \'it\'\'s dead\') AS __groups' in st.heads.sql
    (claim,) = build_plan(LITE, spec_of(FifoLease), dest, every_group=True).claim
    assert "`processed_at` IS NULL AND `account` <> 'it''s dead') AS __groups" in claim.sql


def test_every_group_serves_a_fifo_table_only() -> None:
    assert InboxQueue(FifoLease, "ledger").every_group().serves_every_group
    assert InboxQueue(FifoLease, "ledger").every_group().group is None
    assert InboxQueue(FifoLease, "acct").group == "acct"
    with pytest.raises(DeclarationError) as caught:
        InboxQueue(Grouped, "ledger").every_group()
    assert str(caught.value) == (
        "grouped (Grouped): .every_group() serves every group of a FIFO table, found a Group "
        "field without fifo=True; declare Group(fifo=True), or drop .every_group() (a "
        "subscription names one group of a table with groups, and serves a table without them "
        "whole)"
    )

    class Plain(Inbox[Lease], table="plain"):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]

    with pytest.raises(DeclarationError, match="found no Group field; declare Group"):
        InboxQueue(Plain, "plain").every_group()
