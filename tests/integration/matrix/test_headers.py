"""The ``Headers()`` role on every stand and form, in tables ``create_tables`` makes: every way
to publish writes the headers and the handler reads them through ``keys.Headers`` (row mode
too, whose row holds none); a retry, a move into a dead letter group or table and the redrive
back keep them; a column that does not hold a JSON object of text to text settles by the
decode policy; a table without a Headers field refuses every header and writes nothing."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    App,
    Attempt,
    Group,
    HandlerOutcome,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    Publisher,
    RetryAfter,
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox._operations.queues import opened, queues_of, redrive
from trinbox.errors import HeaderRefused, SchemaError
from trinbox.schema import DialectName, ddl
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import DUE, cells, insert_rows

TABLE = "headed_jobs"
PLAIN = "headed_plain"


def _str_dict() -> dict[str, str]:
    return {}


class HeadedLock(Inbox[RowLock], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


class HeadedLease(Inbox[Lease], table=TABLE):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


class HeadedKeyed(Inbox[Advisory], table=TABLE, advisory_lock="headed-{id}"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    origin: Annotated[str | None, OriginGroup()] = None
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()] = field(default_factory=_str_dict)


HEADED: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": HeadedLock,
    "lease": HeadedLease,
    "advisory": HeadedKeyed,
}


# Group-less, in row mode: dead letters move to a table of their own.
class PlainLock(Inbox[RowLock], table=PLAIN):
    id: Annotated[int, Id(generated=True)]
    note: str
    attempt: Annotated[int, Attempt()]
    meta: Annotated[dict[str, str], Headers()]


class PlainLease(Inbox[Lease], table=PLAIN):
    id: Annotated[int, Id(generated=True)]
    note: str
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    meta: Annotated[dict[str, str], Headers()]


class PlainKeyed(Inbox[Advisory], table=PLAIN, advisory_lock="plain-{id}"):
    id: Annotated[int, Id(generated=True)]
    note: str
    attempt: Annotated[int, Attempt()]
    meta: Annotated[dict[str, str], Headers()]


PLAIN_ROWS: dict[str, type[Inbox[Any, Any]]] = {
    "row_lock": PlainLock,
    "lease": PlainLease,
    "advisory": PlainKeyed,
}


@dataclass
class Email:
    to: str


TENANT = {"tenant": "acme", "trace": "ü-1"}


def _tables(
    app: App, broker: SqlBroker[Any], *rows: tuple[type[Inbox[Any, Any]], str | None]
) -> None:
    async def create() -> None:
        for row, dead in rows:
            await broker.create_tables(row, dead_letter=dead)

    app.on_startup(create)


def _stored(case: Case, sql: str) -> list[dict[str, str] | None]:
    """The Headers column's values, read back by the stand's own driver (psycopg decodes
    jsonb itself)."""
    found: list[dict[str, str] | None] = []
    for (raw,) in case.stand.rows(sql):
        found.append(raw if raw is None or isinstance(raw, dict) else json.loads(raw))
    return found


async def test_every_way_to_publish_hands_the_headers_to_the_handler(case: Case) -> None:
    row = HEADED[case.form]
    broker = case.stand.broker()
    seen: list[tuple[str, dict[str, str]]] = []
    queue = InboxQueue(row, "mail")

    @subscriber(queue)
    async def send(email: Email, headers: keys.Headers, attempt: keys.Attempt) -> None:
        assert isinstance(headers, keys.Headers)
        seen.append((email.to, dict(headers)))

    app = make_app()
    app.include(broker, send)
    _tables(app, broker, (row, None))
    mails = Publisher(queue, Email)
    broker.route(row, "mail")  # publishes by name carry headers too
    async with serving(app):
        await broker.publish(row, Email("publish"), queue="mail", headers=TENANT)
        await broker.publish_named("mail", Email("named"), headers={"by": "name"})
        async with broker.transaction() as tx:
            await tx.publish_named("mail", Email("tx named"), headers={"in": "tx named"})
        async with broker.transaction() as tx:
            await tx.publish(row, Email("tx"), queue="mail", headers={"in": "tx"})
        await mails.publish(broker, Email("publisher"), headers={"by": "publisher"})
        make: Any = row  # the row class of this form
        made = make(
            queue="mail",
            retry_after=DUE,
            attempt=1,
            payload=b'{"to": "row"}',
            headers={"from": "row"},
        )
        await broker.publish_row(made)
        await broker.publish(row, Email("none"), queue="mail")
        with trio.fail_after(10):
            await settled(app, send, 7)
    assert sorted(seen) == [
        ("named", {"by": "name"}),
        ("none", {}),
        ("publish", TENANT),
        ("publisher", {"by": "publisher"}),
        ("row", {"from": "row"}),
        ("tx", {"in": "tx"}),
        ("tx named", {"in": "tx named"}),
    ]


async def test_a_retry_a_dead_letter_group_and_its_redrive_keep_the_headers(case: Case) -> None:
    row = HEADED[case.form]
    broker = case.stand.broker()
    seen: list[tuple[int, dict[str, str]]] = []
    spent = True

    @subscriber(InboxQueue(row, "mail"))
    async def send(email: Email, attempt: keys.Attempt, headers: keys.Headers) -> HandlerOutcome:
        seen.append((attempt, dict(headers)))
        return HandlerOutcome.retry() if spent else HandlerOutcome.ack()

    app = make_app()
    app.include(broker, send).max_attempts(2).dead_letter("mail.dead")
    _tables(app, broker, (row, None))
    async with serving(app):
        await broker.publish(row, Email("a@x"), queue="mail", headers=TENANT)
        with trio.fail_after(10):
            await settled(app, send, 2)  # a retry, then the move into the dead letter group
    assert seen == [(1, TENANT), (2, TENANT)]
    assert case.stand.rows(f"SELECT queue, origin FROM {TABLE}") == [("mail.dead", "mail")]
    assert _stored(case, f"SELECT headers FROM {TABLE}") == [TENANT]

    (mail,) = queues_of(app)
    async with opened(app.brokers):
        done = await redrive(mail, None)
    assert done.moved == (1,)
    spent = False
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 1)
    assert seen[2:] == [(1, TENANT)]


async def test_a_dead_letter_table_and_its_redrive_keep_the_headers_in_row_mode(
    case: Case,
) -> None:
    row = PLAIN_ROWS[case.form]
    broker = case.stand.broker()
    seen: list[tuple[dict[str, str], dict[str, str]]] = []
    spent = True

    async def handle(job: Any, headers: keys.Headers) -> HandlerOutcome:
        seen.append((job.meta, dict(headers)))  # the row's field holds none: the key has them
        return HandlerOutcome.retry() if spent else HandlerOutcome.ack()

    # Row mode: the handler takes the row class of this form.
    handle.__annotations__["job"] = row
    note = subscriber(InboxQueue(row, "plain"))(handle)
    app = make_app()
    app.include(broker, note).max_attempts(1).dead_letter(f"{PLAIN}_dead")
    _tables(app, broker, (row, f"{PLAIN}_dead"))
    async with serving(app):
        await broker.publish(row, note="n", headers={"tenant": "acme"})
        with trio.fail_after(10):
            await settled(app, note, 1)
    assert seen == [({}, {"tenant": "acme"})]
    assert case.stand.rows(f"SELECT id FROM {PLAIN}") == []
    assert _stored(case, f"SELECT meta FROM {PLAIN}_dead") == [{"tenant": "acme"}]

    (plain,) = queues_of(app)
    async with opened(app.brokers):
        done = await redrive(plain, None)
    assert done.moved == (1,)
    assert _stored(case, f"SELECT meta FROM {PLAIN}") == [{"tenant": "acme"}]
    spent = False
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, note, 1)
    assert seen[1:] == [({}, {"tenant": "acme"})]


@pytest.mark.parametrize("stored", ['{"attempt": 1}', "[1]", '"text"'])
async def test_headers_that_do_not_decode_settle_by_the_decode_policy(
    case: Case, stored: str, caplog: pytest.LogCaptureFixture
) -> None:
    row = HEADED[case.form]
    broker = case.stand.broker()
    seen: list[str] = []

    @subscriber(InboxQueue(row, "mail"))
    async def send(email: Email) -> None:
        seen.append(email.to)

    app = make_app()
    app.include(broker, send)
    _tables(app, broker, (row, None))
    caplog.set_level(logging.WARNING, logger="trinbox.delivery")
    async with serving(app):
        insert_rows(
            case.stand,
            TABLE,
            [
                {"queue": "mail", "retry_after": DUE, "payload": b'{"to": "bad"}',
                 "headers": stored},
                {"queue": "mail", "retry_after": DUE, "payload": b'{"to": "good"}',
                 "headers": '{"a": "b"}'},
            ],
        )  # fmt: skip
        with trio.fail_after(10):
            await settled(app, send, 2)
    # Dropped by the default decode policy: the row is finished, its handler never ran.
    assert seen == ["good"]
    assert case.stand.rows(f"SELECT id FROM {TABLE}") == []
    warnings = [r.getMessage() for r in caplog.records if "does not decode" in r.getMessage()]
    assert len(warnings) == 1
    assert (
        "the row does not decode: the Headers column holds a JSON object of text to text"
        in (warnings[0])
    )


async def test_a_table_without_a_headers_field_refuses_them_and_writes_nothing(
    case: Case,
) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        refused = r"^publish into email_jobs .* and a table without one; "
        with pytest.raises(HeaderRefused, match=refused):
            await broker.publish(
                case.email, Email("a@x"), name="emails", customer="c", headers={"a": "b"}
            )
        with pytest.raises(HeaderRefused):
            async with broker.transaction() as tx:
                await tx.publish(case.email, Email("a@x"), name="emails", headers={"a": "b"})
        assert case.stand.rows("SELECT job_id FROM email_jobs") == []
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c", headers={})
        with trio.fail_after(10):
            await settled(app, send, 1)


# A Headers column the startup check refuses, per stand: the DDL's own, changed.
BROKEN: dict[str, tuple[str, str, str]] = {
    "postgres": (
        '"headers" JSONB',
        '"headers" BYTEA',
        "holds the headers as one JSON object, on PostgreSQL jsonb, json or a text type, found "
        "column 'headers' of type bytea; change its type: ALTER TABLE \"headed_jobs\" ALTER "
        'COLUMN "headers" TYPE jsonb',
    ),
    "mariadb": (
        "`headers` JSON",
        "`headers` LONGTEXT NOT NULL",
        "is NULL for a row published without headers, found column 'headers' NOT NULL; allow "
        "NULL: ALTER TABLE `headed_jobs` MODIFY `headers` LONGTEXT NULL",
    ),
    "sqlite": (
        "`headers` TEXT",
        "`headers` TEXT NOT NULL",
        "is NULL for a row published without headers, found column 'headers' NOT NULL; "
        "declare `headers` without NOT NULL (SQLite changes a column's declaration by "
        "recreating its table)",
    ),
}


@cells(forms=("lease",))
async def test_the_startup_check_refuses_a_headers_column_that_cannot_hold_them(
    case: Case,
) -> None:
    good, bad, says = BROKEN[case.name]
    dialects: dict[str, DialectName] = {"postgres": "postgres", "mariadb": "mysql"}
    dialect = dialects.get(case.name, "sqlite")
    table, *rest = ddl(HeadedLease, dialect)
    assert good in table
    for statement in (table.replace(good, bad), *rest):
        case.stand.script(statement)
    broker = case.stand.broker()

    @subscriber(InboxQueue(HeadedLease, "mail"))
    async def send(email: Email) -> None:
        raise AssertionError("never delivered")

    app = make_app()
    app.include(broker, send)
    with trio.fail_after(10), pytest.raises(SchemaError) as caught:
        await app.serve()
    assert str(caught.value).endswith(f"the Headers column of {TABLE} (HeadedLease) {says}")
