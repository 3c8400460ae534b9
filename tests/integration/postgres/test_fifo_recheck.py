"""A FIFO head claim checks again what it claims (PostgreSQL, READ COMMITTED).

A claim's head select reads its statement's snapshot; a row that another transaction changed
and committed after that snapshot is then locked as it is now, and only the claim's outer
conditions are checked again on it. Here the race is made certain: the table is a view whose
condition waits on an advisory lock the test holds, so the claim takes its snapshot and then
waits; meanwhile the head is acked (its lease had lapsed) or moved to the dead letter group,
and committed; then the claim goes on. It must take nothing: the row is no longer an
unfinished row of the group.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest

from trinbox import (
    Attempt,
    Group,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._statement import Statement
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect

from ..stands import PostgresStand, fresh_stand

GATE = 4242  # the advisory lock the view's condition waits on
NOW = datetime(2030, 1, 1, tzinfo=UTC)
WAIT = 10.0  # seconds: the claim reaches the gate, or the test fails


class HeadLease(Inbox[Lease], table="ledger"):
    id: Annotated[int, Id()]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class HeadLock(Inbox[RowLock], table="ledger"):
    id: Annotated[int, Id()]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: datetime | None  # a data column here: the base table is shared
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


SCHEMA = f"""
CREATE TABLE ledger_base (
    id BIGINT PRIMARY KEY, account TEXT NOT NULL, retry_after TIMESTAMPTZ NOT NULL,
    attempt INTEGER NOT NULL, locked_until TIMESTAMPTZ, processed_at TIMESTAMPTZ,
    payload BYTEA NOT NULL);
CREATE FUNCTION gate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_lock_shared({GATE});
    PERFORM pg_advisory_unlock_shared({GATE});
    RETURN true;
END $$;
CREATE VIEW ledger AS SELECT * FROM ledger_base WHERE gate()
"""

# What another transaction commits while the claim waits at the gate: the head's ack (its
# lease had lapsed, so it looks free), or its move to the dead letter group.
MEANWHILE = {
    "acked": "UPDATE ledger_base SET processed_at = now(), locked_until = NULL WHERE id = 1",
    "dead-lettered": "UPDATE ledger_base SET account = 'acct_dead', locked_until = NULL "
    "WHERE id = 1",
}


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as found:
        assert isinstance(found, PostgresStand)
        found.script(SCHEMA)
        # Row 1, the head, was claimed and its lease has lapsed; row 2 waits behind it.
        found.execute(
            "INSERT INTO ledger_base VALUES (1, 'acct', ?, 2, ?, NULL, 'x'), "
            "(2, 'acct', ?, 1, NULL, NULL, 'y')",
            NOW - timedelta(hours=1),
            NOW - timedelta(seconds=5),
            NOW - timedelta(hours=1),
        )
        yield found


def _by_name(statement: Statement) -> str:
    """The statement with psycopg's named placeholders for PostgreSQL's ``$n``."""
    return re.sub(r"\$(\d+)", lambda m: f"%({statement.params[int(m[1]) - 1]})s", statement.sql)


def _waiting_at_gate(conn: psycopg.Connection[Any]) -> bool:
    sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    found = conn.execute(sql).fetchone()
    return found is not None and found[0] > 0


@pytest.mark.parametrize("meanwhile", list(MEANWHILE))
@pytest.mark.parametrize("row", [HeadLease, HeadLock], ids=["lease", "row_lock"])
def test_a_head_changed_while_the_claim_locks_it_is_not_claimed(
    stand: PostgresStand, row: type[Inbox[Any, Any]], meanwhile: str
) -> None:
    (claim,) = build_plan(PostgresDialect(), spec_of(row)).claim
    values = {"group": "acct", "now": NOW, "lease": NOW + timedelta(seconds=30)}
    taken: list[tuple[Any, ...]] = []
    errors: list[BaseException] = []

    def run_claim() -> None:
        try:
            with psycopg.connect(stand.url) as conn:  # one READ COMMITTED transaction
                taken.extend(conn.execute(_by_name(claim), values).fetchall())
        except BaseException as exc:
            errors.append(exc)

    with psycopg.connect(stand.url, autocommit=True) as test:
        test.execute(f"SELECT pg_advisory_lock({GATE})")
        claimer = threading.Thread(target=run_claim)
        claimer.start()
        try:
            # The claim runs on another connection: poll the server (bounded) until it waits.
            deadline = time.monotonic() + WAIT
            while not _waiting_at_gate(test):
                assert time.monotonic() < deadline, "the claim never reached the gate"
                time.sleep(0.01)
            test.execute(MEANWHILE[meanwhile])
        finally:
            test.execute(f"SELECT pg_advisory_unlock({GATE})")
            claimer.join(WAIT)
    assert not claimer.is_alive()
    assert errors == []
    assert taken == []
    # The lease form stamped nothing either: the row is as the other transaction left it.
    assert stand.rows("SELECT id, attempt, locked_until FROM ledger_base ORDER BY id") == [
        (1, 2, None),
        (2, 1, None),
    ]
