"""Names are names (issue 9, item 2), end to end on every stand and form: a row class of drawn
table, schema and column names and advisory key literal (tests/_names.py) is declared, its
table created, a subscription started, two rows published and handled (one acked, one retried
until its attempts are spent and moved to the dead letter destination) — and it works, or it
is refused with a ``DeclarationError`` naming the rule before anything runs: at the class
statement (NUL, a lone surrogate, a dot), at the mount (what the dialect's server cannot hold),
or, for a dead letter table, when the app starts. Nothing else.

Every example runs on a database of its own. The test's own SQL quotes names itself and binds
no parameters, so nothing here goes through the code under test but the queue.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.errors import DeclarationError, SchemaError
from trinbox.testing import settled

from ..._names import FIELDS, Shape, declare, names, refused_anywhere, shapes
from ..serving import make_app, serving
from ..stands import MariaStand, PostgresStand, SqliteStand, Stand, StandName, fresh_stand

# Examples per (stand, form) cell: each is a database of its own and a served app.
EXAMPLES = 30

CELLS = [
    (stand, form)
    for stand in ("sqlite", "postgres", "mariadb")
    for form in ("row_lock", "lease", "advisory")
    if not (stand == "sqlite" and form == "row_lock")
]

GROUP = "jobs"
DEAD_GROUP = "jobs.dead"

# Column types by field, per stand.
TYPES: dict[StandName, dict[str, str]] = {
    "sqlite": {
        "id": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "grp": "TEXT NOT NULL",
        "origin": "TEXT",
        "data": "TEXT",
        "retry_after": "TEXT NOT NULL",
        "attempt": "INTEGER NOT NULL DEFAULT 1",
        "locked_until": "TEXT",
        "processed_at": "TEXT",
        "payload": "BLOB",
    },
    "postgres": {
        "id": "BIGSERIAL PRIMARY KEY",
        "grp": "TEXT NOT NULL",
        "origin": "TEXT",
        "data": "TEXT",
        "retry_after": "TIMESTAMPTZ NOT NULL",
        "attempt": "INT NOT NULL DEFAULT 1",
        "locked_until": "TIMESTAMPTZ",
        "processed_at": "TIMESTAMPTZ",
        "payload": "BYTEA",
    },
    "mariadb": {
        "id": "BIGINT AUTO_INCREMENT PRIMARY KEY",
        "grp": "VARCHAR(191) NOT NULL",
        "origin": "VARCHAR(191)",
        "data": "VARCHAR(191)",
        "retry_after": "DATETIME(6) NOT NULL",
        "attempt": "INT NOT NULL DEFAULT 1",
        "locked_until": "DATETIME",
        "processed_at": "DATETIME(6)",
        "payload": "LONGBLOB",
    },
}


@dataclass
class Msg:
    to: str


# -- the test's own SQL: quoted names, no parameters --------------------------------------------


def quote(stand: StandName, name: str) -> str:
    mark = '"' if stand == "postgres" else "`"
    return mark + name.replace(mark, mark * 2) + mark


def table_of(stand: StandName, schema: str | None, table: str) -> str:
    if schema is None:
        return quote(stand, table)
    return f"{quote(stand, schema)}.{quote(stand, table)}"


def run(stand: Stand, statements: list[str]) -> None:
    """Each statement alone, as written (no parameters, so no client side interpolation)."""
    if isinstance(stand, SqliteStand):
        with contextlib.closing(sqlite3.connect(stand.path)) as conn:
            for sql in statements:
                conn.execute(sql)
            conn.commit()
    elif isinstance(stand, PostgresStand):
        with stand._connect() as conn:
            for sql in statements:
                conn.execute(sql)
    else:
        assert isinstance(stand, MariaStand)
        maria = stand._connect()
        try:
            cur = maria.cursor()
            for sql in statements:
                cur.execute(sql)
        finally:
            maria.close()


def rows(stand: Stand, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(stand, SqliteStand):
        with contextlib.closing(sqlite3.connect(stand.path)) as conn:
            return [tuple(r) for r in conn.execute(sql)]
    if isinstance(stand, PostgresStand):
        with stand._connect() as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    assert isinstance(stand, MariaStand)
    maria = stand._connect()
    try:
        cur = maria.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        maria.close()


def create(stand: Stand, shape: Shape, *, dead: bool) -> list[str]:
    """Create the shape's schema, table and (``dead``) dead letter table; the statements that
    drop what outlives the stand's database (a MariaDB schema is a database of its own)."""
    name = stand.name
    cleanup: list[str] = []
    statements: list[str] = []
    if shape.schema is not None:
        if name == "postgres":
            statements.append(f"CREATE SCHEMA {quote(name, shape.schema)}")
        else:
            statements.append(f"CREATE DATABASE {quote(name, shape.schema)}")
            cleanup.append(f"DROP DATABASE IF EXISTS {quote(name, shape.schema)}")
    table = table_of(name, shape.schema, shape.table)
    columns = ", ".join(
        f"{quote(name, column)} {TYPES[name][field]}" for field, column in shape.columns.items()
    )
    tail = " ENGINE=InnoDB CHARACTER SET utf8mb4" if name == "mariadb" else ""
    statements.append(f"CREATE TABLE {table} ({columns}){tail}")
    if dead and shape.dead is not None:
        dest = table_of(name, shape.schema, shape.dead)
        if name == "postgres":
            statements.append(f"CREATE TABLE {dest} (LIKE {table})")
        elif name == "mariadb":
            statements.append(f"CREATE TABLE {dest} LIKE {table}")
        else:
            statements.append(f"CREATE TABLE {dest} AS SELECT * FROM {table} WHERE 0")
    try:
        run(stand, statements)
    except BaseException:
        run(stand, cleanup)
        raise
    return cleanup


@contextlib.contextmanager
def stand_for(name: StandName) -> Iterator[Stand]:
    with tempfile.TemporaryDirectory() as tmp, fresh_stand(name, Path(tmp)) as stand:
        yield stand


# -- the property -----------------------------------------------------------------------------


def values() -> st.SearchStrategy[str]:
    """Values of the data column and group: drawn like names (they travel as parameters), short
    enough for VARCHAR(191), and text every server stores."""
    return names().filter(lambda v: not refused_anywhere(v) and len(v) <= 60)


@st.composite
def examples(draw: st.DrawFn, stand: StandName, form: str) -> tuple[Shape, str, str, bool]:
    shape = draw(shapes(form, stand))
    first, second = draw(st.lists(values(), min_size=2, max_size=2, unique=True))
    row_mode = "payload" not in shape.columns
    return shape, first, second, row_mode


@pytest.mark.parametrize(("stand_name", "form"), CELLS, ids=[f"{s}-{f}" for s, f in CELLS])
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
async def test_a_queue_of_any_names_works_or_is_refused_at_its_declaration(
    stand_name: StandName, form: str, data: st.DataObject
) -> None:
    shape, first, second, row_mode = data.draw(examples(stand_name, form))
    event(await works_or_is_refused(stand_name, shape, first, second, row_mode))


def plain_shape(form: str, **columns: str) -> Shape:
    """A table of the form with an id, a data column, an attempt (a lease), renamed as given."""
    named = {"id": "id", "data": "data", "attempt": "attempt"}
    if form == "lease":
        named["locked_until"] = "locked_until"
    named.update(columns)
    return Shape(
        form,
        "jobs",
        None,
        dict(sorted(named.items(), key=lambda kv: FIELDS.index(kv[0]))),
        "k-",
        "dead",
    )


# The defects of issue 9, item 2, one by one: the old in-band marker in a name (it became a
# parameter), "%" in a MySQL column (publish raised a bare KeyError), an id column named like
# the advisory alias (ORDER BY was ambiguous), NUL (sent to the server).
DEFECTS = {
    "marker": replace(
        plain_shape("x", data="\u27e8now\u27e9", attempt="\u27e8id\u27e9"), table="j\u27e8id\u27e9"
    ),
    "percent": replace(plain_shape("x", data="100%", attempt="%s"), table="50%"),
    "lock-alias": plain_shape("x", id="__lock", data="__LOCK_2"),
    "nul": plain_shape("x", data="da\x00ta"),
}


@pytest.mark.parametrize(
    ("stand_name", "form", "defect"),
    [(s, f, d) for s, f in CELLS for d in DEFECTS],
    ids=[f"{s}-{f}-{d}" for s, f in CELLS for d in DEFECTS],
)
async def test_the_names_of_issue_9(stand_name: StandName, form: str, defect: str) -> None:
    shape = DEFECTS[defect]
    columns = dict(shape.columns)
    if form == "lease":
        columns.setdefault("locked_until", "locked_until")
    shape = replace(
        shape, form=form, columns=dict(sorted(columns.items(), key=lambda kv: FIELDS.index(kv[0])))
    )
    what = await works_or_is_refused(stand_name, shape, "a", "b", row_mode=True)
    assert what == ("refused by the class statement" if defect == "nul" else "served")


@pytest.mark.parametrize("stand_name", ["sqlite", "postgres", "mariadb"])
async def test_a_published_value_never_becomes_sql(stand_name: StandName) -> None:
    # With the in-band marker, the payload column "⟩ ⟨data⟩" held a parameter slot of the
    # data column: on MySQL the client pasted the published value into the column name, where
    # its backtick closed the name; the value went on to finish the INSERT (the id column is
    # named "⟩ 'd", what the pasted value begins with) and ran a statement of its own
    # (aiomysql enables multi-statements). A publish runs no startup check: the old code
    # dropped the table and raised nothing.
    attack = "d`) VALUES (1, NULL, 5); DROP TABLE victim; -- "
    shape = plain_shape("lease", id="\u27e9 'd", payload="\u27e9 \u27e8data\u27e9")
    row = declare(shape)
    with stand_for(stand_name) as stand:
        create(stand, shape, dead=False)
        run(stand, ["CREATE TABLE victim (x INT)"])
        broker = stand.broker()
        app = make_app()
        app.add_broker(broker)
        async with serving(app):
            await broker.publish(row, Msg("a"), data=attack)
        assert rows(stand, "SELECT count(*) FROM victim") == [(0,)]
        table = table_of(stand_name, None, shape.table)
        assert rows(stand, f"SELECT {quote(stand_name, 'data')} FROM {table}") == [(attack,)]


async def test_a_question_mark_in_a_sqlite_name() -> None:
    shape = Shape(
        form="lease",
        table="jobs?",
        schema=None,
        columns={"id": "id", "data": "what?", "attempt": "attempt", "locked_until": "until"},
        literal="",
        dead="dead",
    )
    await works_or_is_refused("sqlite", shape, "a", "b", row_mode=True)


async def works_or_is_refused(
    stand_name: StandName,
    shape: Shape,
    first: str,
    second: str,
    row_mode: bool,
    stand: Stand | None = None,
) -> str:
    """Declare, mount, create, serve two rows and check the tables, or see the declaration
    refused exactly where the rules say; what happened. On
    ``stand`` when given, else on a database of its own."""
    # The class statement refuses what no server holds, and only that.
    try:
        row = declare(shape)
    except DeclarationError as exc:
        assert shape.refused_at_declaration(), f"refused {shape}: {exc}"
        return "refused by the class statement"
    assert not shape.refused_at_declaration(), f"declared {shape}"

    delivered: list[tuple[str, int]] = []

    async def handle(message: Any, attempt: keys.Attempt) -> HandlerOutcome:
        which = message.to if not row_mode else ("a" if message.data == first else "b")
        delivered.append((which, attempt))
        return HandlerOutcome.ack() if which == "a" else HandlerOutcome.retry()

    handle.__annotations__ = {
        "message": row if row_mode else Msg,
        "attempt": keys.Attempt,
        "return": HandlerOutcome,
    }
    grouped = "grp" in shape.columns
    sub = subscriber(InboxQueue(row, GROUP if grouped else "jobs"))(handle)

    with contextlib.nullcontext(stand) if stand else stand_for(stand_name) as stand:
        broker = stand.broker(poll_interval=3600)
        app = make_app()
        # The mount refuses what this stand's server cannot hold, and only that.
        try:
            mount = app.include(broker, sub)
        except DeclarationError as exc:
            assert shape.refused_by(stand_name), f"refused {shape}: {exc}"
            return "refused at the mount"
        assert not shape.refused_by(stand_name), f"mounted {shape}"
        dead_refused = shape.dead_refused_by(stand_name)
        if shape.dead is not None:
            dest = shape.dead if shape.schema is None else f"{shape.schema}.{shape.dead}"
        else:
            dest = DEAD_GROUP
        mount.max_attempts(2).dead_letter(dest)
        cleanup = create(stand, shape, dead=not dead_refused)
        try:
            if dead_refused:
                with pytest.RaisesGroup(DeclarationError, flatten_subgroups=True):
                    async with serving(app):
                        pass
                return "dead letter table refused at the start"
            await serve_two_rows(app, broker, sub, shape, row, first, second, row_mode)
            check_tables(stand, shape, first, second)
        except BaseExceptionGroup as group:
            # The startup check refused a statement: the dialect wrote what the server (or the
            # driver) cannot take.
            if group.subgroup(SchemaError) is not None:
                raise AssertionError(f"startup check failed for {shape}") from group
            raise
        finally:
            run(stand, cleanup)
    assert sorted(delivered) == [("a", 1), ("b", 1), ("b", 2)]
    return "served"


async def serve_two_rows(
    app: Any,
    broker: Any,
    sub: Any,
    shape: Shape,
    row: type,
    first: str,
    second: str,
    row_mode: bool,
) -> None:
    grouped = "grp" in shape.columns
    async with serving(app):
        for value, to in ((first, "a"), (second, "b")):
            columns: dict[str, object] = {"data": value}
            if grouped:
                columns["grp"] = GROUP
            if row_mode:
                await broker.publish(row, **columns)
            else:
                await broker.publish(row, Msg(to), **columns)
        with trio.fail_after(30):
            await settled(app, sub, 3)


def check_tables(stand: Stand, shape: Shape, first: str, second: str) -> None:
    """Row a acked (deleted, or marked processed), row b moved to its dead letter group or
    table, each with its data as published."""
    name = stand.name
    cols = shape.columns
    table = table_of(name, shape.schema, shape.table)
    picked = [quote(name, cols["data"])]
    if "grp" in cols:
        picked.append(quote(name, cols["grp"]))
    if "processed_at" in cols:
        picked.append(f"{quote(name, cols['processed_at'])} IS NOT NULL")
    found = sorted(rows(stand, f"SELECT {', '.join(picked)} FROM {table}"))
    expected: list[tuple[Any, ...]] = []
    if "processed_at" in cols:
        expected.append((first, GROUP, 1) if "grp" in cols else (first, 1))
    if "grp" in cols:
        processed = (0,) if "processed_at" in cols else ()
        expected.append((second, DEAD_GROUP, *processed))
    assert [tuple(int(v) if isinstance(v, bool) else v for v in r) for r in found] == sorted(
        expected
    ), shape
    if shape.dead is not None:
        dest = table_of(name, shape.schema, shape.dead)
        assert rows(stand, f"SELECT {quote(name, cols['data'])} FROM {dest}") == [(second,)]
