"""``scripts/bench``: every measurement side by side in one run, one table, PASS/MISS per target.

Starts its own throwaway PostgreSQL and MariaDB (scripts/start-postgres and
scripts/start-mariadb, on their own data directories and ports, apart from the test servers),
and a SQLite file, then runs each measurement in a fresh subprocess:

1. drain throughput: trinbox (``bench.drain``) against the raw loop of the same SQL
   (``bench.raw``), each configuration raw first, trinbox right after;
2. peers on the same PostgreSQL: procrastinate and pgqueuer (``bench.peers``);
3. publish -> handler start latency (``bench.latency``);
4. claim latency with 1k and 1M rows waiting, and peak RSS over 50k and 200k jobs
   (``bench.scale``, ``bench.drain``);
5. the priority claim's cost: the drain of a table whose row class declares ``Priority()``
   (claim index ``(name, priority, retry_after, id)``) over the same table without it, lease
   on every database and row lock on PostgreSQL and MariaDB, single deliveries, each pair run
   back to back (``bench.drain``, forms ``lease-prio`` / ``rowlock-prio``).

Each throughput run starts with N pre-inserted rows (20,000) and is timed until they are all
settled, or until the window (15 s) ends, whichever is first: the whole bench must finish in
15 minutes on a 2-core machine, and some configurations drain at a few jobs per second. A
windowed rate is marked ``*``: the rows settled in the window over its length, with the queue
never empty.

Durability: the servers' durable defaults unless ``--fast`` (TRINBOX_FAST=1: fsync,
synchronous_commit and full_page_writes off; innodb_flush_log_at_trx_commit=0). The settings
read back from the servers head the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .common import DB_LABEL, FORM_LABEL, connect, fill, run_sql

ROOT = Path(__file__).resolve().parent.parent

PG_DIR, PG_PORT = "/tmp/trinbox-bench-pg", 54339
MY_DIR, MY_PORT = "/tmp/trinbox-bench-maria", 33089
SQLITE_DIR = "/tmp/trinbox-bench-sqlite"

# (database, forms) of the drain section, in the order they run.
DRAIN_FORMS: dict[str, tuple[str, ...]] = {
    "postgres": ("rowlock", "lease", "adv-row", "adv-10"),
    "mysql": ("rowlock", "lease", "adv-row", "adv-10"),
    "sqlite": ("lease", "adv-row", "adv-10"),
}
BATCH = 100
# (database, forms) of the priority section: each against its table without Priority().
PRIORITY_FORMS: dict[str, tuple[str, ...]] = {
    "postgres": ("lease", "rowlock"),
    "mysql": ("lease", "rowlock"),
    "sqlite": ("lease",),
}
RSS_GROWTH_LIMIT = 1.10  # peak RSS over 200k jobs within 10% of the peak over 50k


@dataclass
class Plan:
    """The sizes of one run."""

    jobs: int
    window: float
    latency_count: int
    scale_sizes: tuple[int, int]
    rss_jobs: tuple[int, int]


FULL = Plan(20_000, 15.0, 500, (1_000, 1_000_000), (50_000, 200_000))
QUICK = Plan(2_000, 5.0, 100, (1_000, 100_000), (5_000, 20_000))


@dataclass
class Row:
    """One line of the table."""

    section: str
    what: str
    value: str
    reference: str = ""
    ratio: str = ""
    target: str = ""
    result: str = ""


@dataclass
class Bench:
    plan: Plan
    urls: dict[str, str]
    dbs: Sequence[str]
    sections: Sequence[str]
    results: dict[str, Any] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)  # peers, latency, scale (drains come first)
    drains: list[tuple[str, str, int | None, Any, Any]] = field(default_factory=list)
    peers: dict[str, float] = field(default_factory=dict)
    step: int = 0

    # -- subprocesses ------------------------------------------------------------------------

    def sub(self, label: str, module: str, *args: str, timeout: float) -> dict[str, Any] | None:
        """Run ``python -m bench.<module> args``; its last stdout line is its JSON result."""
        self.step += 1
        command = [sys.executable, "-m", f"bench.{module}", *args]
        started = time.perf_counter()
        note(f"[{self.step:2d}] {label} ...")
        try:
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            note(f"     FAILED: no result within {timeout:.0f} s: {shlex.join(command)}")
            self.results[label] = {"error": f"timeout after {timeout:.0f} s"}
            return None
        lines = done.stdout.strip().splitlines()
        result: dict[str, Any] | None = None
        if done.returncode == 0 and lines:
            try:
                result = json.loads(lines[-1])
            except json.JSONDecodeError:
                result = None
        if result is None:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            note(f"     FAILED (exit {done.returncode}): {shlex.join(command)}\n{tail}")
            self.results[label] = {"error": f"exit {done.returncode}", "stderr": tail}
            return None
        result["wall_s"] = time.perf_counter() - started
        self.results[label] = result
        note(f"     {summary(result)}")
        return result

    # -- 1. drain ----------------------------------------------------------------------------

    def drain_section(self) -> None:
        plan = self.plan
        for db in self.dbs:
            url = self.urls[db]
            for batch in (None, BATCH):
                for form in DRAIN_FORMS[db]:
                    name = f"{DB_LABEL[db]} · {FORM_LABEL[form]} · {mode_label(batch)}"
                    extra = ["--max-seconds", str(plan.window)]
                    if batch is not None:
                        extra += ["--batch", str(batch)]
                    timeout = plan.window + 180
                    jobs = str(plan.jobs)
                    raw = self.sub(
                        f"raw     {name}", "raw", db, url, form, jobs, *extra, timeout=timeout
                    )
                    lib = self.sub(
                        f"trinbox {name}", "drain", db, url, form, jobs, *extra, timeout=timeout
                    )
                    self.drains.append((db, form, batch, raw, lib))

    def drain_rows(self) -> list[Row]:
        """One row per configuration: against its raw loop, and against procrastinate."""
        procrastinate = self.peers.get("procrastinate, concurrency 4")
        rows = []
        for db, form, batch, raw, lib in self.drains:
            name = f"{DB_LABEL[db]} · {FORM_LABEL[form]} · {mode_label(batch)}"
            row = Row("drain", name, rate(lib), f"raw {rate(raw)}")
            ratios, targets, results = [], [], []
            if lib is not None and raw is not None:
                ratio = lib["jobs_per_s"] / raw["jobs_per_s"]
                ratios.append(f"{ratio:.2f} raw")
                targets.append("≥ 0.80 raw")
                results.append(verdict(ratio >= 0.8))
            if lib is not None and procrastinate is not None:
                ratio = lib["jobs_per_s"] / procrastinate
                row.reference += f" · procrastinate {per_s(procrastinate)}"
                ratios.append(f"{ratio:.2f} procr.")
                targets.append("≥ 2 procr.")
                results.append(verdict(ratio >= 2.0))
            row.ratio, row.target, row.result = (" · ".join(x) for x in (ratios, targets, results))
            rows.append(row)
        return rows

    # -- 2. peers ----------------------------------------------------------------------------

    def peers_section(self) -> None:
        plan = self.plan
        url = self.urls["postgres"]
        for lib, param, label in (
            ("procrastinate", 4, "procrastinate, concurrency 4"),
            ("pgqueuer", 10, "pgqueuer, batch 10"),
            ("pgqueuer", 100, "pgqueuer, batch 100"),
        ):
            result = self.sub(
                f"peer    {label}",
                "peers",
                url,
                lib,
                str(plan.jobs),
                "--param",
                str(param),
                "--max-seconds",
                str(plan.window),
                timeout=plan.window + 180,
            )
            if result is not None:
                self.peers[label] = result["jobs_per_s"]
            self.rows.append(Row("peers", f"PostgreSQL · {label}", rate(result)))
        lease = next(
            (
                lib["jobs_per_s"]
                for db, form, batch, _, lib in self.drains
                if (db, form, batch) == ("postgres", "lease", BATCH) and lib is not None
            ),
            None,
        )
        pgq = self.peers.get("pgqueuer, batch 100")
        row = Row(
            "peers",
            f"PostgreSQL · lease · .batch({BATCH}) vs pgqueuer batch 100",
            per_s(lease),
            f"pgqueuer {per_s(pgq)}",
            target="≥ 1.00 pgqueuer",
        )
        if lease and pgq:
            row.ratio = f"{lease / pgq:.2f}"
            row.result = verdict(lease >= pgq)
        self.rows.append(row)

    # -- 3. latency --------------------------------------------------------------------------

    def latency_section(self) -> None:
        count = str(self.plan.latency_count)
        for db in self.dbs:
            result = self.sub(
                f"latency in-process {DB_LABEL[db]}",
                "latency",
                "inproc",
                db,
                self.urls[db],
                "--count",
                count,
                timeout=240,
            )
            self.rows.append(
                latency_row(f"{DB_LABEL[db]} · same process (wake on publish)", result, 5.0)
            )
        if "postgres" in self.dbs:
            result = self.sub(
                "latency LISTEN/NOTIFY PostgreSQL",
                "latency",
                "notify",
                self.urls["postgres"],
                "--count",
                count,
                timeout=240,
            )
            self.rows.append(
                latency_row("PostgreSQL · other process (LISTEN/NOTIFY)", result, 10.0)
            )

    # -- 4. scale ----------------------------------------------------------------------------

    def scale_section(self) -> None:
        few, many = self.plan.scale_sizes
        for db in self.dbs:
            result = self.sub(
                f"claim latency {DB_LABEL[db]} {few:,} / {many:,} rows",
                "scale",
                db,
                self.urls[db],
                "--sizes",
                f"{few},{many}",
                timeout=600,
            )
            what = f"{DB_LABEL[db]} · lease claim of 1 row, {few:,} → {many:,} rows waiting"
            if result is None:
                self.rows.append(Row("scale", what, "failed"))
                continue
            small, large = result["sizes"]
            ratio = large["p50_ms"] / small["p50_ms"]
            self.rows.append(
                Row(
                    "scale",
                    what,
                    f"p50 {small['p50_ms']:.2f} → {large['p50_ms']:.2f} ms",
                    f"mean {small['mean_ms']:.2f} → {large['mean_ms']:.2f} ms",
                    f"{ratio:.2f}",
                    "p50 at many ≤ 2.00 x few",
                    verdict(ratio <= 2.0),
                )
            )
        self.rss()

    def rss(self) -> None:
        """Peak RSS of a trinbox process draining 50k and 200k jobs (PostgreSQL, lease,
        .batch(100)); the table is filled by this process, so the drain's RSS is serving
        only."""
        db = "postgres" if "postgres" in self.dbs else self.dbs[0]
        url = self.urls[db]
        peaks = []
        for jobs in self.plan.rss_jobs:
            note(f"     filling {jobs:,} rows for the RSS run")
            fill(db, url, jobs)
            result = self.sub(
                f"peak RSS {DB_LABEL[db]} lease .batch({BATCH}) {jobs:,} jobs",
                "drain",
                db,
                url,
                "lease",
                str(jobs),
                "--batch",
                str(BATCH),
                "--no-fill",
                timeout=900,
            )
            peaks.append(None if result is None or not result.get("drained") else result)
        small, large = peaks
        few, many = self.plan.rss_jobs
        what = f"{DB_LABEL[db]} · peak RSS, lease · .batch({BATCH}), {few:,} → {many:,} jobs"
        if small is None or large is None:
            self.rows.append(Row("scale", what, "failed"))
            return
        ratio = large["maxrss_kb"] / small["maxrss_kb"]
        self.rows.append(
            Row(
                "scale",
                what,
                f"{small['maxrss_kb'] / 1024:.1f} → {large['maxrss_kb'] / 1024:.1f} MiB",
                f"{few:,} jobs {small['jobs_per_s']:,.0f}/s, {many:,} jobs "
                f"{large['jobs_per_s']:,.0f}/s",
                f"{ratio:.2f}",
                f"≤ {RSS_GROWTH_LIMIT:.2f} (no growth)",
                verdict(ratio <= RSS_GROWTH_LIMIT),
            )
        )

    # -- 5. priority -------------------------------------------------------------------------

    def priority_section(self) -> None:
        plan = self.plan
        for db in self.dbs:
            url = self.urls[db]
            for form in PRIORITY_FORMS[db]:
                name = f"{DB_LABEL[db]} · {FORM_LABEL[form]} · single"
                extra = ["--max-seconds", str(plan.window)]
                timeout = plan.window + 180
                jobs = str(plan.jobs)
                plain = self.sub(
                    f"without Priority() {name}",
                    "drain",
                    db,
                    url,
                    form,
                    jobs,
                    *extra,
                    timeout=timeout,
                )
                ranked = self.sub(
                    f"with Priority()    {name}",
                    "drain",
                    db,
                    url,
                    f"{form}-prio",
                    jobs,
                    *extra,
                    timeout=timeout,
                )
                row = Row(
                    "priority",
                    f"{name}: with Priority() / without",
                    rate(ranked),
                    f"without {rate(plain)}",
                )  # no target: issue 12 asks for the cost, not a bound
                if plain is not None and ranked is not None:
                    ratio = ranked["jobs_per_s"] / plain["jobs_per_s"]
                    row.ratio = f"{ratio:.2f}"
                self.rows.append(row)


# -- formatting -------------------------------------------------------------------------------


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def mode_label(batch: int | None) -> str:
    return "single" if batch is None else f".batch({batch})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "**MISS**"


def per_s(value: float | None) -> str:
    return "failed" if value is None else f"{value:,.0f} jobs/s"


def rate(result: dict[str, Any] | None) -> str:
    if result is None:
        return "failed"
    star = "" if result.get("drained", True) else "*"
    return f"{result['jobs_per_s']:,.0f} jobs/s{star}"


def summary(result: dict[str, Any]) -> str:
    if "jobs_per_s" in result:
        drained = (
            "" if result.get("drained", True) else f" (window, {result.get('finished')} settled)"
        )
        checked = "" if result.get("ok", True) else "  CHECK FAILED: rows left do not match"
        return f"{result['jobs_per_s']:,.0f} jobs/s in {result['seconds']:.1f} s{drained}{checked}"
    if "p50_ms" in result:
        return f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms"
    return json.dumps(result)[:200]


def latency_row(what: str, result: dict[str, Any] | None, limit_ms: float) -> Row:
    if result is None:
        return Row("latency", what, "failed")
    return Row(
        "latency",
        what,
        f"p50 {result['p50_ms']:.2f} ms · p99 {result['p99_ms']:.2f} ms",
        f"{result['count']} publishes, max {result['max_ms']:.1f} ms",
        "",
        f"p50 ≤ {limit_ms:.0f} ms",
        verdict(result["p50_ms"] <= limit_ms),
    )


def table(rows: list[Row]) -> str:
    head = ("section", "measurement", "trinbox", "compared with", "ratio", "target", "result")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        cells = (r.section, r.what, r.value, r.reference, r.ratio, r.target, r.result)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- servers and the machine ------------------------------------------------------------------


def start_servers(dbs: Sequence[str], fast: bool) -> dict[str, str]:
    env = {**os.environ, "TRINBOX_FAST": "1" if fast else "0"}
    urls: dict[str, str] = {}
    if "postgres" in dbs:
        note(f"starting PostgreSQL in {PG_DIR} on port {PG_PORT}")
        urls["postgres"] = server(["scripts/start-postgres", PG_DIR, str(PG_PORT)], env)
    if "mysql" in dbs:
        note(f"starting MariaDB in {MY_DIR} on port {MY_PORT}")
        urls["mysql"] = server(["scripts/start-mariadb", MY_DIR, str(MY_PORT)], env)
    if "sqlite" in dbs:
        os.makedirs(SQLITE_DIR, exist_ok=True)
        urls["sqlite"] = f"sqlite:///{SQLITE_DIR}/bench.db"
    return urls


def server(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def stop_servers(dbs: Sequence[str]) -> None:
    if "postgres" in dbs:
        subprocess.run(
            ["scripts/stop-postgres", PG_DIR], cwd=ROOT, capture_output=True, check=False
        )
    if "mysql" in dbs:
        subprocess.run(["scripts/stop-mariadb", MY_DIR], cwd=ROOT, capture_output=True, check=False)


def durability(urls: dict[str, str]) -> list[str]:
    """The durability settings as the servers report them."""
    lines = []
    if "postgres" in urls:
        with connect("postgres", urls["postgres"]) as pg:
            names = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method")
            values = [f"{n}={run_sql('postgres', pg, f'SHOW {n}')[0][0]}" for n in names]
            version = run_sql("postgres", pg, "SHOW server_version")[0][0]
        lines.append(f"PostgreSQL {version}: " + ", ".join(values))
    if "mysql" in urls:
        with connect("mysql", urls["mysql"]) as my:
            row = run_sql(
                "mysql",
                my,
                "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin, "
                "@@innodb_doublewrite",
            )[0]
        lines.append(
            f"MariaDB {row[0]}: innodb_flush_log_at_trx_commit={row[1]}, sync_binlog={row[2]}, "
            f"log_bin={row[3]}, innodb_doublewrite={row[4]}"
        )
    if "sqlite" in urls:
        # As trinbox's driver opens it: WAL, the build's default synchronous level.
        lite = sqlite3.connect(urls["sqlite"].removeprefix("sqlite:///"), isolation_level=None)
        journal = lite.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            lite.execute("PRAGMA synchronous").fetchone()[0]
        ]
        lite.close()
        lines.append(f"SQLite {sqlite3.sqlite_version}: journal_mode={journal}, synchronous={sync}")
    return lines


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(
            int(line.split()[1]) // 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration):
        mem = 0
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:,} MiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in (
        "trio",
        "trio-asyncio",
        "asyncpg",
        "aiomysql",
        "PyMySQL",
        "procrastinate",
        "pgqueuer",
    ):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"trinbox {commit or 'unknown'}; " + ", ".join(found)


# -- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description="trinbox against the raw SQL limit and its peers"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run (about 3 min)")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="relax durability (TRINBOX_FAST=1: fsync off, innodb_flush_log_at_trx_commit=0)",
    )
    parser.add_argument("--dbs", default="postgres,mysql,sqlite", help="databases to measure")
    parser.add_argument(
        "--only",
        default="drain,peers,latency,scale,priority",
        help="sections to run, comma-separated",
    )
    parser.add_argument("--jobs", type=int, default=None, help="pre-inserted jobs per drain")
    parser.add_argument("--window", type=float, default=None, help="seconds per drain at most")
    parser.add_argument("--keep-servers", action="store_true", help="leave the servers running")
    parser.add_argument("--json", default=None, help="also write every raw result to this file")
    a = parser.parse_args(argv)
    plan = QUICK if a.quick else FULL
    if a.jobs is not None:
        plan.jobs = a.jobs
    if a.window is not None:
        plan.window = a.window
    dbs = [d for d in a.dbs.split(",") if d]
    sections = [s for s in a.only.split(",") if s]
    if ("peers" in sections or "latency" in sections) and "postgres" not in dbs:
        raise SystemExit("peers and the NOTIFY latency need postgres in --dbs")

    began = time.perf_counter()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    urls = start_servers(dbs, a.fast)
    try:
        settings = durability(urls)
        bench = Bench(plan, urls, dbs, sections)
        if "drain" in sections:
            bench.drain_section()
        if "peers" in sections:
            bench.peers_section()
        if "latency" in sections:
            bench.latency_section()
        if "scale" in sections:
            bench.scale_section()
        if "priority" in sections:
            bench.priority_section()
    finally:
        if not a.keep_servers:
            stop_servers(dbs)
    rows = bench.drain_rows() + bench.rows
    minutes = (time.perf_counter() - began) / 60
    command = "scripts/bench " + shlex.join(list(argv if argv is not None else sys.argv[1:]))
    out = [
        f"# trinbox bench, {stamp}",
        "",
        f"- command: `{command.strip()}` ({'quick' if a.quick else 'full'} run, {minutes:.1f} min)",
        f"- machine: {machine()}",
        f"- versions: {versions()}",
        f"- durability ({'RELAXED: --fast' if a.fast else 'the servers durable defaults'}):",
        *[f"  - {line}" for line in settings],
        f'- drains: {plan.jobs:,} pre-inserted no-op jobs (payload `{{"n": i}}`, JSON-decoded '
        f"into a dataclass), 4 workers (trinbox `workers(4)`, raw: 4 connections), timed from "
        f"the moment trinbox serves, pools open and statements prepared (raw: from the first "
        f"claim, connections open) until all are settled, or at most {plan.window:.0f} s; "
        f"`*` = the window ended first (rows settled in it / its length, queue never empty)",
        "- peers: same server, same job count and window, asyncio-native, each in a subprocess",
        f"- latency: {plan.latency_count} publishes, lease form, poll interval 1 s",
        "- priority: the drain of the same table with a `Priority()` column (five values, "
        "index `(name, priority, retry_after, id)`) over the drain without it (index "
        "`(name, retry_after, id)`), trinbox on both sides, run back to back",
        "",
        table(rows),
        "",
    ]
    verdicts = [v for r in rows for v in r.result.split(" · ") if v]
    misses = sum(1 for v in verdicts if v == verdict(False))
    passes = sum(1 for v in verdicts if v == "PASS")
    out.append(f"targets: {passes} PASS, {misses} MISS")
    print("\n".join(out))
    if a.json:
        Path(a.json).write_text(json.dumps(bench.results, indent=2, default=str))
