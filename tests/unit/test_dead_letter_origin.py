"""Golden tests of a dead letter group's OriginGroup (``OriginGroup()``): the move into the group
writes the row's group first, and the statements of ``trinbox dead-letters`` pick a queue's own
dead letters by it, per dialect; the deliveries a dead letter reports, per way of counting.
Each statement also runs on the three databases (tests/integration/cli/test_dead_letters.py,
tests/integration/matrix/test_dead_letter_origin.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import pytest

from trinbox import (
    Attempt,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RowLock,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects import _inspect as sql
from trinbox._dialects._base import DeadLetter, Dialect
from trinbox._dialects._statement import Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()
DEAD = DeadLetter(group="acct_dead")


class Posting(Inbox[Lease], table="postings"):
    """Lease, grouped by account, a dead letter's group of origin kept in ``dead_from``."""

    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class LockedPosting(Inbox[RowLock], table="postings"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


def test_the_move_into_a_dead_letter_group_keeps_the_group_first() -> None:
    # The origin is assigned before the group: MySQL assigns left to right, each assignment
    # reading the values set before it.
    assert build_plan(PG, spec_of(Posting), DEAD).dead_letter == (
        Statement(
            "dead_letter",
            'UPDATE "postings" SET "dead_from" = "account", "account" = $1, '
            '"locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3',
            ("dest", "id", "token"),
        ),
    )
    assert build_plan(MY, spec_of(LockedPosting), DEAD).dead_letter == (
        Statement(
            "dead_letter",
            "UPDATE `postings` SET `dead_from` = `account`, `account` = %s WHERE `id` = %s",
            ("dest", "id"),
        ),
    )
    assert build_plan(LITE, spec_of(Posting), DEAD).dead_letter[0].sql == (
        "UPDATE `postings` SET `dead_from` = `account`, `account` = ?, `locked_until` = NULL "
        "WHERE `id` = ? AND `locked_until` = ?"
    )
    assert build_plan(PG, spec_of(LockedPosting), DEAD, count_at_claim=True).dead_letter == (
        build_plan(PG, spec_of(LockedPosting), DEAD).dead_letter
    )


def test_the_publish_leaves_the_origin_out() -> None:
    assert build_plan(PG, spec_of(Posting), DEAD).insert == Statement(
        "insert",
        'INSERT INTO "postings" ("account", "attempt", "locked_until", "processed_at", '
        '"payload") VALUES ($1, $2, $3, $4, $5)',
        ("account", "attempt", "locked_until", "processed_at", "payload"),
    )


def test_a_queues_dead_letters_are_those_from_its_group() -> None:
    spec = spec_of(Posting)
    assert sql.count_rows(PG, spec, DEAD) == Statement(
        "dead_count",
        'SELECT COUNT(*) FROM "postings" WHERE "account" = $1 AND "dead_from" = $2 AND '
        '"processed_at" IS NULL',
        ("dest", "origin"),
    )
    assert sql.list_dead(MY, spec, DEAD) == Statement(
        "dead_list",
        "SELECT `id`, `account`, `dead_from`, `attempt`, `locked_until`, `processed_at`, "
        "`payload` FROM `postings` WHERE `account` = %s AND `dead_from` = %s AND "
        "`processed_at` IS NULL ORDER BY `id` LIMIT %s",
        ("dest", "origin", "limit"),
    )
    assert sql.dead_ids(LITE, spec, DEAD, 2) == Statement(
        "dead_ids",
        "SELECT `id` FROM `postings` WHERE `account` = ? AND `dead_from` = ? AND "
        "`processed_at` IS NULL AND `id` IN (?, ?) ORDER BY `id`",
        ("dest", "origin", "i0", "i1"),
    )
    # The ids asked for that are another queue's: every origin, read back.
    assert sql.dead_origins(PG, spec, DEAD, 2) == Statement(
        "dead_origins",
        'SELECT "id", "dead_from" FROM "postings" WHERE "account" = $1 AND '
        '"processed_at" IS NULL AND "id" IN ($2, $3) ORDER BY "id"',
        ("dest", "i0", "i1"),
    )


@pytest.mark.parametrize("dialect", [PG, MY, LITE], ids=lambda d: d.name)
def test_a_redrive_moves_only_its_queues_rows_and_clears_the_origin(dialect: Dialect) -> None:
    (update,) = sql.redrive(dialect, spec_of(Posting), DEAD, 1)
    assert update.params == ("group", "dest", "origin", "i0")
    q = dialect.quoted
    assert update.sql.startswith(
        f"UPDATE {q('postings')} SET {q('account')} = {_slot(dialect, 1)}, "
        f"{q('dead_from')} = NULL, {q('attempt')} = 1, "
    )
    assert update.sql.endswith(
        f" WHERE {q('account')} = {_slot(dialect, 2)} AND {q('dead_from')} = "
        f"{_slot(dialect, 3)} AND {q('processed_at')} IS NULL AND {q('id')} IN "
        f"({_slot(dialect, 4)})"
    )


def _slot(dialect: Dialect, n: int) -> str:
    return {"dollar": f"${n}", "format": "%s", "qmark": "?"}[dialect.style]


def test_deliveries_of_a_dead_letter_by_how_its_attempt_was_counted() -> None:
    # Counted when a failed delivery settles (the row lock form), the column is the
    # deliveries; counted at the claim (lease, advisory, and the row lock form's
    # count_attempt_at_claim()), it reads one ahead.
    locked, leased = spec_of(LockedPosting), spec_of(Posting)
    assert sql.deliveries_made(locked, 3) == 3
    assert sql.deliveries_made(locked, 4, counted_at_claim=True) == 3
    assert sql.deliveries_made(leased, 4) == 3
    assert sql.deliveries_made(leased, 0) == 0
