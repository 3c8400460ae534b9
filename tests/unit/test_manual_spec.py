"""The manual builder: an ``InboxSpec`` compiles to the same ``TableSpec`` as the class statement
that says the same with annotations (docs/reference.md#manual-spec).

``TableSpec`` equality leaves out ``row_type``, so ``==`` compares everything else: name, schema,
form, isolation level, every column (field, column, role, generated, type, order), and the lock key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from trinbox import (
    Advisory,
    Attempt,
    Column,
    Group,
    Id,
    Inbox,
    InboxSpec,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
    Serializable,
)
from trinbox._declare._inbox import spec_of
from trinbox.typing import KeyColumn, KeyLiteral

# -- lease, payload mode, every role, in a schema, at an isolation level ------------------------


class LeaseDeclared(Inbox[Lease, Serializable], table="email_jobs", schema="app"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    customer: str
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    payload: Annotated[bytes, Payload()]


LEASE = (
    InboxSpec("email_jobs", "id", generated=True)
    .within("app")
    .group("name")
    .origin_group("dead_from")
    .retry_after("retry_after")
    .attempt("attempt", generated=True)
    .lease("locked_until")
    .processed_at("processed_at")
    .payload("payload")
)


class LeaseBuilt(Inbox[Lease, Serializable], spec=LEASE):
    id: int
    name: str
    dead_from: str | None = None
    customer: str
    retry_after: datetime
    attempt: int
    locked_until: datetime | None
    processed_at: datetime | None
    payload: bytes


def test_lease_spec_equals_declaration() -> None:
    assert spec_of(LeaseBuilt) == spec_of(LeaseDeclared)
    assert spec_of(LeaseBuilt).row_type is LeaseBuilt
    assert spec_of(LeaseBuilt).insert_columns == spec_of(LeaseDeclared).insert_columns


def test_within_names_the_schema() -> None:
    spec = spec_of(LeaseBuilt)
    assert (spec.schema, spec.qualified_name) == ("app", "app.email_jobs")
    assert LEASE.schema == "app"
    assert InboxSpec("email_jobs", "id").schema is None


def test_spec_selects_its_form_in_its_type() -> None:
    assert LEASE.form is Lease
    assert InboxSpec("t", "id").form is RowLock
    assert InboxSpec("t", "id").advisory([KeyColumn("id")]).form is Advisory


# -- advisory: literal and column key parts, renamed role columns through field= ----------------


class AdvisoryDeclared(Inbox[Advisory], table="videos", advisory_lock="videos-{name}:{video}"):
    video: Annotated[int, Id(generated=True), Column("video_id")]
    name: Annotated[str, Group(), Column("queue")]
    channel: str
    attempt: Annotated[int, Attempt(), Column("tries")]
    payload: Annotated[bytes, Payload(), Column("body")]


ADVISORY = (
    InboxSpec("videos", "video_id", generated=True, field="video")
    .advisory([KeyLiteral("videos-"), KeyColumn("queue"), KeyLiteral(":"), KeyColumn("video_id")])
    .group("queue", field="name")
    .attempt("tries", field="attempt")
    .payload("body", field="payload")
)


class AdvisoryBuilt(Inbox[Advisory], spec=ADVISORY):
    video: int
    name: str
    channel: str
    attempt: int
    payload: bytes


def test_advisory_spec_equals_declaration() -> None:
    assert spec_of(AdvisoryBuilt) == spec_of(AdvisoryDeclared)
    assert spec_of(AdvisoryBuilt).key == (
        KeyLiteral("videos-"),
        KeyColumn("queue"),
        KeyLiteral(":"),
        KeyColumn("video_id"),
    )
    assert spec_of(AdvisoryBuilt).key_template == "videos-{name}:{video}"


def test_field_maps_a_column_to_a_differently_named_field() -> None:
    spec = spec_of(AdvisoryBuilt)
    assert (spec.id.field, spec.id.column, spec.id.generated) == ("video", "video_id", True)
    assert spec.group is not None
    assert (spec.group.field, spec.group.column) == ("name", "queue")
    assert spec.payload is not None
    assert (spec.payload.field, spec.payload.column) == ("payload", "body")
    assert [(c.field, c.column) for c in spec.data] == [("channel", "channel")]


class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    """The example of docs/design.md#what-a-user-writes, the key on a data column."""

    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


TRANSCODE = (
    InboxSpec("video_jobs", "id", generated=True)
    .advisory([KeyLiteral("video_jobs-"), KeyColumn("channel")])
    .attempt("attempt", generated=True)
    .payload("payload")
)


class TranscodeBuilt(Inbox[Advisory], spec=TRANSCODE):
    id: int
    channel: str
    attempt: int
    payload: bytes


def test_key_on_a_data_column() -> None:
    assert spec_of(TranscodeBuilt) == spec_of(Transcode)


def test_key_literal_holds_any_text() -> None:
    # A template cannot hold a literal brace; a KeyLiteral can.
    spec = InboxSpec("jobs", "id").advisory([KeyLiteral("{jobs}-"), KeyColumn("id")])

    class Job(Inbox[Advisory], spec=spec):
        id: int

    assert spec_of(Job).key == (KeyLiteral("{jobs}-"), KeyColumn("id"))


# -- row lock, row mode (no payload), a renamed id ----------------------------------------------


class TicketDeclared(Inbox[RowLock], table="tickets"):
    ticket: Annotated[int, Id(), Column("id")]
    subject: str
    opened: datetime
    attempt: Annotated[int, Attempt(generated=True)]


TICKETS = InboxSpec("tickets", "id", field="ticket").attempt("attempt", generated=True)


class TicketBuilt(Inbox[RowLock], spec=TICKETS):
    ticket: int
    subject: str
    opened: datetime
    attempt: int


def test_row_mode_spec_equals_declaration() -> None:
    assert spec_of(TicketBuilt) == spec_of(TicketDeclared)
    assert spec_of(TicketBuilt).payload is None


def test_built_columns_keep_declaration_order_and_types() -> None:
    # Row mode builds the row class from column values, converting by each field's type.
    spec = spec_of(TicketBuilt)
    assert [(c.field, c.python_type) for c in spec.columns] == [
        ("ticket", int),
        ("subject", str),
        ("opened", datetime),
        ("attempt", int),
    ]
    assert [c.column for c in spec.insert_columns] == ["id", "subject", "opened"]


def test_built_class_is_a_keyword_only_dataclass() -> None:
    ticket = TicketBuilt(ticket=1, subject="s", opened=datetime(2030, 1, 1), attempt=1)
    assert ticket.subject == "s"
