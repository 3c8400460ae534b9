"""MySQL/MariaDB sessions run at trinbox's own sql_mode (``mysql.SQL_MODE``), whatever the
server's global one (issue 9): with NO_BACKSLASH_ESCAPES in the global mode, aiomysql's
backslash escaping let a payload's text run as SQL and stored every JSON payload corrupted;
without strict mode a too-long value was cut short with a mere warning.

These tests set the GLOBAL sql_mode, so they run on a throwaway MariaDB of their own,
``TRINBOX_MYSQL_MODES_DSN`` (scripts/test starts it on port 33080), never on the shared
server of the other tests: each mode is set for one test and the old one restored after it,
under a server lock that keeps two runs from switching modes under each other. Unreachable,
the server skips its tests, or fails them with ``TRINBOX_REQUIRE_DATABASES=1``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import pymysql
import pytest
import trio

from trinbox import (
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    ProcessedAt,
    RowLock,
    SqlBroker,
    subscriber,
)
from trinbox._drivers.mysql import SQL_MODE, MySqlPool, open_pool
from trinbox.errors import ConnectionLost, DatabaseError
from trinbox.testing import settled

from ..serving import make_app, serving
from ..stands import MYSQL_DSN, MariaStand, drop_mariadb_database
from .harness import Backend, using

MODES_DSN = os.environ.get(
    "TRINBOX_MYSQL_MODES_DSN", "mysql://trinbox:trinbox@127.0.0.1:33080/trinbox"
)
# Global modes that break client-side escaping, change what quotes mean, allow silent
# truncation, and the strictest standard one.
GLOBAL_MODES = ["NO_BACKSLASH_ESCAPES", "ANSI_QUOTES", "", "TRADITIONAL"]
MODE_IDS = ["no_backslash_escapes", "ansi_quotes", "empty", "traditional"]
HOUR = 3600.0

TABLES = """
    CREATE TABLE hostile_jobs (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        locked_until DATETIME,
        processed_at DATETIME(6),
        payload LONGBLOB,
        tag VARCHAR(8),
        note TEXT
    ) ENGINE=InnoDB;
    CREATE TABLE victim (id INT PRIMARY KEY) ENGINE=InnoDB;
    INSERT INTO victim VALUES (1)
"""


class LeasedHostile(Inbox[Lease], table="hostile_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    tag: str | None
    note: str | None
    payload: Annotated[bytes, Payload()]


class RowLockedHostile(Inbox[RowLock], table="hostile_jobs"):
    id: Annotated[int, Id(generated=True)]
    processed_at: Annotated[datetime | None, ProcessedAt()]
    tag: str | None
    note: str | None
    payload: Annotated[bytes, Payload()]


FORMS: dict[str, type[Inbox[Any, Any]]] = {"lease": LeasedHostile, "row_lock": RowLockedHostile}


def _server(dsn: str) -> tuple[str, int]:
    parts = urlsplit(dsn)
    return parts.hostname or "localhost", parts.port or 3306


def _unreachable(exc: BaseException) -> None:
    msg = (
        f"the sql_mode MariaDB at {MODES_DSN} is not reachable ({exc}); start it with "
        "scripts/test, or scripts/start-mariadb /tmp/trinbox-maria-modes 33080 and "
        "TRINBOX_MYSQL_MODES_DSN"
    )
    if os.environ.get("TRINBOX_REQUIRE_DATABASES") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@contextmanager
def global_mode(mode: str) -> Iterator[MariaStand]:
    """A fresh database on the sql_mode server, whose GLOBAL sql_mode is ``mode`` for the
    block (sessions opened in it start in that mode); the old mode is restored after it."""
    if _server(MODES_DSN) == _server(MYSQL_DSN):
        pytest.fail(
            f"TRINBOX_MYSQL_MODES_DSN names the shared server ({MODES_DSN}); these tests set "
            "its GLOBAL sql_mode: give them a server of their own"
        )
    host, port = _server(MODES_DSN)
    parts = urlsplit(MODES_DSN)
    try:
        admin = pymysql.connect(
            host=host,
            port=port,
            user=parts.username or "root",
            password=parts.password or "",
            autocommit=True,
        )
    except pymysql.Error as exc:
        _unreachable(exc)
    database = f"trinbox_mode_{uuid.uuid4().hex[:12]}"
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT GET_LOCK('trinbox-sql-mode-tests', 120)")
            assert cur.fetchone() == (1,), "another test run holds the sql_mode server"
            cur.execute("SELECT @@GLOBAL.sql_mode")
            row = cur.fetchone()
            assert row is not None
            before = str(row[0])
            cur.execute(f"CREATE DATABASE `{database}`")
            cur.execute("SET GLOBAL sql_mode = %s", (mode,))
            try:
                yield MariaStand(urlunsplit(parts._replace(path="/" + database)))
            finally:
                cur.execute("SET GLOBAL sql_mode = %s", (before,))
                drop_mariadb_database(cur, database)
    finally:
        admin.close()  # its GET_LOCK ends with the session


def mode_names(mode: object) -> set[str]:
    assert isinstance(mode, str), mode
    return set(mode.split(",")) - {""}


@pytest.mark.parametrize("mode", GLOBAL_MODES, ids=MODE_IDS)
async def test_every_session_runs_at_trinbox_mode(mode: str, aio_loop: None) -> None:
    with global_mode(mode) as stand:
        pool = await open_pool(stand.url, max_size=1)
        try:
            first = await pool.acquire()
            try:
                [(session, server)] = await first.fetch(
                    "SELECT @@SESSION.sql_mode, @@GLOBAL.sql_mode"
                )
                assert mode_names(session) == mode_names(SQL_MODE)
                assert mode_names(mode) <= mode_names(server)
                # A lost connection is dropped; the one the pool opens instead is set too.
                stand.execute(f"KILL CONNECTION {first.thread_id}")
                with pytest.raises(ConnectionLost):
                    await first.fetch("SELECT 1")
            finally:
                await pool.give_back(first)
            async with using(pool) as second:
                assert second.thread_id != first.thread_id
                [(session,)] = await second.fetch("SELECT @@SESSION.sql_mode")
                assert mode_names(session) == mode_names(SQL_MODE)
        finally:
            await pool.aclose()


def hostile_payload(row: type[Inbox[Any, Any]]) -> bytes:
    """A payload that, escaped with backslashes under NO_BACKSLASH_ESCAPES, would end its
    literal, complete the INSERT (a NULL for each column after the payload) and drop
    ``victim``."""
    marker = b"\x01marker"
    offline = SqlBroker.mysql("mysql://nobody@127.0.0.1:1/none")  # connects to nothing
    _, params = offline.insert_statement(row, marker, tag="t", note="n")
    after = len(params) - params.index(marker) - 1
    return ("a'" + ", NULL" * after + "); DROP TABLE victim; -- ").encode()


# JSON text with quotes and backslashes (stored corrupted under NO_BACKSLASH_ESCAPES: each
# quote kept its backslash), and with an apostrophe too (ended its literal).
JSON_TEXT = json.dumps({"said": 'he said "hi"', "path": "C:\\temp\\new", "ctl": "\x00\n\x1a"})
JSON_APOSTROPHE = json.dumps({"it's": "a'b\\'c"})
BRIEF_PAYLOAD = "a'), (NULL, 0x00); DROP TABLE victim; -- "


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("mode", GLOBAL_MODES, ids=MODE_IDS)
async def test_hostile_payloads_round_trip(mode: str, form: str) -> None:
    row = FORMS[form]
    hostile = hostile_payload(row)
    messages: list[tuple[str, bytes, str]] = [
        ("hostile", hostile, hostile.decode()),
        ("brief", BRIEF_PAYLOAD.encode(), BRIEF_PAYLOAD),
        ("json", JSON_TEXT.encode(), JSON_TEXT),
        ("json'", JSON_APOSTROPHE.encode(), JSON_APOSTROPHE),
        ("bytes", bytes(range(256)), "\\'\"%s%%\\\\"),
    ]
    got: list[bytes] = []
    with global_mode(mode) as stand:
        stand.script(TABLES)
        broker = stand.broker(poll_interval=HOUR)

        @subscriber(InboxQueue(row, "hostile"))
        async def handle(payload: bytes) -> None:
            got.append(payload)

        app = make_app()
        app.include(broker, handle)
        async with serving(app):
            for tag, payload, note in messages:
                await broker.publish(row, payload, tag=tag, note=note)
            with trio.fail_after(10):
                await settled(app, handle, len(messages))

        assert stand.rows("SELECT id FROM victim") == [(1,)]
        assert sorted(got) == sorted(payload for _, payload, _ in messages)
        stored = stand.rows(
            "SELECT tag, payload, note, processed_at IS NOT NULL FROM hostile_jobs ORDER BY id"
        )
        assert stored == [(tag, payload, note, 1) for tag, payload, note in messages]
        assert json.loads(stored[2][1]) == json.loads(JSON_TEXT)


# Keys of a row lock limit whose slots are named locks: quotes, a backslash before a quote,
# placeholders, NULL, unicode, and a key longer than GET_LOCK's 64 characters.
LIMIT_KEYS: list[str | None] = ["it's", "a\\'b", '"q"', "%s%%", None, "ключ 🔑", "x" * 300]


@pytest.mark.parametrize("mode", GLOBAL_MODES, ids=MODE_IDS)
async def test_a_row_lock_limit_keeps_hostile_keys_apart(mode: str) -> None:
    in_work: Counter[str | None] = Counter()
    most: Counter[str | None] = Counter()
    every_key_in = trio.Event()
    with global_mode(mode) as stand:
        stand.script(TABLES)
        for key in LIMIT_KEYS * 2:
            stand.execute(
                "INSERT INTO hostile_jobs (note, payload) VALUES (?, ?)",
                key,
                json.dumps(key).encode(),
            )
        broker = stand.broker(poll_interval=0.05)
        queue = InboxQueue(RowLockedHostile, "hostile").workers(8).limit(key="note", concurrency=1)

        @subscriber(queue)
        async def handle(payload: bytes) -> None:
            key = json.loads(payload)
            in_work[key] += 1
            most[key] = max(most[key], in_work[key])
            # Every key's first row is held until all of them are in work (each key its own
            # slots), while the spare worker finds every key at its limit.
            if len(+in_work) == len(LIMIT_KEYS):
                every_key_in.set()
            await every_key_in.wait()
            in_work[key] -= 1

        app = make_app()
        app.include(broker, handle)
        async with serving(app):
            with trio.fail_after(20):
                await settled(app, handle, 2 * len(LIMIT_KEYS))
        assert most == dict.fromkeys(LIMIT_KEYS, 1)
        assert stand.rows("SELECT COUNT(*) FROM hostile_jobs WHERE processed_at IS NULL") == [(0,)]


@pytest.mark.parametrize("mode", GLOBAL_MODES, ids=MODE_IDS)
async def test_a_too_long_value_is_an_error(mode: str) -> None:
    with global_mode(mode) as stand:
        stand.script(TABLES)
        broker = stand.broker(poll_interval=HOUR)

        @subscriber(InboxQueue(LeasedHostile, "hostile"))
        async def handle(payload: bytes) -> None:
            raise AssertionError("nothing is published")

        app = make_app()
        app.include(broker, handle)
        async with serving(app):
            with pytest.raises(DatabaseError) as caught:
                await broker.publish(LeasedHostile, b"x", tag="nine char", note="n")
        assert caught.value.code == "1406"
        assert "Data too long for column 'tag'" in str(caught.value)
        assert stand.rows("SELECT tag FROM hostile_jobs") == []


async def test_a_session_switched_to_no_backslash_escapes_binds_nothing(
    mysql_backend: Backend,
) -> None:
    # Session-level only: the shared server's global mode is left alone.
    pool: MySqlPool = await open_pool(mysql_backend.url, max_size=1)
    try:
        async with using(pool) as conn:
            await conn.execute("CREATE TABLE t (b LONGBLOB)")
            await conn.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            assert not conn.alive
            with pytest.raises(DatabaseError, match="NO_BACKSLASH_ESCAPES") as caught:
                await conn.execute("INSERT INTO t VALUES (%s)", [b"a'), (0x00); -- "])
            assert caught.value.statement == "INSERT INTO t VALUES (%s)"
            first = conn.thread_id
        async with using(pool) as conn:
            assert conn.thread_id != first
            assert conn.alive
            await conn.execute("INSERT INTO t VALUES (%s)", [b"a'\\b"])
            assert await conn.fetch("SELECT b FROM t") == [(b"a'\\b",)]
    finally:
        await pool.aclose()
