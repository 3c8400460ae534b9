"""Publishing refuses what it cannot write faithfully (issue 9, item 8), on every stand, by
``publish``, ``tx.publish`` and ``insert_statement`` alike: a message the codec cannot encode,
a ``delay`` that is not a timedelta, is negative or runs past the last time a datetime holds,
and no message for a table with a Payload field. Each error names the table and the field,
and nothing is written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from trinbox import SqlBroker
from trinbox._api.codecs import RawCodec
from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import DeclarationError

from .conftest import Case
from .kit import cells


class Opaque:
    """No JSON encoder knows it."""


# (publish arguments, what the message says, the field it names)
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("unencodable", {"message": Opaque()}, "cannot encode this Opaque", "payload"),
    ("no message", {}, "takes a message (into the Payload field payload), found none", "payload"),
    ("float delay", {"message": {"n": 1}, "delay": 5.0}, "found float 5.0", "retry_after"),
    ("int delay", {"message": {"n": 1}, "delay": 5}, "a delay is a timedelta", "retry_after"),
    (
        "negative delay",
        {"message": {"n": 1}, "delay": timedelta(seconds=-1)},
        "a delay is zero or more",
        "retry_after",
    ),
    (
        "overflowing delay",
        {"message": {"n": 1}, "delay": timedelta.max},
        "a time up to 9999-12-31",
        "retry_after",
    ),
]
IDS = [name for name, *_ in REFUSED]


def check(error: DeclarationError, case: Case, says: str, field: str) -> None:
    message = str(error)
    assert message.startswith(f"publish into email_jobs ({case.email.__qualname__}):")
    assert says in message
    assert f" {field}" in message


@cells(forms=["lease"])
@pytest.mark.parametrize(("name", "arguments", "says", "field"), REFUSED, ids=IDS)
async def test_a_refused_publish_names_the_table_and_field_and_writes_nothing(
    case: Case, name: str, arguments: dict[str, Any], says: str, field: str
) -> None:
    stand = case.stand
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker()
        await broker.open()
        try:
            with pytest.raises(DeclarationError) as caught:
                await broker.publish(case.email, name="emails", **arguments)
            check(caught.value, case, says, field)
            with pytest.raises(DeclarationError) as caught:
                async with broker.transaction() as tx:
                    await tx.publish(case.email, name="emails", **arguments)
            check(caught.value, case, says, field)
            with pytest.raises(DeclarationError) as caught:
                broker.insert_statement(case.email, name="emails", **arguments)
            check(caught.value, case, says, field)
            # the broker still publishes, and the refused rows were never written
            await broker.publish(case.email, {"n": 2}, name="emails")
        finally:
            await broker.aclose()
    assert stand.rows("SELECT payload FROM email_jobs") == [(b'{"n":2}',)]


@cells(forms=["lease"], stands=["sqlite"])
async def test_the_codec_that_cannot_encode_is_named(case: Case) -> None:
    broker = SqlBroker.sqlite(case.stand.url, codec=RawCodec())
    await broker.open()
    try:
        with pytest.raises(DeclarationError) as caught:
            await broker.publish(case.email, {"n": 1}, name="emails")
        assert "into the Payload field payload by RawCodec, which cannot encode this dict" in str(
            caught.value
        )
        assert isinstance(caught.value.__cause__, TypeError)
        await broker.publish(case.email, b"raw", name="emails", delay=timedelta(0))
    finally:
        await broker.aclose()
    assert case.stand.rows("SELECT payload FROM email_jobs") == [(b"raw",)]
