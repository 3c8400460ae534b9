"""MySQL/MariaDB times in UTC whoever writes the row (issue 17, item 8), the pure parts: the
generated RetryAfter's default is ``(UTC_TIMESTAMP(6))``; ``create_tables`` refuses a MySQL
older than 8.0.13 (no expression defaults) before it runs a statement; the startup check
warns of a DATETIME RetryAfter defaulting to the session's local time, with its fix."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import pytest

from trinbox import Attempt, Id, Inbox, Lease, LockedUntil, RetryAfter
from trinbox._declare._inbox import spec_of
from trinbox._dialects._columns import FoundColumn, column_warnings
from trinbox._dialects.mysql import MySqlDialect
from trinbox.errors import ServerTooOld
from trinbox.schema import ddl

MY = MySqlDialect()


class Due(Inbox[Lease], table="due_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    due: Annotated[datetime, RetryAfter(generated=True)]


class Written(Inbox[Lease], table="written_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    due: Annotated[datetime, RetryAfter()]


def test_the_generated_retry_after_defaults_to_utc_timestamp() -> None:
    (create,) = ddl(Due, "mysql")
    assert "    `due` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n" in create
    assert "CURRENT_TIMESTAMP" not in create


@pytest.mark.parametrize(
    "version", ["8.0.13", "8.4.0-commercial", "9.1.0", "10.6.0-MariaDB", "10.11.19-MariaDB-0"]
)
def test_a_server_with_expression_defaults_takes_the_ddl(version: str) -> None:
    MY.check_ddl_server(ddl(Due, "mysql"), version)


def test_mysql_before_8_0_13_is_refused_before_a_statement_runs() -> None:
    with pytest.raises(ServerTooOld) as caught:
        MY.check_ddl_server(ddl(Due, "mysql"), "8.0.12")
    assert str(caught.value) == (
        "create_tables writes a generated RetryAfter column with DEFAULT (UTC_TIMESTAMP(6)) "
        "(the due time in UTC, whatever the writing session's time zone), an expression "
        "default MySQL takes from 8.0.13 on, found server version '8.0.12'; upgrade the "
        "server to MySQL 8.0.13 or later, or declare RetryAfter() without generated=True "
        "(the publish then writes the due time)"
    )
    assert caught.value.required == "MySQL 8.0.13"
    # A table without the default is created there as before.
    MY.check_ddl_server(ddl(Written, "mysql"), "8.0.12")


def _due(type_: str, default: str | None, *, nullable: bool = False) -> list[FoundColumn]:
    return [
        FoundColumn("id", "bigint(20)", None, nullable=False, generated=True),
        FoundColumn("attempt", "int(11)", "1", nullable=False),
        FoundColumn("locked_until", "datetime(6)", "NULL", nullable=True),
        FoundColumn("due", type_, default, nullable=nullable),
    ]


@pytest.mark.parametrize(
    "default", ["current_timestamp(6)", "CURRENT_TIMESTAMP(6)", "now()", "localtimestamp()"]
)
def test_a_datetime_defaulting_to_the_session_time_is_warned_of_with_its_fix(
    default: str,
) -> None:
    (warning,) = column_warnings(MY, spec_of(Due), _due("datetime(6)", default))
    assert warning == (
        f"the RetryAfter column of due_jobs (Due) is due at UTC times, found column 'due' of "
        f"type datetime(6) with DEFAULT {default}, which the server fills in the writing "
        f"session's time zone: a row inserted relying on it from a session not at +00:00 "
        f"falls due that many hours early or late (trinbox's own sessions run at +00:00); "
        f"make it UTC: ALTER TABLE `due_jobs` MODIFY `due` DATETIME(6) NOT NULL DEFAULT "
        f"(UTC_TIMESTAMP(6))"
    )


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("datetime(6)", "utc_timestamp(6)"),  # what create_tables makes, as MariaDB lists it
        ("datetime(6)", "(utc_timestamp(6))"),
        ("datetime(6)", None),
        ("datetime(6)", "'2000-01-01 00:00:00.000000'"),
        # A TIMESTAMP stores the instant, whatever the writing session's zone.
        ("timestamp(6)", "current_timestamp(6)"),
    ],
)
def test_a_utc_default_or_none_is_not_warned_of(type_: str, default: str | None) -> None:
    assert column_warnings(MY, spec_of(Due), _due(type_, default)) == []
