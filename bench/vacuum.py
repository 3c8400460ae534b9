"""PostgreSQL's vacuum under a busy queue: what N claim + ack cycles of a lease table leave
behind, with and without a long open transaction beside them, at fillfactor 100 and 70, then
what retention's batched deletes and a VACUUM make of it (README "Retention", the note on
vacuum). Not part of ``scripts/bench``.

    python -m bench.vacuum postgresql://postgres@127.0.0.1:54329/postgres --rows 10000

Each scenario runs on a fresh database with autovacuum off for the table (so the figures are
the cycles' own, not a race with the launcher), through psycopg (not trinbox's driver). The
statements are the lease form's as trinbox renders them on PostgreSQL (the claim of
``tests/unit/golden/plans/postgresql/lease-full-host-clock.sql``, 100 rows a claim, and the
ack that marks ``processed_at`` under the lease's token, one a row), then retention's
``DELETE ... LIMIT 1000 FOR UPDATE SKIP LOCKED`` until no finished row is left, then a plain
``VACUUM``. The long transaction is a REPEATABLE READ snapshot another session opens before
the cycles and holds until after the VACUUM (a report, a ``pg_dump``, an idle-in-transaction
session). Figures by ``pgstattuple`` and ``pg_stat_user_tables``."""

from __future__ import annotations

import argparse
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

DDL = """
CREATE EXTENSION IF NOT EXISTS pgstattuple;
CREATE TABLE jobs (
    id BIGSERIAL PRIMARY KEY,
    queue TEXT NOT NULL,
    retry_after TIMESTAMPTZ NOT NULL,
    attempt INT NOT NULL DEFAULT 1,
    locked_until TIMESTAMPTZ,
    processed_at TIMESTAMPTZ,
    payload BYTEA
) WITH (fillfactor = {fillfactor}, autovacuum_enabled = false);
CREATE INDEX jobs_claim ON jobs (queue, retry_after, id) WHERE processed_at IS NULL;
"""

CLAIM = """
UPDATE jobs SET locked_until = %s, attempt = attempt + 1
WHERE id IN (SELECT id FROM jobs WHERE queue = 'q' AND retry_after <= %s
             AND (locked_until IS NULL OR locked_until <= %s) AND processed_at IS NULL
             ORDER BY retry_after, id LIMIT 100 FOR UPDATE SKIP LOCKED)
RETURNING id
"""
ACK = "UPDATE jobs SET processed_at = %s, locked_until = NULL WHERE id = %s AND locked_until = %s"
PRUNE = """
DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE processed_at < %s ORDER BY id
                              LIMIT 1000 FOR UPDATE SKIP LOCKED) AND processed_at < %s
"""


def _database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _tuples(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    conn.execute("SELECT pg_stat_force_next_flush()")
    stat = conn.execute("SELECT tuple_count, dead_tuple_count, table_len FROM pgstattuple('jobs')")
    live, dead, size = stat.fetchone() or (0, 0, 0)
    index = conn.execute("SELECT pg_relation_size('jobs_claim')").fetchone()
    upd = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'"
    ).fetchone() or (0, 0)
    return {
        "live": live,
        "dead": dead,
        "table_kib": size // 1024,
        "claim_index_kib": (index[0] if index else 0) // 1024,
        "hot_share": round(upd[1] / upd[0], 3) if upd[0] else 0.0,
    }


def scenario(url: str, rows: int, *, fillfactor: int, long_tx: bool) -> dict[str, Any]:
    name = f"vac_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        return _run(_database(url, name), rows, fillfactor=fillfactor, long_tx=long_tx)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _run(url: str, rows: int, *, fillfactor: int, long_tx: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"fillfactor": fillfactor, "long_transaction": long_tx, "rows": rows}
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in DDL.format(fillfactor=fillfactor).split(";"):
            if statement.strip():
                conn.execute(statement)
        now = datetime.now(UTC)
        conn.execute(
            "INSERT INTO jobs (queue, retry_after, payload) "
            "SELECT 'q', %s, '\\x00' FROM generate_series(1, %s)",
            (now - timedelta(seconds=1), rows),
        )
        conn.execute("VACUUM jobs")  # a clean start: the inserts' visibility map set
        holder = psycopg.connect(url)
        if long_tx:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM jobs")  # takes its snapshot
        start = time.perf_counter()
        done = 0
        while done < rows:
            now = datetime.now(UTC)
            token = now + timedelta(seconds=30)
            ids = [r[0] for r in conn.execute(CLAIM, (token, now, now)).fetchall()]
            if not ids:
                break
            for row_id in ids:
                conn.execute(ACK, (datetime.now(UTC), row_id, token))
            done += len(ids)
        out["cycles_s"] = round(time.perf_counter() - start, 1)
        out["after_cycles"] = _tuples(conn)
        before = datetime.now(UTC) + timedelta(seconds=1)
        pruned = statements = 0
        while True:
            deleted = conn.execute(PRUNE, (before, before)).rowcount
            pruned += deleted
            statements += 1
            if deleted < 1000:
                break
        out["pruned"] = pruned
        out["prune_statements"] = statements
        conn.execute("VACUUM jobs")
        out["after_prune_and_vacuum"] = _tuples(conn)
        holder.rollback()
        holder.close()
        conn.execute("VACUUM jobs")
        out["after_vacuum_once_it_ended"] = _tuples(conn)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    for fillfactor, long_tx in ((100, False), (100, True), (70, False), (70, True)):
        print(json.dumps(scenario(args.url, args.rows, fillfactor=fillfactor, long_tx=long_tx)))


if __name__ == "__main__":
    main()
