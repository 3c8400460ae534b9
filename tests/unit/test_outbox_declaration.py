"""An outbox record table declared as a row class (``class Events(Outbox, table=...)``): it is
a lease table whose Group field holds the record's name, and the class statement refuses what
a relay cannot serve, naming the rule, what it found and the fix."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated

import pytest

from trinbox import (
    Attempt,
    Group,
    Id,
    Inbox,
    InboxSpec,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    RetryAfter,
)
from trinbox._declare._inbox import spec_of
from trinbox.errors import DeclarationError
from trinbox.outbox import Outbox
from trinbox.schema import ddl


class Events(Outbox, table="events_outbox"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


def test_a_record_table_is_a_lease_table_whose_group_is_the_name() -> None:
    spec = spec_of(Events)
    assert spec.form is Lease
    assert issubclass(Events, Inbox)
    assert spec.group is not None and spec.group.field == "name"
    # A row class like any other: a keyword-only dataclass.
    assert dataclasses.is_dataclass(Events)
    assert all(f.kw_only for f in dataclasses.fields(Events))


def test_the_ddl_is_a_lease_tables_with_its_name_indexed_first() -> None:
    statements = ddl(Events, "postgres")
    assert statements[0].startswith('CREATE TABLE IF NOT EXISTS "events_outbox" (')
    assert '"name" TEXT NOT NULL' in statements[0]
    assert '"locked_until" TIMESTAMPTZ' in statements[0]
    assert statements[1] == (
        'CREATE INDEX IF NOT EXISTS "events_outbox_claim" ON "events_outbox" '
        '("name", "retry_after", "id") WHERE "processed_at" IS NULL'
    )
    assert "`name` VARCHAR(191) COLLATE utf8mb4_bin NOT NULL" in ddl(Events, "mysql")[0]


def test_a_subclass_of_a_record_class_is_a_record_class() -> None:
    class More(Events, table="more_outbox"):
        note: str | None = None

    assert spec_of(More).table == "more_outbox"
    assert spec_of(More).data[0].field == "note"


FIELDS = {
    "id": "id: Annotated[int, Id(generated=True)]",
    "name": "name: Annotated[str, Group()]",
    "retry_after": "retry_after: Annotated[datetime, RetryAfter()]",
    "locked_until": "locked_until: Annotated[datetime | None, LockedUntil()]",
    "payload": "payload: Annotated[bytes, Payload()]",
}


def declare(body: dict[str, str]) -> None:
    source = "class Record(Outbox, table='records'):\n" + "".join(
        f"    {line}\n" for line in body.values()
    )
    exec(source, globals())


def without(field: str, **replaced: str) -> dict[str, str]:
    found = {k: v for k, v in FIELDS.items() if k != field}
    found.update(replaced)
    return found


def test_every_field_a_relay_needs_makes_a_record_table() -> None:
    declare(FIELDS)


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        (
            "name",
            "class Record: an outbox record names the message it carries in a Group field (the "
            "name a relay serves), found none; add one, like name: Annotated[str, Group()]",
        ),
        (
            "payload",
            "class Record: an outbox record carries its message's bytes in a Payload field, "
            "found none; add one, like payload: Annotated[bytes, Payload()]",
        ),
        (
            "locked_until",
            "class Record: a relay claims an outbox's records under a lease, which it writes "
            "into a LockedUntil field (trinbox's addition to the record table), found none; add "
            "one, like locked_until: Annotated[datetime | None, LockedUntil()]",
        ),
        (
            "retry_after",
            "class Record: a record whose sink failed waits out its backoff in a RetryAfter "
            "field, found none; add one, like retry_after: Annotated[datetime, "
            "RetryAfter(generated=True)]",
        ),
    ],
)
def test_a_field_a_relay_needs_is_refused_missing(missing: str, message: str) -> None:
    with pytest.raises(DeclarationError) as refused:
        declare(without(missing))
    assert str(refused.value) == message


def test_the_name_is_a_str() -> None:
    with pytest.raises(DeclarationError) as refused:
        declare(without("name", name="name: Annotated[int, Group()]"))
    assert str(refused.value) == (
        "class Record: an outbox record's name is a str (its Group field, the name a relay "
        "serves), found 'name' of type int; declare name: Annotated[str, Group()]"
    )


def test_a_fifo_name_is_refused() -> None:
    with pytest.raises(DeclarationError) as refused:
        declare(without("name", name="name: Annotated[str, Group(fifo=True)]"))
    assert str(refused.value) == (
        "class Record: a relay serves an outbox's records side by side, whatever their name, "
        "found Group(fifo=True) on 'name'; drop fifo=True"
    )


def test_the_lease_forms_own_rules_still_hold() -> None:
    with pytest.raises(DeclarationError, match="advisory_lock= selects the advisory form"):
        declare_keyword = "class Keyed(Outbox, table='k', advisory_lock='k-{id}'):\n" + "".join(
            f"    {line}\n" for line in FIELDS.values()
        )
        exec(declare_keyword, globals())


def test_a_manual_spec_is_held_to_the_same_rules() -> None:
    spec = InboxSpec("records", "id").lease("locked_until").payload("payload").group("name")
    with pytest.raises(DeclarationError) as refused:

        class Manual(Outbox, spec=spec):
            id: int
            name: str
            locked_until: datetime | None
            payload: bytes

    assert str(refused.value).startswith(
        "class test_a_manual_spec_is_held_to_the_same_rules.<locals>.Manual: a record whose "
        "sink failed waits out its backoff in a RetryAfter field, found none"
    )
    complete = spec.retry_after("retry_after")

    class Complete(Outbox, spec=complete):
        id: int
        name: str
        retry_after: datetime
        locked_until: datetime | None
        payload: bytes

    assert spec_of(Complete).retry_after is not None
