"""Payload codecs, the handler and publish refusals of row mode, and the rules of publishing, on
SQLite (docs/reference.md#payload-mode, docs/reference.md#row-mode, docs/reference.md#publish-api,
docs/reference.md#rows-that-do-not-decode; docs/design.md#what-a-user-writes). None of them differs
between databases; binary payloads, row mode and delayed publishes run on every database in
tests/integration/matrix/test_modes.py.

Each payload test publishes one message through the broker and checks what the handler got.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import msgspec
import pydantic
import pytest
import trio

from trinbox import (
    Attempt,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    keys,
    subscriber,
)
from trinbox.errors import DeclarationError
from trinbox.testing import settled
from trinbox.typing import Subscriber

from ..serving import make_app, serving
from .harness import Db
from .tables2 import (
    BARE_FORMS,
    BARE_JOBS,
    JOB_FORMS,
    JOBS,
    MAIL_FORMS,
    MAIL_JOBS,
    LeasedBare,
    LeasedJob,
    LeasedMail,
)

HOUR = 3600.0
DUE_TIME = datetime(2000, 1, 1, tzinfo=UTC)


class GeneratedDue(Inbox[Lease], table="jobs"):
    """The jobs table with its due time left to the column's default."""

    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class EmailClass:
    to: str


class EmailStruct(msgspec.Struct):
    to: str


class EmailModel(pydantic.BaseModel):
    to: str


class EmailDict(TypedDict):
    to: str


def where(handler: Subscriber[Any, Any]) -> str:
    """How messages name a subscription."""
    return f"subscription {handler.queue.name!r} ({handler!r})"


async def serve_one(db: Db, handle: Subscriber[Any, Any], message: object) -> None:
    """Publish ``message`` into the handler's table and wait for its delivery to settle."""
    db.script(JOBS)
    broker = db.broker(poll_interval=HOUR)
    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        await broker.publish(handle.queue.row, message)
        with trio.fail_after(10):
            await settled(app, handle, 1)
    assert db.rows("SELECT * FROM jobs") == []


# -- payload mode -------------------------------------------------------------------------------


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_payload_decodes_into_a_dataclass(db: Db, row: type[Inbox[Any, Any]]) -> None:
    got: list[object] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(email: EmailClass) -> None:
        got.append(email)

    await serve_one(db, handle, EmailClass("a@example.com"))
    assert got == [EmailClass("a@example.com")]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_payload_decodes_into_a_msgspec_struct(db: Db, row: type[Inbox[Any, Any]]) -> None:
    got: list[object] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(email: EmailStruct) -> None:
        got.append(email)

    await serve_one(db, handle, EmailStruct("a@example.com"))
    assert got == [EmailStruct("a@example.com")]


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_payload_decodes_into_a_pydantic_model(db: Db, row: type[Inbox[Any, Any]]) -> None:
    got: list[object] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(email: EmailModel) -> None:
        got.append(email)

    await serve_one(db, handle, EmailModel(to="a@example.com"))
    assert got == [EmailModel(to="a@example.com")]
    assert type(got[0]) is EmailModel


@pytest.mark.parametrize("row", JOB_FORMS)
async def test_payload_decodes_into_a_typed_dict(db: Db, row: type[Inbox[Any, Any]]) -> None:
    got: list[object] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(email: EmailDict) -> None:
        got.append(email)

    await serve_one(db, handle, EmailDict(to="a@example.com"))
    assert got == [{"to": "a@example.com"}]


@pytest.mark.parametrize("row", JOB_FORMS)
@pytest.mark.parametrize("payload", [b"not json", b'{"to": 5}', b"{}"])
async def test_undecodable_payload_is_dropped_by_default(
    db: Db, row: type[Inbox[Any, Any]], payload: bytes
) -> None:
    called: list[object] = []

    @subscriber(InboxQueue(row, "jobs"))
    async def handle(email: EmailClass) -> None:
        called.append(email)

    # serve_one checks that the row was finished (deleted).
    await serve_one(db, handle, payload)
    assert called == []


# -- row mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize("row", MAIL_FORMS)
async def test_payload_handler_on_a_row_mode_table_stops_serve(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(MAIL_JOBS)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "mail"))
    async def handle(email: EmailClass) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    name = row.__qualname__
    expected = (
        f"{where(handle)}: mail_jobs ({name}) has no Payload field, so its handler takes the "
        f"row itself, found EmailClass; annotate the message as {name}"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()


@pytest.mark.parametrize("row", BARE_FORMS)
async def test_attempt_key_on_a_table_without_attempt_stops_serve(
    db: Db, row: type[Inbox[Any, Any]]
) -> None:
    db.script(BARE_JOBS)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(row, "bare"))
    async def handle(email: EmailClass, attempt: keys.Attempt) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    expected = (
        f"{where(handle)}: keys.Attempt reads the table's Attempt field, found none on "
        f"bare_jobs ({row.__qualname__}); add one, like attempt: Annotated[int, Attempt()]"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()


# -- publishing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row_type", "message", "columns", "expected"),
    [
        pytest.param(
            LeasedJob,
            EmailClass("a@example.com"),
            {"colour": "red"},
            "publish into jobs (LeasedJob): columns are given by field name, found colour "
            "which no writable field has (writable: attempt, locked_until, payload, "
            "retry_after)",
            id="unknown-field",
        ),
        pytest.param(
            LeasedMail,
            None,
            {"note": "hi"},
            "publish into mail_jobs (LeasedMail): every writable field needs a value, found "
            "none for recipient",
            id="missing-field",
        ),
        pytest.param(
            LeasedMail,
            EmailClass("a@example.com"),
            {"recipient": "a@example.com", "note": None},
            "publish into mail_jobs (LeasedMail): a table without a Payload field takes no "
            "message, found EmailClass; give the row's fields as keywords",
            id="message-in-row-mode",
        ),
        pytest.param(
            LeasedBare,
            EmailClass("a@example.com"),
            {"delay": timedelta(seconds=5)},
            "publish into bare_jobs (LeasedBare): a delay is written into a RetryAfter field, "
            "found none; add one",
            id="delay-without-retry-after",
        ),
        pytest.param(
            GeneratedDue,
            EmailClass("a@example.com"),
            {"delay": timedelta(seconds=5)},
            "publish into jobs (GeneratedDue): a delay is written into the RetryAfter field "
            "retry_after, found it generated (the database fills it, the insert leaves it "
            "out); drop generated=True from RetryAfter() to publish with a delay",
            id="delay-into-a-generated-retry-after",
        ),
        pytest.param(
            LeasedJob,
            EmailClass("a@example.com"),
            {"delay": timedelta(seconds=5), "retry_after": DUE_TIME},
            "publish into jobs (LeasedJob): the due time is given once, found both delay= and "
            "retry_after=; pass one of them",
            id="delay-beside-retry-after",
        ),
    ],
)
async def test_publish_refuses_what_the_table_cannot_hold(
    db: Db, row_type: type[Inbox[Any, Any]], message: object, columns: dict[str, Any], expected: str
) -> None:
    db.script(JOBS + MAIL_JOBS + BARE_JOBS)
    broker = db.broker(poll_interval=HOUR)

    @subscriber(InboxQueue(LeasedJob, "jobs"))
    async def handle(email: EmailClass) -> None:
        pass

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
            await broker.publish(row_type, message, **columns)
    for table in ("jobs", "mail_jobs", "bare_jobs"):
        assert db.rows(f"SELECT * FROM {table}") == []
