"""``keys.RowId``: a handler reads its row's id, on every stand and form, in plain and in
transactional mode, typed as the row class types its Id field (an ``int`` for the matrix's
tables, a ``UUID`` for a table of UUID ids, whatever the column holds on each database)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from uuid import UUID, uuid4

import trio

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, keys, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells, insert_emails, native
from .schema import AUDIT


@dataclass
class Job:
    n: int


def _ids_by_payload(case: Case) -> dict[bytes, int]:
    return {
        bytes(payload): job_id
        for job_id, payload in case.stand.rows("SELECT job_id, payload FROM email_jobs")
    }


async def test_a_handler_reads_its_rows_id(case: Case) -> None:
    payloads = [f'{{"n": {n}}}'.encode() for n in range(3)]
    insert_emails(case.stand, payloads)
    expected = _ids_by_payload(case)
    broker = case.stand.broker(poll_interval=HOUR)
    seen: dict[bytes, object] = {}

    @subscriber(InboxQueue(case.email, "emails").workers(2))
    async def handle(body: bytes, row_id: keys.RowId, attempt: keys.Attempt) -> None:
        seen[body] = row_id

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, handle, 3)
    assert seen == expected
    assert {type(row_id) for row_id in seen.values()} == {int}


async def test_a_transactional_handler_writes_its_row_id_with_its_ack(case: Case) -> None:
    """All four keys at once, in any order."""
    case.stand.script(AUDIT[case.name])
    insert_emails(case.stand, [b'{"n": 1}', b'{"n": 2}'])
    expected = sorted(f"row {job_id}" for job_id in _ids_by_payload(case).values())
    broker = case.stand.broker(poll_interval=HOUR)
    insert = native(case.name, "INSERT INTO audit (note) VALUES (?)")

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def handle(
        job: Job, tx: keys.Tx, row_id: keys.RowId, pool: keys.Pool, attempt: keys.Attempt
    ) -> None:
        assert attempt == 1
        await tx.execute(insert, f"row {row_id}")

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, handle, 2)
    notes = sorted(str(note) for (note,) in case.stand.rows("SELECT note FROM audit"))
    assert notes == expected
    assert case.stand.rows("SELECT * FROM email_jobs") == []


class Token(Inbox[Lease], table="token_jobs"):
    id: Annotated[UUID, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@cells(forms=["lease"])
async def test_a_uuid_row_id_comes_as_a_uuid(case: Case) -> None:
    broker = case.stand.broker(poll_interval=HOUR)
    app = make_app()
    published = [uuid4(), uuid4()]
    seen: list[object] = []

    @app.on_startup
    async def create() -> None:
        await broker.create_tables(Token)

    @subscriber(InboxQueue(Token, "tokens"))
    async def handle(job: Job, row_id: keys.RowId) -> None:
        seen.append(row_id)

    app.include(broker, handle)
    async with serving(app):
        for n, token in enumerate(published):
            await broker.publish(Token, Job(n), id=token)
        with trio.fail_after(30):
            await settled(app, handle, 2)
    assert sorted(map(str, seen)) == sorted(map(str, published))
    # asyncpg's own UUID class is a uuid.UUID.
    assert all(isinstance(row_id, UUID) for row_id in seen)
