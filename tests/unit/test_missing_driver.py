"""A broker whose driver is not installed says which extra installs it (issue 10, item 8).

Each case runs in a fresh interpreter where the driver's modules are hidden
(``sys.modules[name] = None`` makes ``import name`` fail as if it were not installed, and
``importlib.util.find_spec`` find nothing), so the test's own process, which has every driver,
is untouched. ``import trinbox`` and SQLite need no driver at all; a PostgreSQL or MySQL broker
refuses to be made without its own, and a pool that opens after the driver went away says the
same. The README's "## Install" section shows the message: a test keeps it true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trinbox

ROOT = Path(trinbox.__file__).parents[1]

POSTGRES = (
    "SqlBroker.postgres() talks to PostgreSQL through asyncpg, found no module named 'asyncpg'; "
    'install the extra: pip install "trinbox[postgres]"'
)


def mysql_message(module: str) -> str:
    return (
        "SqlBroker.mysql() talks to MySQL and MariaDB through aiomysql and PyMySQL, found no "
        f'module named {module!r}; install the extra: pip install "trinbox[mysql]"'
    )


def run(hidden: list[str], body: str) -> dict[str, Any]:
    """Run ``body`` with ``hidden`` modules hidden; it sets ``out``, printed as JSON."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in hidden)
    script = prelude + "out = {}\n" + body + "\nimport json\nprint(json.dumps(out))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


CATCH = """
def caught(make):
    try:
        make()
    except trinbox.errors.MissingDriver as exc:
        return {"type": type(exc).__name__, "import_error": isinstance(exc, ImportError),
                "trinbox_error": isinstance(exc, trinbox.errors.TrinboxError), "name": exc.name,
                "message": str(exc)}
    return None
"""

ALL = ["asyncpg", "aiomysql", "pymysql"]


def test_trinbox_imports_and_serves_sqlite_with_no_driver_installed(tmp_path: Path) -> None:
    body = f"""
import trio, trinbox, trinbox.testing
broker = trinbox.SqlBroker.sqlite({f"sqlite:///{tmp_path / 'q.db'}"!r})
async def main():
    await broker.open()
    try:
        out["one"] = (await broker.database.fetch("SELECT 1"))[0][0]
    finally:
        await broker.aclose()
trio.run(main)
out["loaded"] = sorted(m for m in ("asyncpg", "aiomysql", "pymysql") if sys.modules.get(m))
"""
    assert run(ALL, body) == {"one": 1, "loaded": []}


@pytest.mark.parametrize(
    ("hidden", "make", "name", "message"),
    [
        (["asyncpg"], "SqlBroker.postgres('postgresql://u@db/app')", "asyncpg", POSTGRES),
        (ALL, "SqlBroker.postgres('postgresql://u@db/app')", "asyncpg", POSTGRES),
        (
            ["aiomysql"],
            "SqlBroker.mysql('mysql://u@db/app')",
            "aiomysql",
            mysql_message("aiomysql"),
        ),
        (["pymysql"], "SqlBroker.mysql('mysql://u@db/app')", "pymysql", mysql_message("pymysql")),
        (ALL, "SqlBroker.mysql('mysql://u@db/app')", "aiomysql", mysql_message("aiomysql")),
    ],
    ids=["postgres", "postgres-none", "mysql-aiomysql", "mysql-pymysql", "mysql-none"],
)
def test_a_broker_without_its_driver_names_the_extra_when_it_is_made(
    hidden: list[str], make: str, name: str, message: str
) -> None:
    body = f"import trinbox\nfrom trinbox import SqlBroker\n{CATCH}\n"
    body += f"out['error'] = caught(lambda: {make})"
    assert run(hidden, body) == {
        "error": {
            "type": "MissingDriver",
            "import_error": True,
            "trinbox_error": True,
            "name": name,
            "message": message,
        }
    }


@pytest.mark.parametrize(
    ("kind", "url", "module", "message"),
    [
        ("postgres", "postgresql://u@127.0.0.1:1/app", "asyncpg", POSTGRES),
        ("mysql", "mysql://u@127.0.0.1:1/app", "aiomysql", mysql_message("aiomysql")),
    ],
)
def test_a_pool_opened_without_its_driver_says_the_same(
    kind: str, url: str, module: str, message: str
) -> None:
    """Made while the driver was there, opened once it is gone (the import happens at the
    pool's isolation level): the same error, not a bare ModuleNotFoundError."""
    body = f"""
import trio, trinbox
broker = getattr(trinbox.SqlBroker, {kind!r})({url!r})
sys.modules[{module!r}] = None
{CATCH}
out["error"] = caught(lambda: trio.run(broker.open))
"""
    found = run([], body)
    assert found["error"]["message"] == message
    assert found["error"]["name"] == module


def test_the_readme_shows_the_real_message() -> None:
    """The last line of the traceback of a PostgreSQL broker made without asyncpg."""
    script = (
        "import sys\nsys.modules['asyncpg'] = None\nimport trinbox\n"
        "trinbox.SqlBroker.postgres('postgresql://app@db/shop')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1
    said = done.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert said == f"trinbox.errors.MissingDriver: {POSTGRES}"
    readme = (ROOT / "README.md").read_text()
    install = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", install, re.DOTALL)
    assert [b for b in blocks if "MissingDriver" in b] == [said + "\n"]
