"""README "Context keys: keys.Pool and keys.Tx": its two handlers run as written on SQLite,
PostgreSQL and MariaDB (portable placeholders, on a broker of SqlBroker.from_url), and what
its tables say of each method, return value and placeholder style, on every database."""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Advisory,
    App,
    AppInfo,
    Attempt,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Payload,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.errors import DatabaseError
from trinbox.testing import TrioClock, VirtualClock, settled
from trinbox.typing import AnyDatabase

from .readme import README, block
from .stands import STANDS, Stand, StandName, fresh_stand

PLACEHOLDER: dict[StandName, str] = {"sqlite": "?", "postgres": "$1", "mariadb": "%s"}

TABLES: dict[StandName, str] = {
    "sqlite": """
        CREATE TABLE video_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1, payload BLOB NOT NULL);
        CREATE TABLE encode_log (id INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL,
            attempt INTEGER NOT NULL);
        CREATE TABLE encoded (url TEXT NOT NULL);
    """,
    "postgres": """
        CREATE TABLE video_jobs (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            channel TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 1, payload BYTEA NOT NULL);
        CREATE TABLE encode_log (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            url TEXT NOT NULL, attempt INTEGER NOT NULL);
        CREATE TABLE encoded (url TEXT NOT NULL);
    """,
    "mariadb": """
        CREATE TABLE video_jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY,
            channel VARCHAR(191) NOT NULL, attempt INT NOT NULL DEFAULT 1,
            payload LONGBLOB NOT NULL) ENGINE=InnoDB;
        CREATE TABLE encode_log (id BIGINT AUTO_INCREMENT PRIMARY KEY,
            url VARCHAR(191) NOT NULL, attempt INT NOT NULL) ENGINE=InnoDB;
        CREATE TABLE encoded (url VARCHAR(191) NOT NULL) ENGINE=InnoDB;
    """,
}


# The first example's row class and message.
class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


@dataclass
class Video:
    url: str


URL = "https://example.com/a.mp4"


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    with fresh_stand(request.param, tmp_path) as fresh:
        fresh.script(TABLES[fresh.name])
        yield fresh


class Encoder:
    """The README's ``encode``: fails on the first attempt."""

    def __init__(self) -> None:
        self.attempts: list[int] = []

    async def encode(self, video: Video, attempt: int) -> bool:
        self.attempts.append(attempt)
        return attempt > 1


def readme_handler(tag: str, encoder: Encoder) -> Any:
    namespace: dict[str, Any] = {
        "subscriber": subscriber,
        "InboxQueue": InboxQueue,
        "HandlerOutcome": HandlerOutcome,
        "keys": keys,
        "Transcode": Transcode,
        "Video": Video,
        "encode": encoder.encode,
    }
    exec(block(tag), namespace)
    return namespace["transcode"]


def url_broker(stand: Stand) -> SqlBroker[AnyDatabase]:
    """A broker of the stand's database picked by its URL, as a service moving between
    databases makes it."""
    return SqlBroker.from_url(stand.url, poll_interval=0.05, pool_size=8, clock=TrioClock())


@asynccontextmanager
async def serving(broker: SqlBroker[Any], handler: Any = None) -> AsyncIterator[App]:
    app = App(AppInfo("keys"))
    app.add_broker(broker)
    if handler is not None:
        app.include(broker, handler)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.serve)
            yield app
            app.shutdown()


def _readme_fetch() -> tuple[str, list[tuple[Any, ...]]]:
    """The README's fetch after the pool example, and the rows it says that returns."""
    text = " ".join(README.read_text().split())
    found = re.search(r'`await broker\.database\.fetch\("([^"]*)"\)` returns `(\[[^`]*\])`', text)
    assert found, "README.md: the fetch after the keys.Pool example moved"
    return found.group(1), ast.literal_eval(found.group(2))


# -- the two handlers ----------------------------------------------------------------------------


async def test_the_pool_example_logs_every_attempt(stand: Stand, clock: VirtualClock) -> None:
    encoder = Encoder()
    handler = readme_handler("readme_keys_pool", encoder)
    broker = url_broker(stand)
    async with serving(broker, handler) as app:
        await broker.publish(Transcode, Video(URL), channel="c1")
        await settled(app, handler, 2)  # the failed encode, then its retry
        sql, rows = _readme_fetch()
        assert await broker.database.fetch(sql) == rows
    assert encoder.attempts == [1, 2]
    assert rows == [(URL, 1), (URL, 2)]
    assert stand.rows("SELECT COUNT(*) FROM video_jobs") == [(0,)]


async def test_the_tx_example_writes_with_the_ack_only(stand: Stand, clock: VirtualClock) -> None:
    encoder = Encoder()
    handler = readme_handler("readme_keys_tx", encoder)
    broker = url_broker(stand)
    async with serving(broker, handler) as app:
        await broker.publish(Transcode, Video(URL), channel="c1")
        await settled(app, handler, 2)
        # Had the retry kept its write, the second attempt would have dropped without encoding.
        assert encoder.attempts == [1, 2]
        assert stand.rows("SELECT url FROM encoded") == [(URL,)]
        await broker.publish(Transcode, Video(URL), channel="c1")
        await settled(app, handler, 3)  # dropped: encoded already
    assert encoder.attempts == [1, 2]
    assert stand.rows("SELECT url FROM encoded") == [(URL,)]
    assert stand.rows("SELECT COUNT(*) FROM video_jobs") == [(0,)]


# -- portable placeholders -----------------------------------------------------------------------


async def test_one_portable_text_runs_on_every_database(stand: Stand, clock: VirtualClock) -> None:
    broker = url_broker(stand)
    async with serving(broker):
        db = broker.database
        insert = "INSERT INTO encode_log (url, attempt) VALUES (:url, :n)"
        assert await db.execute(insert, {"url": "https://a:1/%", "n": 1, "unused": 0}) == 1
        # A name may repeat; a colon in a literal and a % are text.
        both = "SELECT url, attempt FROM encode_log WHERE attempt = :n AND attempt < :n + 1"
        assert await db.fetch(both, {"n": 1}) == [("https://a:1/%", 1)]
        like = "SELECT url FROM encode_log WHERE url LIKE 'https:%' AND url <> ':n'"
        assert await db.fetch(like, {}) == [("https://a:1/%",)]
        assert (
            await db.fetchval(
                "SELECT ':n' || 'x'" if stand.name != "mariadb" else "SELECT CONCAT(':n', 'x')", {}
            )
            == ":nx"
        )
        with pytest.raises(ValueError, match="found no value for n "):
            await db.fetchval("SELECT :n", {"m": 1})
        async with db.connection() as conn:
            assert (
                await conn.fetchval(
                    "SELECT attempt FROM encode_log WHERE url = :u", {"u": "https://a:1/%"}
                )
                == 1
            )
        async with broker.transaction() as tx:
            await tx.execute("INSERT INTO encoded (url) VALUES (:url)", {"url": "in tx"})
        assert await db.fetchval("SELECT url FROM encoded", {}) == "in tx"
        # The driver's own style is as it was: values one by one.
        own = f"SELECT attempt FROM encode_log WHERE url = {PLACEHOLDER[stand.name]}"
        assert await db.fetchval(own, "https://a:1/%") == 1


# -- the tables ------------------------------------------------------------------------------------


def _readme_examples() -> dict[StandName, str]:
    """The example column of the README's placeholder table, by database."""
    rows = {
        "postgres": "| PostgreSQL (asyncpg) |",
        "mariadb": "| MySQL, MariaDB (aiomysql) |",
        "sqlite": "| SQLite (sqlite3) |",
    }
    lines = README.read_text().splitlines()
    found: dict[StandName, str] = {}
    for name, start in rows.items():
        (line,) = [line for line in lines if line.startswith(start)]
        found[name] = re.findall(r'`"([^`]*)"` \|$', line)[0]  # type: ignore[index]
    return found


async def test_each_placeholder_style_works_on_its_database_only(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = stand.broker()
    wrong = {"postgres": ["?", "%s"], "mariadb": ["?", "$1"], "sqlite": ["%s"]}[stand.name]
    async with serving(broker):
        db = broker.database
        insert = "INSERT INTO encoded (url) VALUES ({})"
        assert await db.execute(insert.format(PLACEHOLDER[stand.name]), "right") == 1
        for style in wrong:
            with pytest.raises(DatabaseError):
                await db.execute(insert.format(style), "wrong")
        assert await db.fetch("SELECT url FROM encoded") == [("right",)]
        # The README's example for this database.
        example = _readme_examples()[stand.name]
        if stand.name == "mariadb":
            await db.execute("INSERT INTO encoded (url) VALUES ('https://b'), ('http://c')")
            assert sorted(await db.fetch(example, "https://x")) == [("https://b",)]
            # A literal % is written %%, also without parameters; elsewhere %% stays two.
            with pytest.raises(DatabaseError):
                await db.fetchval("SELECT 'a%'")
            assert await db.fetchval("SELECT 'a%%'") == "a%"
        else:
            assert await db.execute(example, "renamed", "right") == 1
            assert await db.fetch("SELECT url FROM encoded") == [("renamed",)]
            assert await db.fetchval("SELECT 'a%%'") == "a%%"
        if stand.name == "postgres":  # a number may repeat
            assert await db.fetchval("SELECT $1::int + $1::int", 2) == 4


async def test_what_each_method_returns(stand: Stand, clock: VirtualClock) -> None:
    broker = stand.broker()
    async with serving(broker):
        db = broker.database
        ddl = await db.execute("CREATE TABLE notes (body VARCHAR(20), n INT)")
        assert ddl == (-1 if stand.name == "sqlite" else 0)
        ph = PLACEHOLDER[stand.name]
        insert = f"INSERT INTO notes (body, n) VALUES ({ph}, 1)"
        assert [await db.execute(insert, body) for body in ("a", "b")] == [1, 1]
        assert await db.execute("UPDATE notes SET n = 1") == 2  # rows matched, none changed
        assert await db.execute("DELETE FROM notes WHERE body = 'b'") == 1
        assert await db.fetch("SELECT body, n FROM notes") == [("a", 1)]
        assert await db.fetchval("SELECT n FROM notes WHERE body = 'zz'") is None
        returned = "INSERT INTO encode_log (url, attempt) VALUES ('r', 1) RETURNING attempt"
        assert await db.fetch(returned) == [(1,)]
        # connection(): the pool's methods on one connection, never the driver's own
        # (whose internals, like abandon, are trinbox's); an open transaction rolled back.
        async with db.connection() as conn:
            assert not hasattr(conn, "abandon")
            assert await conn.fetch(f"SELECT body FROM notes WHERE n = {ph}", 1) == [("a",)]
            assert await conn.fetchval(f"SELECT body FROM notes WHERE n = {ph}", 1) == "a"
            await conn.execute("BEGIN")
            assert await conn.execute(insert, "left open") == 1
        assert await db.fetchval("SELECT COUNT(*) FROM notes") == 1


async def test_a_transaction_commits_at_the_end_of_its_block_and_publishes_then(
    stand: Stand, clock: VirtualClock
) -> None:
    broker = stand.broker()
    insert = f"INSERT INTO encoded (url) VALUES ({PLACEHOLDER[stand.name]})"
    async with serving(broker):
        with pytest.raises(KeyError):
            async with broker.transaction() as tx:
                assert await tx.execute(insert, "gone") == 1
                assert await tx.fetchval("SELECT COUNT(*) FROM encoded") == 1
                raise KeyError("rolls back")
        async with broker.transaction() as tx:
            await tx.execute(insert, "kept")
            await tx.publish(Transcode, Video(URL), channel="c1")
            assert stand.rows("SELECT COUNT(*) FROM video_jobs") == [(0,)]  # not yet committed
        assert await broker.database.fetch("SELECT url FROM encoded") == [("kept",)]
    assert stand.rows("SELECT channel FROM video_jobs") == [("c1",)]
