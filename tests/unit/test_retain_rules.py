"""``Mount.retain(...)``'s rules (no database): its ages, its interval, the fields a table
needs to tell an age, and at serve the dead letter destination ``dead_letters=`` prunes;
each refusal names the rule, what was found and the fix."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, cast

import pytest
import trio

from trinbox import (
    App,
    AppInfo,
    Attempt,
    DeadLetteredAt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    SqlBroker,
    subscriber,
)
from trinbox.errors import DeclarationError


class Kept(Inbox[Lease], table="kept"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    dead_at: Annotated[datetime | None, DeadLetteredAt()] = None
    payload: Annotated[bytes, Payload()]


class Deleted(Inbox[Lease], table="deleted"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(Kept, "jobs"))
async def kept(body: bytes) -> None:
    pass


@subscriber(InboxQueue(Deleted, "deleted"))
async def deleted(body: bytes) -> None:
    pass


BROKER = SqlBroker.sqlite("sqlite:///never.db")


def refused(mount: object, **given: object) -> str:
    with pytest.raises(DeclarationError) as caught:
        cast("Any", mount).retain(**given)
    return str(caught.value)


def test_an_age_is_a_positive_timedelta() -> None:
    mount = App().include(BROKER, kept)
    msg = refused(mount, processed=timedelta(0))
    assert ".retain(processed=...) keeps rows for a positive timedelta" in msg
    assert "found datetime.timedelta(0)" in msg
    assert "processed=timedelta(days=7)" in msg
    msg = refused(mount, dead_letters=7)
    assert ".retain(dead_letters=...) keeps rows for a positive timedelta, found 7" in msg


def test_retain_prunes_something() -> None:
    msg = refused(App().include(BROKER, kept))
    assert "found neither processed= nor dead_letters=" in msg
    assert ".retain(processed=timedelta(days=1))" in msg


def test_a_pass_is_a_second_apart_or_more() -> None:
    msg = refused(App().include(BROKER, kept), processed=timedelta(days=1), every=timedelta(0))
    assert ".retain(every=...) runs a pass a second apart or more" in msg


def test_processed_needs_a_processed_at_field() -> None:
    msg = refused(App().include(BROKER, deleted), processed=timedelta(days=1))
    assert "found no ProcessedAt field on deleted" in msg
    assert "its ack and drop delete the row" in msg


def test_dead_letters_need_a_dead_lettered_at_field() -> None:
    mount = App().include(BROKER, deleted).max_attempts(3).dead_letter("deleted_dead")
    msg = refused(mount, dead_letters=timedelta(days=7))
    assert "found no DeadLetteredAt field on deleted" in msg


def test_a_valid_retain_is_kept_on_the_mount() -> None:
    mount = App().include(BROKER, kept).retain(processed=timedelta(hours=1))
    assert mount.retention is not None
    assert mount.retention.processed == timedelta(hours=1)
    assert mount.retention.dead_letters is None
    assert mount.retention.every == timedelta(minutes=1)


def test_dead_letters_without_a_destination_stop_serve_before_any_connection() -> None:
    app = App(AppInfo("svc"))
    app.include(BROKER, kept).retain(dead_letters=timedelta(days=7))
    with pytest.raises(DeclarationError) as caught:
        trio.run(app.serve)
    assert "found no dead letter destination" in str(caught.value)
    assert ".max_attempts(n).dead_letter(dest)" in str(caught.value)
