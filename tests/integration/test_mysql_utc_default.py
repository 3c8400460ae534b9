"""MySQL/MariaDB: a generated RetryAfter defaults to the UTC now, whoever writes the row (issue
17, item 8). ``CURRENT_TIMESTAMP(6)`` in a DATETIME is the writing session's local time: a
row inserted from a session at +05:00 fell due five hours late, one from -05:00 five hours
early, ahead of the rows queued before it in a FIFO group. The table ``create_tables`` makes
defaults to ``UTC_TIMESTAMP(6)``; a table an older version made (``CURRENT_TIMESTAMP``) is
served as it is, with a startup warning that names the column and the ALTER TABLE that fixes
it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pymysql
import pytest
import trio

from trinbox import (
    Attempt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    SqlBroker,
    subscriber,
)
from trinbox._drivers.aio import asyncio_loop
from trinbox.schema import ddl
from trinbox.testing import settled

from .serving import make_app, serving
from .stands import MariaStand, fresh_stand

TABLE = "utc_ledger"


class Ledger(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Entry:
    n: int


# The sessions of the rows 1 to 4, in the order they are written.
ZONES = ("+05:00", "-05:00", "+05:00", "-05:00")


def insert_from_session(stand: MariaStand, zone: str, n: int) -> None:
    """One row written by another client, from a session at ``zone``, leaving the due time
    to the column's default."""
    conn = pymysql.connect(**stand._args)  # type: ignore[arg-type]
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = %s", (zone,))
            cur.execute(
                f"INSERT INTO {TABLE} (account, payload) VALUES ('acct', %s)",
                (json.dumps({"n": n}).encode(),),
            )
    finally:
        conn.close()


def seconds_due_before_now(stand: MariaStand) -> list[float]:
    """How long ago each row fell due, by the server's UTC clock (negative: not due yet)."""
    rows = stand.rows(
        f"SELECT TIMESTAMPDIFF(MICROSECOND, retry_after, UTC_TIMESTAMP(6)) FROM {TABLE} ORDER BY id"
    )
    return [int(micros) / 1e6 for (micros,) in rows]


async def serve_in_order(stand: MariaStand, count: int) -> list[int]:
    """Serve the FIFO group until ``count`` rows are handled; the order they ran in."""
    handled: list[int] = []

    @subscriber(InboxQueue(Ledger, "acct"))
    async def book(entry: Entry) -> HandlerOutcome:
        handled.append(entry.n)
        return HandlerOutcome.ack()

    broker = SqlBroker.mysql(stand.url, poll_interval=0.05)  # the server's clock
    app = make_app()
    app.include(broker, book)
    async with serving(app):
        # Real time: the server's clock decides what is due.
        with trio.fail_after(30):
            await settled(app, book, count)
    return handled


async def create_tables(stand: MariaStand) -> None:
    async with asyncio_loop(True):
        broker = SqlBroker.mysql(stand.url)
        await broker.open()
        try:
            await broker.create_tables(Ledger)
        finally:
            await broker.aclose()


@pytest.fixture
def maria(tmp_path: Path) -> Any:
    with fresh_stand("mariadb", tmp_path) as stand:
        assert isinstance(stand, MariaStand)
        yield stand


async def test_rows_written_from_any_time_zone_are_due_at_once_and_in_order(
    maria: MariaStand, caplog: pytest.LogCaptureFixture
) -> None:
    await create_tables(maria)
    for n, zone in enumerate(ZONES, start=1):
        insert_from_session(maria, zone, n)
    ages = seconds_due_before_now(maria)
    # Due when written, by the UTC clock: not five hours early or late.
    assert all(0 <= age < 60 for age in ages), ages
    assert ages == sorted(ages, reverse=True)  # in the order written
    caplog.set_level(logging.WARNING, logger="trinbox")
    assert await serve_in_order(maria, len(ZONES)) == [1, 2, 3, 4]
    assert not [r for r in caplog.records if "RetryAfter column" in r.getMessage()]


async def test_a_table_with_the_old_local_default_is_served_with_a_warning_and_its_fix(
    maria: MariaStand, caplog: pytest.LogCaptureFixture
) -> None:
    # The table as trinbox made it before: DEFAULT CURRENT_TIMESTAMP(6).
    (create,) = ddl(Ledger, "mysql")
    old = create.replace("(UTC_TIMESTAMP(6))", "CURRENT_TIMESTAMP(6)")
    assert old != create
    maria.script(old)
    caplog.set_level(logging.WARNING, logger="trinbox")
    insert_from_session(maria, "+00:00", 1)
    assert await serve_in_order(maria, 1) == [1]
    (warning,) = [r.getMessage() for r in caplog.records if "RetryAfter column" in r.getMessage()]
    assert (
        f"the RetryAfter column of {TABLE} (Ledger) is due at UTC times, found column "
        "'retry_after' of type datetime(6) with DEFAULT current_timestamp(6), which the server "
        "fills in the writing session's time zone: a row inserted relying on it from a "
        "session not at +00:00 falls due that many hours early or late (trinbox's own "
        "sessions run at +00:00); make it UTC: ALTER TABLE `utc_ledger` MODIFY `retry_after` "
        "DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))"
    ) in warning
    # The fix the warning gives, run as it is: rows from any zone are due when written.
    maria.execute(warning[warning.index("ALTER TABLE") :])
    maria.execute(f"DELETE FROM {TABLE}")
    for n, zone in enumerate(ZONES, start=1):
        insert_from_session(maria, zone, n)
    assert all(0 <= age < 60 for age in seconds_due_before_now(maria))
    caplog.clear()
    assert await serve_in_order(maria, len(ZONES)) == [1, 2, 3, 4]
    assert not [r for r in caplog.records if "RetryAfter column" in r.getMessage()]
