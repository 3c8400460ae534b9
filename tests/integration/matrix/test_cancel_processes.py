"""A cancel from one process reaches the handler in another (issue 21, item 1): the test's
process finds the row in work, writes a request into the ``CancelRequests`` table, and the
worker process (cancel_process.py), polling that table while it has the row in work, cancels
its handler; the delivery settles as cancelled there (never retried, not released), the row
is finished and the request deleted. On PostgreSQL straight and through PgBouncer in
transaction pooling (no LISTEN: the poll), MariaDB, and SQLite's lease form."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trio

from trinbox import CancelResult
from trinbox._drivers.aio import asyncio_loop

from ..stands import StandName, _unreachable, fresh_stand
from .cancel_process import REQUESTS, broker_of
from .test_cancel import KEPT, Job

PGBOUNCER_DSN = os.environ.get(
    "TRINBOX_PGBOUNCER_DSN", "postgresql://postgres@127.0.0.1:54349/postgres"
)
ROOT = Path(__file__).resolve().parents[3]

CELLS = [
    ("sqlite", "lease", ""),
    ("postgres", "row_lock", ""),
    ("postgres", "lease", ""),
    ("postgres", "advisory", ""),
    ("postgres", "lease", "pgbouncer"),
    ("postgres", "row_lock", "pgbouncer"),
    ("postgres", "lease", "notify"),
    ("postgres", "advisory", "notify"),
    ("mariadb", "lease", ""),
    ("mariadb", "advisory", ""),
]
"""(stand, form, how): straight, through PgBouncer (the poll), or with LISTEN/NOTIFY and a
poll interval past the test's bound (the NOTIFY alone reaches the worker in time)."""


def bounced_url(url: str) -> str:
    database = urlsplit(url).path
    found = urlunsplit(urlsplit(PGBOUNCER_DSN)._replace(path=database))
    try:
        with psycopg.connect(found, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unreachable(f"PgBouncer at {PGBOUNCER_DSN} (scripts/start-pgbouncer)", exc)
    return found


@pytest.mark.parametrize(
    ("stand_name", "form", "mode"),
    CELLS,
    ids=[f"{s}-{f}{'-' + m if m else ''}" for s, f, m in CELLS],
)
async def test_a_cancel_reaches_the_handler_in_another_process(
    stand_name: StandName, form: str, mode: str, tmp_path: Path
) -> None:
    with fresh_stand(stand_name, tmp_path) as stand:
        row = KEPT[form]
        admin = broker_of(stand_name, stand.url, bounced=False, notify=mode == "notify")
        admin.use_cancel_requests(REQUESTS)
        url = bounced_url(stand.url) if mode == "pgbouncer" else stand.url
        async with asyncio_loop(admin.needs_asyncio):
            await admin.open()
            try:
                await admin.create_tables(row)
                await admin.create_tables(REQUESTS)
                await admin.publish(row, Job(1), id=1, queue="jobs")
                argv = [sys.executable, "-m", "tests.integration.matrix.cancel_process"]
                argv += [stand_name, form, url] + ([mode] if mode else [])
                lines: list[str] = []
                err = bytearray()
                with trio.fail_after(60):
                    async with trio.open_nursery() as nursery:
                        run = functools.partial(
                            trio.run_process,
                            argv,
                            cwd=ROOT,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            check=False,
                        )
                        worker: trio.Process = await nursery.start(run)
                        assert worker.stdout is not None and worker.stderr is not None
                        errors = worker.stderr

                        async def read_errors() -> None:
                            async for chunk in errors:
                                err.extend(chunk)

                        nursery.start_soon(read_errors)
                        buffer = b""
                        async for chunk in worker.stdout:
                            buffer += chunk
                            *done, buffer = buffer.split(b"\n")
                            for line in done:
                                lines.append(line.decode())
                                if line == b"entered":
                                    found = await admin.cancel(row, 1)
                                    assert found is CancelResult.RUNNING
                    assert worker.returncode == 0, err.decode(errors="replace")
                after = await admin.cancel(row, 1)
            finally:
                await admin.aclose()
    assert lines[:2] == ["entered", "cancelled"]
    stats: dict[str, Any] = json.loads(lines[-1])
    assert stats == {"cancelled": 1, "released": 0, "retried": 0, "served": 1, "polled": 1}
    assert after is CancelResult.FINISHED
