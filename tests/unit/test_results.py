"""The ``Result()`` role without a database: the declaration's rules (a ProcessedAt field
beside it, never generated), the DDL's JSON column, the startup check of its type, the publish
that leaves it out, the AsyncAPI row, and ``HandlerOutcome.ack(result)``.
tests/integration/matrix/test_results.py runs it on every stand and form."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import pytest

from trinbox import (
    HandlerOutcome,
    Id,
    Inbox,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    Result,
    SqlBroker,
)
from trinbox._declare._inbox import spec_of
from trinbox._dialects._columns import FoundColumn
from trinbox._dialects.ddl import render_ddl
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.errors import DeclarationError

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()


@dataclass
class Receipt:
    total: int


class Order(Inbox[Lease], table="orders"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]
    receipt: Annotated[Receipt | None, Result()] = None


def test_a_result_field_needs_processed_at_and_is_the_acks_to_write() -> None:
    with pytest.raises(DeclarationError, match=r"Kept: a Result field is read after the row"):

        class Kept(Inbox[Lease], table="kept"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            receipt: Annotated[Receipt | None, Result()] = None

    with pytest.raises(
        DeclarationError,
        match=r"a Result field is written by the ack \(HandlerOutcome\.ack\(result\)\), NULL "
        r"until then, found Result\(generated=True\) on 'receipt'; drop generated=True$",
    ):

        class Generated(Inbox[Lease], table="generated"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            processed_at: Annotated[datetime | None, ProcessedAt()]
            receipt: Annotated[Receipt | None, Result(generated=True)] = None


def test_the_ddl_writes_a_json_column_that_takes_null() -> None:
    assert '    "receipt" JSONB\n)' in render_ddl(PG, spec_of(Order))[0]
    assert "    `receipt` JSON\n)" in render_ddl(MY, spec_of(Order))[0]
    assert "    `receipt` TEXT\n)" in render_ddl(LITE, spec_of(Order))[0]


@pytest.mark.parametrize(
    ("dialect", "found", "fits"),
    [
        (PG, FoundColumn("receipt", "jsonb", None, nullable=True), True),
        (PG, FoundColumn("receipt", "bytea", None, nullable=True), False),
        (PG, FoundColumn("receipt", "jsonb", None, nullable=False), False),
        (MY, FoundColumn("receipt", "json", None, nullable=True), True),
        (MY, FoundColumn("receipt", "blob", None, nullable=True), False),
        (LITE, FoundColumn("receipt", "TEXT", None, nullable=True), True),
        (LITE, FoundColumn("receipt", "TEXT", None, nullable=False), False),
    ],
)
def test_the_column_check_takes_json_text_that_takes_null(
    dialect: PostgresDialect | MySqlDialect | SqliteDialect, found: FoundColumn, fits: bool
) -> None:
    assert (dialect.check_columns(spec_of(Order), [found]) is None) is fits


def test_the_column_check_names_the_fix() -> None:
    problem = PG.check_columns(spec_of(Order), [FoundColumn("receipt", "jsonb", None, False)])
    assert problem == (
        "the Result column of orders (Order) is NULL until the row's ack writes it, found "
        "column 'receipt' NOT NULL; allow NULL: ALTER TABLE \"orders\" ALTER COLUMN "
        '"receipt" DROP NOT NULL'
    )


def test_the_publish_leaves_the_result_out() -> None:
    broker = SqlBroker.sqlite("sqlite:///unused.db")
    sql, _ = broker.insert_statement(Order, b"{}")
    assert "receipt" not in sql


def test_a_result_goes_with_the_ack_only() -> None:
    assert HandlerOutcome.ack(Receipt(1)).result == Receipt(1)
    assert HandlerOutcome.ack(Receipt(1)).reply("next", b"").result == Receipt(1)
    with pytest.raises(ValueError, match=r"^a result is written with the ack, found one on a"):
        HandlerOutcome("retry", result=Receipt(1))
