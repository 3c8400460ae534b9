"""PostgreSQL: a generated RetryAfter defaults to ``statement_timestamp()``, the one now of the
dialect (the claims and the inspection read it too); tables made before, with ``DEFAULT
now()``, still pass the startup column check and are served as they are, without a warning
(issue 18, item 2)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Attempt,
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
from trinbox.schema import ddl
from trinbox.testing import settled

from ..serving import make_app, serving
from ..stands import PostgresStand, fresh_stand

TABLE = "old_now_jobs"


class Job(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@dataclass
class Task:
    n: int


@pytest.fixture
def pg(tmp_path: Path) -> Any:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        yield stand


async def test_a_table_with_the_old_now_default_passes_the_check_and_is_served(
    pg: PostgresStand, caplog: pytest.LogCaptureFixture
) -> None:
    (create, *indexes) = ddl(Job, "postgres")
    assert "DEFAULT statement_timestamp()" in create
    old = create.replace("DEFAULT statement_timestamp()", "DEFAULT now()")
    pg.script(old)
    for index in indexes:
        pg.script(index)
    (default,) = pg.rows(
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_name = ? AND column_name = 'retry_after'",
        TABLE,
    )[0]
    assert default == "now()"
    # Rows written by another client, relying on the default.
    for n in (1, 2):
        pg.execute(f"INSERT INTO {TABLE} (payload) VALUES (?)", json.dumps({"n": n}).encode())
    handled: list[int] = []

    @subscriber(InboxQueue(Job, "old-now"))
    async def work(task: Task) -> HandlerOutcome:
        handled.append(task.n)
        return HandlerOutcome.ack()

    caplog.set_level(logging.WARNING, logger="trinbox")
    app = make_app()
    app.include(SqlBroker.postgres(pg.url, poll_interval=0.05), work)
    async with serving(app):
        with trio.fail_after(30):
            await settled(app, work, 2)
    assert sorted(handled) == [1, 2]
    assert not [r for r in caplog.records if "RetryAfter" in r.getMessage()]
