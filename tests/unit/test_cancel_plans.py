"""The statements of a cancel (trinbox._dialects.cancels): per form, the guard that keeps a
row in work out of the settlement, on every dialect; the cancel request table's statements
and DDL (``trinbox.schema.ddl``); what ``CancelRequests`` refuses."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

import pytest

from trinbox import (
    Advisory,
    CancelRequests,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    Result,
    RowLock,
    SqlBroker,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects.cancels import cancel_plan, request_plan
from trinbox.errors import DeclarationError, UnsupportedForm
from trinbox.schema import ddl, dialect_named


class Locked(Inbox[RowLock], table="jobs"):
    id: Annotated[int, Id()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    result: Annotated[int | None, Result()] = None
    payload: Annotated[bytes, Payload()]


class Leased(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory], table="jobs", advisory_lock="jobs-{id}"):
    id: Annotated[int, Id()]
    payload: Annotated[bytes, Payload()]


def plan(dialect: str, row: type[Any]) -> Any:
    return cancel_plan(dialect_named(dialect), spec_of(row))


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_the_row_lock_form_probes_without_waiting_then_stamps(dialect: str) -> None:
    found = plan(dialect, Locked)
    assert found.begin is not None and found.probe is not None
    assert found.probe.sql.endswith("FOR UPDATE SKIP LOCKED")
    assert found.settle.sql.startswith("UPDATE")
    assert "processed_at" in found.settle.sql and "result" in found.settle.sql
    assert not found.keys


def test_sqlite_serves_no_row_lock_cancel() -> None:
    with pytest.raises(UnsupportedForm):
        plan("sqlite", Locked)


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_the_lease_form_deletes_while_the_lease_is_free(dialect: str) -> None:
    found = plan(dialect, Leased)
    assert (found.begin, found.probe) == (None, None)
    assert found.settle.sql.startswith("DELETE FROM")
    assert "locked_until" in found.settle.sql and "IS NULL OR" in found.settle.sql


@pytest.mark.parametrize(
    ("dialect", "guard", "keys"),
    [
        ("postgres", "pg_try_advisory_xact_lock(hashtextextended(", False),
        ("mysql", "IS_USED_LOCK(", False),
        ("sqlite", "NOT IN (SELECT value FROM json_each(", True),
    ],
)
def test_the_advisory_form_deletes_while_the_key_is_free(
    dialect: str, guard: str, keys: bool
) -> None:
    found = plan(dialect, Keyed)
    assert guard in found.settle.sql
    assert found.keys is keys
    assert (found.begin is not None) is keys  # SQLite: in the write transaction


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_the_request_table_has_one_row_per_table_and_id(dialect: str) -> None:
    (create,) = ddl(CancelRequests("app_cancels"), dialect)  # type: ignore[arg-type]
    assert "CREATE TABLE IF NOT EXISTS" in create
    assert "PRIMARY KEY (queue_table, row_id)" in create
    assert "expires_at" in create
    found = request_plan(dialect_named(dialect), "app_cancels", None, "test")
    assert found.request.params == ("table", "row_id", "retry_at")
    assert found.lapsed.params == ("now",)
    assert found.pending.params == ("table", "now")
    assert found.served.params == ("table", "row_id")


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_a_request_lapses_by_the_servers_clock_on_the_database_clock(dialect: str) -> None:
    on_server = type(dialect_named(dialect))(database_clock=True)
    found = request_plan(on_server, "app_cancels", None, "test")
    assert found.request.params == ("table", "row_id", "delay")  # the server's now + delay
    assert found.lapsed.params == ()
    assert found.pending.params == ("table",)
    assert on_server.server_clock.now in found.pending.sql


@pytest.mark.parametrize("lapse", [timedelta(0), timedelta(seconds=-1), 60])
def test_a_request_that_never_lives_is_refused(lapse: Any) -> None:
    with pytest.raises(DeclarationError, match=r"lapses after a positive timedelta, found"):
        CancelRequests("app_cancels", expire_after=lapse)


def test_a_request_that_lapses_within_a_poll_interval_is_refused() -> None:
    broker = SqlBroker.sqlite("sqlite:///unused.db", poll_interval=2.0)
    requests = CancelRequests("app_cancels", expire_after=timedelta(seconds=2))
    with pytest.raises(
        DeclarationError,
        match=r"must outlive the poll interval .* found "
        r"expire_after=0:00:02 and a poll interval of 0:00:02; pass a longer expire_after, "
        r"like expire_after=timedelta\(seconds=20\)$",
    ):
        broker.use_cancel_requests(requests)
    broker.use_cancel_requests(CancelRequests("app_cancels", expire_after=timedelta(seconds=3)))
    assert broker.cancel_requests is not None


def test_a_request_table_without_a_name_is_refused() -> None:
    with pytest.raises(DeclarationError, match=r"^CancelRequests\(''\): a cancel request table"):
        CancelRequests("")
