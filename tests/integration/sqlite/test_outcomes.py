"""Outcomes on SQLite: what only SQLite's dynamic typing asks. Every outcome scenario of
docs/reference.md#scenarios-outcomes runs on each stand in
tests/integration/matrix/test_outcomes.py."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trinbox import Inbox, InboxQueue, RawCodec, keys, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .harness import Db
from .tables import EMAIL_FORMS, EMAIL_JOBS


@pytest.mark.parametrize("payload", [bytes(range(256)), b""], ids=["all-bytes", "empty"])
@pytest.mark.parametrize("row", EMAIL_FORMS)
async def test_a_payload_is_stored_as_a_blob(
    db: Db, row: type[Inbox[Any, Any]], payload: bytes
) -> None:
    # A column declared BLOB takes any type in SQLite: the payload must go in as bytes, an
    # empty one too, never as text or NULL.
    db.script(EMAIL_JOBS)
    broker = db.broker()
    stored: list[tuple[object, ...]] = []

    @subscriber(InboxQueue(row, "blobs").codec(RawCodec()))
    async def take(data: bytes, pool: keys.Pool) -> None:
        stored.extend(await pool.fetch("SELECT payload, typeof(payload) FROM email_jobs"))

    app = make_app()
    app.include(broker, take)
    async with serving(app):
        await broker.publish(row, payload, name="blobs", customer="c1")
        with trio.fail_after(10):
            await settled(app, take, 1)
    assert stored == [(payload, "blob")]
