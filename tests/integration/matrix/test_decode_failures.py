"""Nothing a row does stops the app (issue 17, item 3): whatever a codec or a row class raises
while a row decodes — a codec's ``KeyError`` (a schema registry without the schema), a
``decimal.InvalidOperation`` converting a column into a ``Decimal`` field, a row class's
``__post_init__`` — is settled by the decode policy (drop by default), logged once with its
traceback, and serving goes on to the next row."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import pytest
import trio

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    RetryAfter,
    RowLock,
    subscriber,
)
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, HOUR, cells, insert_rows

T = TypeVar("T")


@dataclass
class Job:
    n: int


class RegistryCodec:
    """JSON, with a schema registry that knows schema 1 only: another schema's lookup raises
    the registry's own ``KeyError``."""

    def encode(self, message: object) -> bytes:
        return json.dumps(message).encode()

    def decode(self, data: bytes, into: type[T]) -> T:
        value = json.loads(data)
        schemas = {1: into}
        return schemas[value["schema"]](value["n"])  # type: ignore[call-arg]


# Row mode: the row itself is the message. ``customer`` holds text; a Decimal field converts it
# (``Decimal("not a number")`` raises decimal.InvalidOperation, an ArithmeticError).


class LeasedAmount(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: Decimal | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]


class LockedAmount(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{job_id}"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: Decimal | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]


class RowLockedAmount(Inbox[RowLock], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: Decimal | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]


def _refuse_bad(row: Any) -> None:
    if row.customer == "bad":
        raise LookupError("no account for customer 'bad'")


class LeasedChecked(Inbox[Lease], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]

    def __post_init__(self) -> None:
        _refuse_bad(self)


class LockedChecked(Inbox[Advisory], table="email_jobs", advisory_lock="email_jobs-{job_id}"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]

    def __post_init__(self) -> None:
        _refuse_bad(self)


class RowLockedChecked(Inbox[RowLock], table="email_jobs"):
    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    customer: str | None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]

    def __post_init__(self) -> None:
        _refuse_bad(self)


AMOUNT: dict[str, type[Inbox[Any, Any]]] = {
    "lease": LeasedAmount,
    "advisory": LockedAmount,
    "row_lock": RowLockedAmount,
}
CHECKED: dict[str, type[Inbox[Any, Any]]] = {
    "lease": LeasedChecked,
    "advisory": LockedChecked,
    "row_lock": RowLockedChecked,
}


def add_rows(case: Case, rows: list[tuple[str, bytes]]) -> None:
    """email_jobs rows of group ``emails`` in this order: (customer, payload)."""
    insert_rows(
        case.stand,
        "email_jobs",
        [
            {"name": "emails", "customer": customer, "retry_after": DUE, "payload": payload}
            for customer, payload in rows
        ],
    )


def decode_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "the row does not decode" in r.getMessage()]


async def serve_until(case: Case, handler: Any, deliveries: int) -> None:
    app = make_app()
    app.include(case.stand.broker(lease=HOUR), handler)
    with trio.fail_after(20):
        async with serving(app):
            await settled(app, handler, deliveries)
            assert app.statistics(handler).dropped == 1


@cells()
async def test_a_codec_that_raises_a_key_error_drops_the_row_and_serving_goes_on(
    case: Case, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    add_rows(
        case,
        [
            ("c0", json.dumps({"schema": 7, "n": 0}).encode()),
            ("c1", json.dumps({"schema": 1, "n": 1}).encode()),
        ],
    )
    handled: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").codec(RegistryCodec()))
    async def handle(job: Job) -> None:
        handled.append(job.n)

    await serve_until(case, handle, 2)
    assert handled == [1]
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
    (failure,) = decode_failures(caplog)
    assert "KeyError(7)" in failure.getMessage()
    assert failure.exc_info is not None and isinstance(failure.exc_info[1], KeyError)


@cells()
@pytest.mark.parametrize(
    ("bad", "rows", "raised"),
    [
        ("not a number", AMOUNT, ArithmeticError),  # decimal.InvalidOperation
        ("bad", CHECKED, LookupError),  # the row class's __post_init__
    ],
    ids=["InvalidOperation", "post_init"],
)
async def test_a_row_class_whose_conversion_raises_drops_the_row_and_serving_goes_on(
    case: Case,
    clock: VirtualClock,
    caplog: pytest.LogCaptureFixture,
    bad: str,
    rows: dict[str, type[Inbox[Any, Any]]],
    raised: type[Exception],
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    add_rows(case, [(bad, b""), ("12.5", b"")])
    handled: list[object] = []

    row_type = rows[case.form]

    async def take(row: Any) -> None:
        handled.append(row.customer)

    take.__annotations__["row"] = row_type  # a row-mode handler takes its table's row class
    handle = subscriber(InboxQueue(row_type, "emails"))(take)
    await serve_until(case, handle, 2)
    assert handled == [Decimal("12.5") if rows is AMOUNT else "12.5"]
    assert case.stand.value("SELECT count(*) FROM email_jobs") == 0
    (failure,) = decode_failures(caplog)
    assert failure.exc_info is not None and isinstance(failure.exc_info[1], raised)
