"""The startup check reads the role columns' types, not only their names (issue 9, item 5):
a column that prepares but cannot play its role stops serve with a ``SchemaError`` naming the
column, the type found and the fix; the tables that work still serve.

Each defect here was seen serving before the check: a ``locked_until`` of type DATE held no
lease (one row delivered again and again), INT failed every claim, PostgreSQL TIMESTAMP
(without time zone) failed every claim and publish, ``DEFAULT 0`` on the attempt gave one
delivery more than ``max_attempts``.

SQLite's declared types are advisory outside a STRICT table and trinbox writes times as text
that no affinity converts, so a SQLite ``locked_until`` of INT, DATE or DATETIME serves (and its
lease holds); its STRICT tables hold their types and are checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Attempt,
    Column,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    RetryAfter,
    SchemaError,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._base import DeadLetter
from trinbox._dialects.plans import build_plan
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from ..stands import Stand, StandName, fresh_stand
from .kit import where


@dataclass
class Job:
    n: int


class TypedJob(Inbox[Lease], table="typed_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


class CountedJob(Inbox[Lease], table="typed_jobs"):
    """The publish leaves the attempt to the database's default."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    retry_after: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


COLUMNS = ("id", "attempt", "retry_after", "locked_until", "processed_at", "payload")

# Columns that work, per stand; a case replaces one of them.
GOOD: dict[StandName, dict[str, str]] = {
    "sqlite": {
        "id": "INTEGER PRIMARY KEY",
        "attempt": "INTEGER NOT NULL DEFAULT 1",
        "retry_after": "TEXT NOT NULL",
        "locked_until": "TEXT",
        "processed_at": "TEXT",
        "payload": "BLOB",
    },
    "postgres": {
        "id": "BIGSERIAL PRIMARY KEY",
        "attempt": "INT NOT NULL DEFAULT 1",
        "retry_after": "TIMESTAMPTZ NOT NULL DEFAULT now()",
        "locked_until": "TIMESTAMPTZ",
        "processed_at": "TIMESTAMPTZ",
        "payload": "BYTEA",
    },
    "mariadb": {
        "id": "BIGINT AUTO_INCREMENT PRIMARY KEY",
        "attempt": "INT NOT NULL DEFAULT 1",
        "retry_after": "DATETIME(6) NOT NULL",
        "locked_until": "DATETIME",
        "processed_at": "DATETIME(6)",
        "payload": "LONGBLOB",
    },
}


@pytest.fixture
def make_table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``make_table(stand_name, column=type, ..., strict=False)``: a fresh database of that
    stand with ``typed_jobs`` created, the named columns declared as given."""
    stands: list[Any] = []

    def make(name: StandName, *, strict: bool = False, **declared: str) -> Stand:
        context = fresh_stand(name, tmp_path)
        stand = context.__enter__()
        stands.append(context)
        types = {**GOOD[name], **declared}
        if strict:  # a STRICT table takes only INT, INTEGER, REAL, TEXT, BLOB and ANY
            types = {**types, "locked_until": declared.get("locked_until", "TEXT")}
        body = ", ".join(f"{col} {types[col]}" for col in COLUMNS)
        tail = " STRICT" if strict else " ENGINE=InnoDB" if name == "mariadb" else ""
        stand.script(f"CREATE TABLE typed_jobs ({body}){tail}")
        return stand

    yield make
    for context in reversed(stands):
        context.__exit__(None, None, None)


async def refusal(stand: Stand, row: type[Inbox[Any, Any]] = TypedJob) -> tuple[str, Any]:
    """Serve a subscription to ``row`` on ``stand``: the SchemaError it stops with, and the
    handler (for the message's subscription name)."""
    broker = stand.broker(poll_interval=3600)

    @subscriber(InboxQueue(row, "typed"))
    async def handle(job: Job) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, handle)
    with trio.fail_after(10), pytest.raises(SchemaError) as caught:
        await app.serve()
    assert caught.value.table == spec_of(row).qualified_name
    assert caught.value.statement == broker.dialect.columns_query(spec_of(row)).sql
    return str(caught.value), handle


PG_TIME = "on PostgreSQL a timestamp with time zone (timestamptz)"
MY_TIME = (
    "on MySQL and MariaDB a DATETIME or TIMESTAMP (whole seconds hold the lease token; "
    "DATETIME(6) keeps the fractions of the other times)"
)
DEFAULT_RULE = (
    "the Attempt column of typed_jobs (TypedJob) counts a row's first delivery as attempt 1, "
    "so a row inserted without it takes DEFAULT 1"
)
RECREATE = "(SQLite changes a column's declaration by recreating its table)"

# (stand, column, declared type, strict, message after "<subscription>: ")
REFUSED: list[tuple[StandName, str, str, bool, str]] = [
    (
        "postgres",
        "locked_until",
        "DATE",
        False,
        f"the LockedUntil column of typed_jobs (TypedJob) holds a time, {PG_TIME}, found "
        "column 'locked_until' of type date; change its type: ALTER TABLE \"typed_jobs\" "
        'ALTER COLUMN "locked_until" TYPE timestamptz',
    ),
    (
        "postgres",
        "locked_until",
        "INT",
        False,
        f"the LockedUntil column of typed_jobs (TypedJob) holds a time, {PG_TIME}, found "
        "column 'locked_until' of type integer; change its type: ALTER TABLE \"typed_jobs\" "
        'ALTER COLUMN "locked_until" TYPE timestamptz',
    ),
    (
        "postgres",
        "locked_until",
        "TIMESTAMP",
        False,
        f"the LockedUntil column of typed_jobs (TypedJob) holds a time, {PG_TIME}, found "
        "column 'locked_until' of type timestamp without time zone; change its type: ALTER "
        'TABLE "typed_jobs" ALTER COLUMN "locked_until" TYPE timestamptz',
    ),
    (
        "postgres",
        "retry_after",
        "TIMESTAMP NOT NULL DEFAULT now()",
        False,
        f"the RetryAfter column of typed_jobs (TypedJob) holds a time, {PG_TIME}, found "
        "column 'retry_after' of type timestamp without time zone; change its type: ALTER "
        'TABLE "typed_jobs" ALTER COLUMN "retry_after" TYPE timestamptz',
    ),
    (
        "postgres",
        "processed_at",
        "TIMESTAMP",
        False,
        f"the ProcessedAt column of typed_jobs (TypedJob) holds a time, {PG_TIME}, found "
        "column 'processed_at' of type timestamp without time zone; change its type: ALTER "
        'TABLE "typed_jobs" ALTER COLUMN "processed_at" TYPE timestamptz',
    ),
    (
        "postgres",
        "attempt",
        "INT NOT NULL DEFAULT 0",
        False,
        f"{DEFAULT_RULE}, found column 'attempt' with DEFAULT 0 (max_attempts would count "
        'from 0); set it: ALTER TABLE "typed_jobs" ALTER COLUMN "attempt" SET DEFAULT 1',
    ),
    (
        "postgres",
        "attempt",
        "NUMERIC NOT NULL DEFAULT 1",
        False,
        "the Attempt column of typed_jobs (TypedJob) counts deliveries, on PostgreSQL an "
        "integer type (smallint, integer or bigint), found column 'attempt' of type numeric; "
        'change its type: ALTER TABLE "typed_jobs" ALTER COLUMN "attempt" TYPE integer',
    ),
    (
        "postgres",
        "payload",
        "TEXT",
        False,
        "the Payload column of typed_jobs (TypedJob) holds the message's bytes, on "
        "PostgreSQL bytea, found column 'payload' of type text; change its type: ALTER TABLE "
        '"typed_jobs" ALTER COLUMN "payload" TYPE bytea',
    ),
    (
        "postgres",
        "locked_until",
        "TIMESTAMPTZ NOT NULL DEFAULT now()",
        False,
        "the LockedUntil column of typed_jobs (TypedJob) is NULL while the row is free (a "
        "release and a settlement write NULL), found column 'locked_until' NOT NULL; allow "
        'NULL: ALTER TABLE "typed_jobs" ALTER COLUMN "locked_until" DROP NOT NULL',
    ),
    (
        "mariadb",
        "locked_until",
        "DATE",
        False,
        f"the LockedUntil column of typed_jobs (TypedJob) holds a time, {MY_TIME}, found "
        "column 'locked_until' of type date; change its type: ALTER TABLE `typed_jobs` "
        "MODIFY `locked_until` DATETIME(6) NULL",
    ),
    (
        "mariadb",
        "locked_until",
        "INT",
        False,
        f"the LockedUntil column of typed_jobs (TypedJob) holds a time, {MY_TIME}, found "
        "column 'locked_until' of type int(11); change its type: ALTER TABLE `typed_jobs` "
        "MODIFY `locked_until` DATETIME(6) NULL",
    ),
    (
        "mariadb",
        "retry_after",
        "DATE NOT NULL",
        False,
        f"the RetryAfter column of typed_jobs (TypedJob) holds a time, {MY_TIME}, found "
        "column 'retry_after' of type date; change its type: ALTER TABLE `typed_jobs` "
        "MODIFY `retry_after` DATETIME(6) NOT NULL",
    ),
    (
        "mariadb",
        "processed_at",
        "TIMESTAMP(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6)",
        False,
        "the ProcessedAt column of typed_jobs (TypedJob) is written by trinbox alone, found "
        "column 'processed_at' ON UPDATE CURRENT_TIMESTAMP (every change to the row would "
        "rewrite it); change its type: ALTER TABLE `typed_jobs` MODIFY `processed_at` "
        "TIMESTAMP(6) NULL",
    ),
    (
        "mariadb",
        "attempt",
        "INT NOT NULL DEFAULT 0",
        False,
        f"{DEFAULT_RULE}, found column 'attempt' with DEFAULT 0 (max_attempts would count "
        "from 0); set it: ALTER TABLE `typed_jobs` ALTER COLUMN `attempt` SET DEFAULT 1",
    ),
    (
        "mariadb",
        "attempt",
        "VARCHAR(10) NOT NULL DEFAULT '1'",
        False,
        "the Attempt column of typed_jobs (TypedJob) counts deliveries, on MySQL and MariaDB "
        "an integer type (TINYINT to BIGINT), found column 'attempt' of type varchar(10); "
        "change its type: ALTER TABLE `typed_jobs` MODIFY `attempt` INT NOT NULL",
    ),
    (
        "mariadb",
        "payload",
        "TEXT",
        False,
        "the Payload column of typed_jobs (TypedJob) holds the message's bytes, on MySQL and "
        "MariaDB a BLOB type or VARBINARY (BINARY pads it with zero bytes), found column "
        "'payload' of type text; change its type: ALTER TABLE `typed_jobs` MODIFY `payload` "
        "LONGBLOB NULL",
    ),
    (
        "mariadb",
        "locked_until",
        "DATETIME NOT NULL DEFAULT '2000-01-01 00:00:00'",
        False,
        "the LockedUntil column of typed_jobs (TypedJob) is NULL while the row is free (a "
        "release and a settlement write NULL), found column 'locked_until' NOT NULL; allow "
        "NULL: ALTER TABLE `typed_jobs` MODIFY `locked_until` DATETIME NULL",
    ),
    (
        "sqlite",
        "attempt",
        "INTEGER NOT NULL DEFAULT 0",
        False,
        f"{DEFAULT_RULE}, found column 'attempt' with DEFAULT 0 (max_attempts would count "
        f"from 0); declare `attempt` INTEGER NOT NULL DEFAULT 1 {RECREATE}",
    ),
    (
        "sqlite",
        "attempt",
        "TEXT NOT NULL DEFAULT 1",
        False,
        "the Attempt column of typed_jobs (TypedJob) counts deliveries, on SQLite a declared "
        "type of INTEGER or NUMERIC affinity, or none (in a STRICT table INT, INTEGER or ANY), "
        f"found column 'attempt' of type TEXT; declare `attempt` INTEGER {RECREATE}",
    ),
    (
        "sqlite",
        "id",
        "INT PRIMARY KEY",
        False,
        "the Id column of typed_jobs (TypedJob) is generated by the database, which SQLite "
        "does for the rowid (a column declared INTEGER PRIMARY KEY), found column 'id' of "
        "type INT that is not the rowid and has no default (an insert leaves it NULL); "
        f"declare `id` INTEGER PRIMARY KEY {RECREATE}",
    ),
    (
        "sqlite",
        "locked_until",
        "INT",
        True,
        "the LockedUntil column of typed_jobs (TypedJob) holds a time, in a STRICT SQLite "
        "table TEXT or ANY (trinbox writes times as text), found column 'locked_until' of "
        f"type INT; declare `locked_until` TEXT {RECREATE}",
    ),
    (
        "sqlite",
        "payload",
        "TEXT",
        True,
        "the Payload column of typed_jobs (TypedJob) holds the message's bytes, in a STRICT "
        "SQLite table BLOB or ANY, found column 'payload' of type TEXT; declare `payload` "
        f"BLOB {RECREATE}",
    ),
]


@pytest.mark.parametrize(
    ("stand_name", "column", "declared", "strict", "message"),
    REFUSED,
    ids=[f"{s}-{c}-{d.split()[0]}{'-strict' if t else ''}" for s, c, d, t, _ in REFUSED],
)
async def test_a_role_column_of_the_wrong_type_stops_serve(
    make_table: Any, stand_name: StandName, column: str, declared: str, strict: bool, message: str
) -> None:
    stand = make_table(stand_name, strict=strict, **{column: declared})
    found, handle = await refusal(stand)
    assert found == f"{where(handle)}: {message}"


@pytest.mark.parametrize(
    ("stand_name", "fix"),
    [
        ("postgres", 'set it: ALTER TABLE "typed_jobs" ALTER COLUMN "attempt" SET DEFAULT 1'),
        ("mariadb", "set it: ALTER TABLE `typed_jobs` ALTER COLUMN `attempt` SET DEFAULT 1"),
        ("sqlite", f"declare `attempt` INTEGER NOT NULL DEFAULT 1 {RECREATE}"),
    ],
)
async def test_an_attempt_the_publish_leaves_out_needs_its_default(
    make_table: Any, stand_name: StandName, fix: str
) -> None:
    stand = make_table(stand_name, attempt="INT NOT NULL")
    found, handle = await refusal(stand, CountedJob)
    assert found == (
        f"{where(handle)}: the Attempt column of typed_jobs (CountedJob) counts a row's first "
        f"delivery as attempt 1, so a row inserted without it takes DEFAULT 1, found column "
        f"'attempt' with no default, and Attempt(generated=True) leaves it to the database at "
        f"publish; {fix}"
    )


async def test_a_statement_failing_for_another_reason_asks_for_what_the_database_reports(
    make_table: Any,
) -> None:
    # The dead letter table exists with every column, but its payload cannot take the
    # queue's bytes: the move does not prepare, and nothing is missing.
    stand = make_table("postgres")
    stand.script("CREATE TABLE typed_jobs_dead (LIKE typed_jobs)")
    stand.script("ALTER TABLE typed_jobs_dead DROP COLUMN payload, ADD COLUMN payload int")
    broker = stand.broker(poll_interval=3600)

    @subscriber(InboxQueue(TypedJob, "typed"))
    async def handle(job: Job) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, handle).max_attempts(3).dead_letter("typed_jobs_dead")
    dest = DeadLetter(table="typed_jobs_dead")
    (move,) = build_plan(broker.dialect, spec_of(TypedJob), dest).dead_letter
    with trio.fail_after(10), pytest.raises(SchemaError) as caught:
        await app.serve()
    assert str(caught.value) == (
        f"{where(handle)}: every statement of a subscription prepares against the database, "
        f"found dead_letter failing on typed_jobs (TypedJob): DatatypeMismatchError: column "
        f'"payload" is of type integer but expression is of type bytea (hint: You will need to '
        f"rewrite or cast the expression.) (while running: {move.sql}); fix what the database "
        f"reports, so that the statement prepares"
    )
    assert caught.value.statement == move.sql


# Tables that serve: the shared defaults, and types the check accepts that differ from them.
SERVED: list[tuple[StandName, dict[str, str]]] = [
    ("sqlite", {}),
    ("sqlite", {"locked_until": "INT"}),
    ("sqlite", {"locked_until": "DATE", "retry_after": "DATETIME NOT NULL"}),
    ("sqlite", {"locked_until": "", "processed_at": "TIMESTAMP", "attempt": "INT DEFAULT (1)"}),
    ("postgres", {}),
    ("postgres", {"locked_until": "TIMESTAMPTZ(0)", "attempt": "SMALLINT NOT NULL DEFAULT 1"}),
    ("mariadb", {}),
    ("mariadb", {"locked_until": "TIMESTAMP NULL", "retry_after": "DATETIME NOT NULL"}),
    ("mariadb", {"locked_until": "DATETIME(6)", "payload": "VARBINARY(255)"}),
]


@pytest.mark.parametrize(
    ("stand_name", "declared"),
    SERVED,
    ids=[
        f"{s}-{'-'.join(f'{c}={t.split()[0] if t else 0}' for c, t in d.items()) or 'shared'}"
        for s, d in SERVED
    ],
)
async def test_a_table_of_working_types_serves_and_holds_its_lease(
    make_table: Any, clock: VirtualClock, stand_name: StandName, declared: dict[str, str]
) -> None:
    stand = make_table(stand_name, **declared)
    broker = stand.broker(poll_interval=0.5, lease=1)
    calls: list[int] = []

    # A second worker claims every 0.5 s: it would take the row if its lease did not hold.
    @subscriber(InboxQueue(TypedJob, "typed").workers(2))
    async def handle(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
        calls.append(attempt)
        await trio.sleep(2.5)
        return HandlerOutcome.ack()

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        await broker.publish(TypedJob, Job(1))
        with trio.fail_after(60):
            await settled(app, handle, 1)
        assert app.statistics(handle).settle_errors == ()
    assert calls == [1]
    assert stand.value("SELECT COUNT(*) FROM typed_jobs WHERE processed_at IS NOT NULL") == 1


ODD_TABLE = 'it\'s 100%? "odd" `jobs` \\ $1'
ODD_LEASE = 'lock\'ed %s ? "until" `x` \\'


class OddJob(Inbox[Lease], table=ODD_TABLE):
    """Names holding every dialect's quote character, a percent sign, a placeholder of each
    style and a backslash: the catalog read names them as literals."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil(), Column(ODD_LEASE)]
    payload: Annotated[bytes, Payload()]


@pytest.mark.parametrize(
    ("stand_name", "ddl", "found"),
    [
        ("sqlite", "`{t}` (id INTEGER PRIMARY KEY, `{c}` INT, payload BLOB) STRICT", "INT"),
        ("postgres", '"{t}" (id BIGSERIAL PRIMARY KEY, "{c}" DATE, payload BYTEA)', "date"),
        (
            "mariadb",
            "`{t}` (id BIGINT AUTO_INCREMENT PRIMARY KEY, `{c}` DATE, payload LONGBLOB)",
            "date",
        ),
    ],
)
async def test_the_catalog_read_finds_columns_of_any_name(
    tmp_path: Path, stand_name: StandName, ddl: str, found: str
) -> None:
    quote = '"' if stand_name == "postgres" else "`"
    table = ODD_TABLE.replace(quote, quote * 2)
    column = ODD_LEASE.replace(quote, quote * 2)
    with fresh_stand(stand_name, tmp_path) as stand:
        sql = "CREATE TABLE " + ddl.replace("{t}", table).replace("{c}", column)
        stand.script(sql)
        message, _handle = await refusal(stand, OddJob)
    assert f"found column {ODD_LEASE!r} of type {found};" in message
