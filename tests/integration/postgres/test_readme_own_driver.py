"""The README's "### Enqueue from your own driver or ORM" examples, run as written against the
test PostgreSQL: the psycopg block and then the SQLAlchemy Core block (which goes on from the
first one's names), each writing a user and a queue row in one transaction; an app then
handles both rows, their messages decoded equal to what the blocks published."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trinbox
from trinbox import App, AppInfo, InboxQueue, subscriber
from trinbox.testing import settled

from ..matrix.schema import EMAIL_JOBS
from ..serving import serving
from ..stands import PostgresStand, fresh_stand

README = Path(trinbox.__file__).parents[1] / "README.md"


def section_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("\n### Enqueue from your own driver or ORM\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresStand]:
    with fresh_stand("postgres", tmp_path) as stand:
        assert isinstance(stand, PostgresStand)
        stand.script(EMAIL_JOBS["postgres"])
        stand.script("CREATE TABLE users (email TEXT NOT NULL)")
        yield stand


async def test_the_readme_examples_enqueue_in_the_users_transaction(
    pg: PostgresStand, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = section_blocks()
    assert len(blocks) == 2
    monkeypatch.setenv("DATABASE_URL", pg.url)
    monkeypatch.setenv("SQLALCHEMY_URL", pg.url.replace("postgresql://", "postgresql+psycopg://"))
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(blocks[0], "README.md (psycopg)", "exec", dont_inherit=True), namespace)
    exec(compile(blocks[1], "README.md (SQLAlchemy)", "exec", dont_inherit=True), namespace)
    namespace["engine"].dispose()  # its pooled connection would outlive the test
    assert sorted(pg.rows("SELECT email FROM users")) == [
        ("ada@example.com",),
        ("grace@example.com",),
    ]
    assert pg.value("SELECT COUNT(*) FROM email_jobs WHERE name = 'welcome'") == 2

    welcome = namespace["Welcome"]
    got: list[Any] = []

    async def receive(message: Any) -> None:
        got.append(message)

    receive.__annotations__["message"] = welcome  # decoded into the README's own class
    send = subscriber(InboxQueue(namespace["Email"], "welcome"))(receive)
    app = App(AppInfo("mailer"))
    app.include(namespace["broker"], send)
    async with serving(app):
        with trio.fail_after(10):
            await settled(app, send, 2)
    assert sorted(got, key=lambda m: m.to) == [
        welcome("ada@example.com"),
        welcome("grace@example.com"),
    ]
