"""The ``Headers()`` role without a database: the declaration's rules, the DDL's JSON column,
the startup check of its type, the publish's rule (every header a row cannot hold refused,
never dropped) as ``insert_statement`` renders it, the column's decoding, the handler's
``keys.Headers`` and the AsyncAPI message. tests/integration/matrix/test_headers.py runs it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import pytest

from trinbox import (
    App,
    AppInfo,
    Group,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    InboxSpec,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._api.codecs import DecodeError
from trinbox._api.handler import decode_row
from trinbox._api.headers import HEADERS_LIMIT, decode_headers
from trinbox._declare._inbox import spec_of
from trinbox._dialects._columns import FoundColumn
from trinbox._dialects.ddl import render_ddl
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.asyncapi import document
from trinbox.errors import DeclarationError, HeaderRefused

PG = PostgresDialect()
MY = MySqlDialect()
LITE = SqliteDialect()


class Mail(Inbox[Lease], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=dict[str, str])


class Bare(Inbox[Lease], table="bare_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Noted(Inbox[Lease], table="noted"):
    """Row mode, the headers in a field of another name."""

    id: Annotated[int, Id(generated=True)]
    note: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    meta: Annotated[dict[str, str], Headers()]


@dataclass
class Email:
    to: str


LITE_BROKER = SqlBroker.sqlite("sqlite:///unused.db")
PG_BROKER = SqlBroker.postgres("postgresql://app@db.internal/app")
MY_BROKER = SqlBroker.mysql("mysql://app@db.internal/app")


# -- the declaration --------------------------------------------------------------------------


def test_a_headers_field_is_a_dict_of_str_to_str() -> None:
    with pytest.raises(DeclarationError) as info:

        class Loose(Inbox[Lease], table="loose"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            headers: Annotated[dict[str, int], Headers()]

    assert str(info.value) == (
        "class test_a_headers_field_is_a_dict_of_str_to_str.<locals>.Loose: a Headers field "
        "holds names and values of text, found 'headers' of type dict[str, int]; declare "
        "headers: Annotated[dict[str, str], Headers()]"
    )
    with pytest.raises(DeclarationError, match="found 'headers' of type str;"):

        class Worded(Inbox[Lease], table="worded"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            headers: Annotated[str, Headers()]


def test_a_headers_field_is_not_generated_and_comes_once() -> None:
    with pytest.raises(DeclarationError, match=r"found Headers\(generated=True\) on 'h'"):

        class Filled(Inbox[Lease], table="filled"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            h: Annotated[dict[str, str], Headers(generated=True)]

    with pytest.raises(DeclarationError, match="found Headers on both 'a' and 'b'"):

        class Twice(Inbox[Lease], table="twice"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[datetime | None, LockedUntil()]
            a: Annotated[dict[str, str], Headers()]
            b: Annotated[dict[str, str], Headers()]


def test_the_manual_builder_declares_the_same_headers() -> None:
    spec = InboxSpec("noted", "id", generated=True).lease("locked_until").headers("meta")

    class Built(Inbox[Lease], spec=spec):
        id: int
        note: str
        locked_until: datetime | None
        meta: dict[str, str]

    assert spec_of(Built).columns == spec_of(Noted).columns
    assert spec_of(Built).headers == spec_of(Noted).headers


# -- the DDL and the startup check -------------------------------------------------------------


def test_the_ddl_writes_a_json_column_that_takes_null() -> None:
    (pg_table,) = render_ddl(PG, spec_of(Bare))[:1]
    assert '"headers"' not in pg_table
    pg_table = render_ddl(PG, spec_of(Mail))[0]
    assert pg_table.endswith('    "payload" BYTEA NOT NULL,\n    "headers" JSONB\n)')
    my_table = render_ddl(MY, spec_of(Mail))[0]
    assert "    `headers` JSON,\n" in my_table
    lite_table = render_ddl(LITE, spec_of(Mail))[0]
    assert lite_table.endswith("    `payload` BLOB NOT NULL,\n    `headers` TEXT\n)")


@pytest.mark.parametrize(
    ("dialect", "found", "fits"),
    [
        (PG, FoundColumn("headers", "jsonb", None, nullable=True), True),
        (PG, FoundColumn("headers", "json", None, nullable=True), True),
        (PG, FoundColumn("headers", "text", None, nullable=True), True),
        (PG, FoundColumn("headers", "bytea", None, nullable=True), False),
        (PG, FoundColumn("headers", "jsonb", "'{}'::jsonb", nullable=False), False),
        (MY, FoundColumn("headers", "json", None, nullable=True), True),
        (MY, FoundColumn("headers", "longtext", None, nullable=True), True),  # MariaDB's JSON
        (MY, FoundColumn("headers", "blob", None, nullable=True), False),
        (MY, FoundColumn("headers", "tinytext", None, nullable=True), False),
        (LITE, FoundColumn("headers", "JSON", None, nullable=True), True),
        (LITE, FoundColumn("headers", "BLOB", None, nullable=True, strict=True), False),
        (LITE, FoundColumn("headers", "TEXT", None, nullable=False), False),
    ],
)
def test_the_column_check_takes_json_text_that_takes_null(
    dialect: PostgresDialect | MySqlDialect | SqliteDialect, found: FoundColumn, fits: bool
) -> None:
    assert (dialect.check_columns(spec_of(Mail), [found]) is None) is fits


def test_the_column_check_names_the_fix() -> None:
    problem = PG.check_columns(spec_of(Mail), [FoundColumn("headers", "bytea", None, True)])
    assert problem == (
        "the Headers column of mail_jobs (Mail) holds the headers as one JSON object, on "
        "PostgreSQL jsonb, json or a text type, found column 'headers' of type bytea; change "
        'its type: ALTER TABLE "mail_jobs" ALTER COLUMN "headers" TYPE jsonb'
    )
    problem = MY.check_columns(spec_of(Mail), [FoundColumn("headers", "json", None, False)])
    assert problem == (
        "the Headers column of mail_jobs (Mail) is NULL for a row published without headers, "
        "found column 'headers' NOT NULL; allow NULL: ALTER TABLE `mail_jobs` MODIFY `headers` "
        "JSON NULL"
    )


# -- the publish --------------------------------------------------------------------------------


def test_insert_statement_writes_the_headers_as_json_with_sorted_names() -> None:
    sql, params = LITE_BROKER.insert_statement(
        Mail, Email("a@example.com"), queue="q", headers={"z": "1", "a": "é"}, paramstyle="named"
    )
    assert sql == (
        "INSERT INTO `mail_jobs` (`queue`, `locked_until`, `payload`, `headers`) "
        "VALUES (:queue, :locked_until, :payload, :headers)"
    )
    assert params["headers"] == '{"a":"é","z":"1"}'
    for broker in (PG_BROKER, MY_BROKER):
        _, values = broker.insert_statement(
            Mail, Email("a@example.com"), queue="q", headers={"z": "1", "a": "é"}
        )
        assert values[-1] == '{"a":"é","z":"1"}'


def test_a_publish_without_headers_writes_null() -> None:
    nothing: tuple[dict[str, str] | None, ...] = (None, {})
    for given in nothing:
        _, params = LITE_BROKER.insert_statement(
            Mail, Email("a@example.com"), queue="q", headers=given, paramstyle="named"
        )
        assert params["headers"] is None


def refusal(row: type[Inbox[Any, Any]], headers: object, **columns: object) -> HeaderRefused:
    message: object = None if spec_of(row).payload is None else Email("a@example.com")
    broker: Any = LITE_BROKER  # headers of any type, as an untyped caller passes them
    with pytest.raises(HeaderRefused) as info:
        broker.insert_statement(row, message, headers=headers, **columns)
    return info.value


def test_a_table_without_a_headers_field_refuses_every_header() -> None:
    error = refusal(Bare, {"tenant": "acme", "trace": "1", "a": "b", "c": "d"})
    assert str(error) == (
        "publish into bare_jobs (Bare): a header goes into the table's Headers field (one the "
        "row cannot hold is refused, never dropped), found the headers 'tenant', 'trace', 'a' "
        "and 1 more and a table without one; add one, like headers: Annotated[dict[str, str], "
        "Headers()], or publish without headers"
    )
    assert error.header == "tenant"
    assert isinstance(error, DeclarationError)
    # No header, nothing refused.
    LITE_BROKER.insert_statement(Bare, Email("a@example.com"), headers={})


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        (
            [("tenant", "acme")],
            "headers are a mapping of names to values, both str, found list "
            "[('tenant', 'acme')]; pass a dict, like headers={\"tenant\": \"acme\"}",
        ),
        (
            {1: "one"},
            "a header's name is a str, found int 1; name it with text, like '1'",
        ),
        ({"": "x"}, "a header has a name, found the empty name ''; give it one"),
        (
            {"retries": 3},
            "a header's value is a str, found int 3 for the header 'retries'; pass it as "
            "text, like 'retries': '3'",
        ),
        (
            {"tenant": None},
            "a header's value is a str, found None for the header 'tenant'; leave the header "
            "out, or give it a str",
        ),
        (
            {"trinbox-attempt": "2"},
            "header names beginning 'trinbox-' (in any case) are trinbox's own, found "
            "'trinbox-attempt'; name it without the prefix",
        ),
        (
            {"Trinbox-Id": "2"},
            "header names beginning 'trinbox-' (in any case) are trinbox's own, found "
            "'Trinbox-Id'; name it without the prefix",
        ),
        (
            {"tenant": "ac\x00me"},
            "a header is text every database keeps as given, found a NUL character in the "
            "value of 'tenant' (PostgreSQL's jsonb holds none); remove it",
        ),
        (
            {"t\udc80": "x"},
            "a header is text that encodes as UTF-8, found the lone surrogate '\\udc80' in the "
            "name 't\\udc80'; write the character it stands for, or remove it",
        ),
    ],
)
def test_a_header_the_field_cannot_hold_is_refused(headers: object, says: str) -> None:
    error = refusal(Mail, headers, queue="q")
    assert str(error) == f"publish into mail_jobs (Mail): {says}"


def test_headers_are_at_most_the_limit_of_json() -> None:
    # {"h":"..."}: 8 bytes around the value.
    LITE_BROKER.insert_statement(
        Mail, Email("a"), queue="q", headers={"h": "x" * (HEADERS_LIMIT - 8)}
    )
    error = refusal(Mail, {"h": "x" * (HEADERS_LIMIT - 7)}, queue="q")
    assert str(error) == (
        "publish into mail_jobs (Mail): a row's headers take at most 65,536 bytes of JSON, "
        "found 65,537; put what is big into the payload, and keep headers for metadata"
    )


def test_headers_are_given_as_headers_not_by_their_field() -> None:
    with pytest.raises(DeclarationError) as info:
        LITE_BROKER.insert_statement(Noted, note="n", meta={"a": "b"})
    assert str(info.value) == (
        "publish into noted (Noted): headers are given as headers= (checked, then written into "
        "the Headers field meta), found meta= among the columns; pass headers={...}"
    )
    _, params = LITE_BROKER.insert_statement(
        Noted, note="n", headers={"a": "b"}, paramstyle="named"
    )
    assert params == {"note": "n", "locked_until": None, "meta": '{"a":"b"}'}


# -- the delivery ------------------------------------------------------------------------------


def test_the_column_decodes_into_read_only_headers() -> None:
    found = decode_headers('{"z": "1", "a": "2"}')
    assert isinstance(found, keys.Headers)
    assert list(found) == ["a", "z"]
    assert found == {"a": "2", "z": "1"}
    assert found["z"] == "1"
    assert repr(found) == "Headers({'a': '2', 'z': '1'})"
    assert decode_headers(None) == {}
    assert decode_headers(b'{"a": "b"}') == {"a": "b"}
    with pytest.raises(TypeError):
        found["b"] = "c"  # type: ignore[index]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{", "the Headers column holds no JSON (Expecting property name enclosed in double "),
        ("[1]", "the Headers column holds a JSON object of text to text, found list [1]"),
        (
            '{"a": 1}',
            "the Headers column holds a JSON object of text to text, found int 1 for the "
            "header 'a'",
        ),
        (7, "the Headers column holds JSON text, found int 7"),
    ],
)
def test_a_column_that_is_no_object_of_text_does_not_decode(raw: object, says: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode_headers(raw)
    assert str(info.value).startswith(says)


def test_a_row_mode_row_holds_no_headers() -> None:
    values = {"id": 1, "note": "n", "locked_until": None, "meta": json.dumps({"a": "b"})}
    row = decode_row(spec_of(Noted), values)
    assert isinstance(row, Noted)
    assert row.meta == {}


async def wants_headers(email: Email, headers: keys.Headers) -> None: ...
async def batch_headers(emails: list[Email], headers: keys.Headers) -> None: ...


def test_keys_headers_needs_a_headers_field_and_one_row() -> None:
    app = App(AppInfo("t"))
    app.include(LITE_BROKER, subscriber(InboxQueue(Mail, "q"))(wants_headers))
    with pytest.raises(DeclarationError) as info:
        app.include(LITE_BROKER, subscriber(InboxQueue(Bare, "q"))(wants_headers))
        document(app)
    assert "keys.Headers reads the table's Headers field, found none on bare_jobs (Bare); " in (
        str(info.value)
    )
    with pytest.raises(DeclarationError, match="a batch handler takes no per-row key, found "):
        other = App(AppInfo("t"))
        other.include(LITE_BROKER, subscriber(InboxQueue(Mail, "q").batch(3))(batch_headers))  # type: ignore[call-overload]
        document(other)


# -- AsyncAPI ---------------------------------------------------------------------------------


async def note(row: Noted) -> None: ...


def test_asyncapi_describes_the_headers_beside_the_payload() -> None:
    app = App(AppInfo("t"))
    app.include(LITE_BROKER, subscriber(InboxQueue(Mail, "q"))(wants_headers))
    app.include(LITE_BROKER, subscriber(InboxQueue(Noted, "n"))(note))
    doc = document(app)
    messages = doc["components"]["messages"]
    headers = {
        "type": "object",
        "description": "The row's Headers field: names and values of text, read by keys.Headers.",
        "additionalProperties": {"type": "string"},
    }
    assert messages["Email"]["headers"] == headers
    assert messages["Noted"]["headers"] == headers
    # The row's own schema leaves the Headers column to the message's headers.
    assert list(doc["components"]["schemas"]["Noted"]["properties"]) == [
        "id",
        "note",
        "locked_until",
    ]
    assert doc["channels"]["noted"]["bindings"]["x-trinbox"]["columns"]["meta"] == "headers"
