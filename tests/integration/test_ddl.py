"""Tables from declarations (issue 10, item 1), end to end on every stand: every example's
table — the row classes of examples/, the README's ``Transcode`` and the matrix's row classes —
created by ``broker.create_tables`` (twice: it is idempotent) on a fresh database, accepted by
the startup check, and served: one row published, handled and acked, and, where the mount
declares a dead letter destination, one row retried until its attempts are spent and moved
there (into the dead letter table the DDL created, for a table without a group)."""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import pytest
import trio

import trinbox
import trinbox.schema
from examples import mailer, reports, transcoder
from trinbox import (
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    SqlType,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox._engine.app import Mount
from trinbox.errors import DeclarationError
from trinbox.schema import dialect_named
from trinbox.testing import settled

from .matrix import schema
from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

README = Path(__file__).parents[2] / "README.md"
GROUP = "jobs"


def readme_transcode() -> type[Inbox[Any, Any]]:
    """The README's ``Transcode``, declared from its own text."""
    text = README.read_text()
    found = re.search(r"^class Transcode\(.*?(?=\n\n)", text, flags=re.MULTILINE | re.DOTALL)
    assert found is not None
    # A module of its own: the class statement resolves its annotations in its module.
    module = types.ModuleType("tests_readme_transcode")
    sys.modules[module.__name__] = module
    exec("from typing import Annotated\nfrom trinbox import *\n", module.__dict__)
    exec(found.group(0), module.__dict__)
    namespace = module.__dict__
    row: type[Inbox[Any, Any]] = namespace["Transcode"]
    return row


def _matrix_rows() -> list[type[Inbox[Any, Any]]]:
    found = [*schema.EMAIL.values(), *schema.FINISHED.values(), *schema.PLAIN.values()]
    found += [schema.NextJob, *schema.MAIL.values()]
    found += [schema.RepeatableLeasedEmail, schema.SerializableLeasedEmail]
    return found


DIALECT = {stand: dialect_named("mysql" if stand == "mariadb" else stand) for stand in STANDS}
ROWS: dict[str, type[Inbox[Any, Any]]] = {
    "examples.transcoder": transcoder.Transcode,
    "examples.mailer": mailer.SendEmail,
    "examples.reports": reports.Report,
    "README.Transcode": readme_transcode(),
    **{f"matrix.{row.__qualname__}": row for row in _matrix_rows()},
}
CASES = [
    (stand, name)
    for stand in STANDS
    for name, row in ROWS.items()
    if spec_of(row).form in DIALECT[stand].forms
    and spec_of(row).isolation in DIALECT[stand].isolations
]


@dataclass
class Msg:
    outcome: str


def dead_letter_for(row: type[Any]) -> str | None:
    """Where spent rows go: the examples' own destinations, a group of a grouped table, or
    ``<table>_dead``; none for a table without attempts."""
    spec = spec_of(row)
    if row is transcoder.Transcode:
        return "video_jobs_dead"
    if row is mailer.SendEmail:
        return "emails.failed"
    if spec.attempt is None:
        return None
    return f"{GROUP}.dead" if spec.group is not None else f"{spec.table}_dead"


def columns_for(row: type[Any], outcome: str) -> dict[str, object]:
    """The publish's columns: the group, and a value for each data field (the outcome in row
    mode, where the handler reads it from the row)."""
    spec = spec_of(row)
    found: dict[str, object] = {}
    if spec.group is not None:
        found[spec.group.field] = GROUP
    for col in spec.data:
        if not col.generated:
            found[col.field] = outcome
    return found


def outcome_of(row: type[Any], delivered: Any) -> str:
    if spec_of(row).payload is not None:
        return str(delivered.outcome)
    return str(getattr(delivered, spec_of(row).data[0].field))


@pytest.mark.parametrize(("stand_name", "name"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
async def test_a_table_from_its_declaration_serves_its_queue(
    stand_name: StandName, name: str, tmp_path: Path
) -> None:
    row = ROWS[name]
    spec = spec_of(row)
    dest = dead_letter_for(row)
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker(poll_interval=0.05)
        app = make_app()

        @app.on_startup
        async def create() -> None:
            await broker.create_tables(row, dead_letter=dest)
            await broker.create_tables(row, dead_letter=dest)  # does nothing the second time

        handled: list[str] = []

        async def handle(delivered: Any) -> HandlerOutcome:
            outcome = outcome_of(row, delivered)
            handled.append(outcome)
            return HandlerOutcome.ack() if outcome == "ok" else HandlerOutcome.retry()

        message_type = Msg if spec.payload is not None else row
        handle.__annotations__ = {"delivered": message_type, "return": HandlerOutcome}
        sub = subscriber(InboxQueue(row, GROUP))(handle)
        mount: Mount = app.include(broker, sub)
        if dest is not None:
            mount.max_attempts(2).dead_letter(dest)
        async with serving(app):
            await _publish(broker, row, "ok")
            settlements = 1
            if dest is not None:
                await _publish(broker, row, "fail")
                settlements += 2  # a retry, then the move
            with trio.fail_after(20):
                await settled(app, sub, settlements)
        assert sorted(handled) == sorted(["ok", *(["fail"] * 2 if dest else [])])
        _assert_settled(stand, row, dest)


async def _publish(broker: Any, row: type[Any], outcome: str) -> None:
    columns = columns_for(row, outcome)
    if spec_of(row).payload is not None:
        await broker.publish(row, Msg(outcome), **columns)
    else:
        await broker.publish(row, **columns)


def _q(stand: Stand, name: str) -> str:
    return f'"{name}"' if stand.name == "postgres" else f"`{name}`"


def _assert_settled(stand: Stand, row: type[Any], dest: str | None) -> None:
    """The acked row is gone (or marked processed); the spent one is in its destination."""
    spec = spec_of(row)
    table = _q(stand, spec.table)
    ident = _q(stand, spec.id.column)
    mine = f" AND {_q(stand, spec.group.column)} = '{GROUP}'" if spec.group is not None else ""
    if spec.processed_at is not None:
        processed = _q(stand, spec.processed_at.column)
        assert stand.rows(f"SELECT {ident} FROM {table} WHERE {processed} IS NULL{mine}") == []
    else:
        assert stand.rows(f"SELECT {ident} FROM {table} WHERE 1 = 1{mine}") == []
    if dest is None:
        return
    if spec.group is not None:
        group = _q(stand, spec.group.column)
        moved = stand.rows(f"SELECT {ident} FROM {table} WHERE {group} = ?", dest)
    else:
        moved = stand.rows(f"SELECT {ident} FROM {_q(stand, dest)}")
    assert len(moved) == 1


# -- idempotency, overrides, refusals ---------------------------------------------------------


def _index_count(stand: Stand, table: str) -> int:
    if stand.name == "postgres":
        return int(stand.value("SELECT COUNT(*) FROM pg_indexes WHERE tablename = ?", table))
    if stand.name == "sqlite":
        return len(stand.rows(f"SELECT name FROM pragma_index_list('{table}')"))
    return int(
        stand.value(
            "SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            table,
        )
    )


@pytest.mark.parametrize("stand_name", STANDS)
async def test_a_second_create_leaves_the_table_and_its_rows_alone(
    stand_name: StandName, tmp_path: Path
) -> None:
    row = mailer.SendEmail
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.add_broker(broker)
        app.on_startup(lambda: broker.create_tables(row))
        async with serving(app):
            await broker.publish(row, Msg("kept"), name="nobody-subscribes")
            indexes = _index_count(stand, "email_jobs")
            await broker.create_tables(row)
            # The claim index, and the primary key's (SQLite's rowid has none).
            assert (
                _index_count(stand, "email_jobs") == indexes == (1 if stand_name == "sqlite" else 2)
            )
            assert stand.value("SELECT COUNT(*) FROM email_jobs") == 1


class Typed(Inbox[Lease], table="typed_jobs"):
    """A data column of every Python type the DDL maps, and two overrides."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    text: str
    number: int | None
    ratio: float
    flag: bool
    blob: bytes
    amount: Decimal
    key: UUID
    doc: dict[str, int] | None
    code: Annotated[str, SqlType("VARCHAR(12)")]
    note: Annotated[str | None, SqlType(postgres="VARCHAR(7)", mysql="VARCHAR(7)")]


def _column_types(stand: Stand, table: str) -> dict[str, str]:
    if stand.name == "postgres":
        sql = (
            "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns "
            "JOIN pg_attribute ON attrelid = ?::regclass AND attname = column_name "
            "WHERE table_name = ?"
        )
        return {str(n): str(t) for n, t in stand.rows(sql, table, table)}
    if stand.name == "sqlite":
        return {
            str(r[1]): str(r[2]) for r in stand.rows(f"SELECT * FROM pragma_table_info('{table}')")
        }
    sql = (
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
    )
    return {
        str(n): t.decode() if isinstance(t, bytes) else str(t) for n, t in stand.rows(sql, table)
    }


EXPECTED_TYPES: dict[StandName, dict[str, str]] = {
    "postgres": {
        "text": "text",
        "number": "bigint",
        "ratio": "double precision",
        "flag": "boolean",
        "blob": "bytea",
        "amount": "numeric",
        "key": "uuid",
        "doc": "jsonb",
        "code": "character varying(12)",
        "note": "character varying(7)",
    },
    "mariadb": {
        "text": "text",
        "number": "bigint(20)",
        "ratio": "double",
        "flag": "tinyint(1)",
        "blob": "longblob",
        "amount": "decimal(38,10)",
        "key": "char(36)",
        "doc": "longtext",
        "code": "varchar(12)",
        "note": "varchar(7)",
    },
    "sqlite": {
        "text": "TEXT",
        "number": "INTEGER",
        "ratio": "REAL",
        "flag": "INTEGER",
        "blob": "BLOB",
        "amount": "NUMERIC",
        "key": "TEXT",
        "doc": "TEXT",
        "code": "VARCHAR(12)",
        "note": "TEXT",
    },
}


@pytest.mark.parametrize("stand_name", STANDS)
async def test_data_columns_take_the_types_of_their_fields_and_overrides(
    stand_name: StandName, tmp_path: Path
) -> None:
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.on_startup(lambda: broker.create_tables(Typed))

        @subscriber(InboxQueue(Typed, "typed"))
        async def handle(payload: bytes) -> None:
            pass

        app.include(broker, handle)
        async with serving(app):  # the startup check accepts the table
            found = _column_types(stand, "typed_jobs")
            values: dict[str, Any] = {
                "text": "t",
                "number": None,
                "ratio": 0.5,
                "flag": True,
                "blob": b"\x00b",
                "amount": Decimal("1.25"),
                "key": UUID(int=7),
                "doc": {"a": 1},
                "code": "c",
                "note": None,
            }
            await broker.publish(Typed, b"p", **values)
            with trio.fail_after(20):
                await settled(app, handle, 1)
    expected = EXPECTED_TYPES[stand_name]
    assert {name: found[name] for name in expected} == expected


class TypedRow(Inbox[Lease], table="typed_rows"):
    """Row mode over the values drivers do not bind as themselves."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    amount: Decimal
    key: UUID
    doc: dict[str, list[int]]
    items: list[str] | None


@pytest.mark.parametrize("stand_name", STANDS)
async def test_json_decimal_and_uuid_fields_round_trip(
    stand_name: StandName, tmp_path: Path
) -> None:
    # A dict, a list, a Decimal and a UUID are published as themselves into the columns the
    # DDL gives them, and a row-mode handler gets them back as themselves.
    got: list[TypedRow] = []
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.on_startup(lambda: broker.create_tables(TypedRow))

        @subscriber(InboxQueue(TypedRow, "typed"))
        async def handle(row: TypedRow) -> None:
            got.append(row)

        app.include(broker, handle)
        async with serving(app):
            await broker.publish(
                TypedRow,
                amount=Decimal("12.5"),
                key=UUID(int=9),
                doc={"a": [1, 2]},
                items=["x", "y"],
            )
            await broker.publish(
                TypedRow, amount=Decimal("0.1"), key=UUID(int=10), doc={}, items=None
            )
            with trio.fail_after(20):
                await settled(app, handle, 2)
    found = sorted(((r.amount, r.key, r.doc, r.items) for r in got), key=lambda t: t[1])
    assert found == [
        (Decimal("12.5"), UUID(int=9), {"a": [1, 2]}, ["x", "y"]),
        (Decimal("0.1"), UUID(int=10), {}, None),
    ]


async def test_create_tables_outside_serve_says_where_to_call_it(tmp_path: Path) -> None:
    broker = trinbox.SqlBroker.sqlite(f"sqlite:///{tmp_path / 'q.db'}")
    with pytest.raises(trinbox.errors.Closed, match="call it in an on_startup hook"):
        await broker.create_tables(mailer.SendEmail)


def test_an_unmappable_type_is_refused_before_anything_runs() -> None:
    class Odd(Inbox[Lease], table="odd_jobs"):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]
        when: complex

    with pytest.raises(DeclarationError, match="field 'when' of odd_jobs"):
        trinbox.schema.ddl(Odd, "postgres")
