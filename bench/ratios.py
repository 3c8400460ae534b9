"""Ratios measured side by side, interleaved round by round, for a machine that is not quiet:
each round runs both sides of every pair back to back (the order alternating each round), and
the table gives the median of the per-round ratios and their range.

    python -m bench.ratios advisory [--rounds 5] [--n 2000] [--batch K] [--sqlite URL]
    python -m bench.ratios priority [--rounds 5] [--n 2000] [--sqlite URL] [--postgres URL]
                                    [--mysql URL]
    python -m bench.ratios headers [--rounds 5] [--n 2000] [--sqlite URL] [--postgres URL]
                                   [--mysql URL]
    python -m bench.ratios unique [--rounds 5] [--n 2000] [--sqlite URL] [--postgres URL]
                                  [--mysql URL]
    python -m bench.ratios limits [--rounds 5] [--n 2000] [--sqlite URL] [--postgres URL]
                                  [--mysql URL]
    python -m bench.ratios pause [--rounds 5] [--n 2000] [--sqlite URL] [--postgres URL]
                                 [--mysql URL]

``advisory``: SQLite advisory (a key per row, 10 keys), trinbox (``bench.drain``) over its
raw loop (``bench.raw``), single deliveries or ``--batch K``. ``priority``: the drain of a
table whose row class declares ``Priority()`` (``lease-prio``, ``rowlock-prio``: claim index
``(name, priority, retry_after, id)``) over the same table without it (``lease``,
``rowlock``: index ``(name, retry_after, id)``), trinbox on both sides, per database given.
``headers``: the lease form's publishes (``bench.publish``, four publishing tasks) and drain
(``bench.drain``, the handler taking ``keys.Headers``) of rows that carry two headers over the
same without them (``--headers`` against none), per database given. ``unique``: the lease
form's publishes into a table with a Unique field, each with a key of its own (``--unique``)
and each without one (``--unique-table``), over those into the table without the field; and
the drain of rows that each hold a key (``bench.drain --unique``) over the plain table's.
``limits``: the drain of a table of 100 tenants by 16 workers with
``.limit(key="tenant", concurrency=3)`` (``--limit-key 3``) over the same drain without a
limit, in the lease form, and on the servers the row lock and advisory forms too (adv-row:
each row its own advisory key). ``pause``: the lease drain through a broker with a pause
table (``--pauses``: the pause watcher runs, every claim passes the pause gate, nothing is
paused) over one without.
Each run is a subprocess that fills the table first (not timed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .common import DB_LABEL, FORM_LABEL

ROOT = Path(__file__).resolve().parent.parent
# ``limits``: the tenants of the table, the queue's workers and the per-tenant limit.
LIMIT_TENANTS = 100
LIMIT_WORKERS = 16
LIMIT_N = 3


@dataclass(frozen=True)
class Side:
    module: str  # bench.drain, bench.raw or bench.publish
    form: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pair:
    label: str
    db: str
    url: str
    top: Side  # the ratio is top / bottom
    bottom: Side


def run(side: Side, db: str, url: str, n: int, window: float, batch: int | None) -> float:
    command = [sys.executable, "-m", f"bench.{side.module}", db, url, side.form, str(n)]
    command += ["--max-seconds", str(window), *side.flags]
    if batch is not None:
        command += ["--batch", str(batch)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    result = json.loads(lines[-1])
    if not result["ok"]:
        raise SystemExit(f"{' '.join(command)}: rows left do not match: {result}")
    return float(result["jobs_per_s"])


def pairs(args: argparse.Namespace) -> list[Pair]:
    mode = "single" if args.batch is None else f".batch({args.batch})"
    if args.what == "advisory":
        return [
            Pair(
                f"SQLite · {FORM_LABEL[form]} · {mode}",
                "sqlite",
                args.sqlite,
                Side("drain", form),
                Side("raw", form),
            )
            for form in ("adv-row", "adv-10")
        ]
    found = []
    for db, url in (("sqlite", args.sqlite), ("postgres", args.postgres), ("mysql", args.mysql)):
        if url is None:
            continue
        if args.what == "unique":
            for flag, what in (("--unique", "publish with a key"), ("--unique-table", "no key")):
                found.append(
                    Pair(
                        f"{DB_LABEL[db]} · lease · {what}",
                        db,
                        url,
                        Side("publish", "lease", (flag,)),
                        Side("publish", "lease"),
                    )
                )
            found.append(  # the claim (and ack) of rows that each hold a key
                Pair(
                    f"{DB_LABEL[db]} · lease · drain, a key per row",
                    db,
                    url,
                    Side("drain", "lease", ("--unique",)),
                    Side("drain", "lease"),
                )
            )
            continue
        if args.what == "limits":
            same = ("--tenants", str(LIMIT_TENANTS), "--workers", str(LIMIT_WORKERS))
            # SQLite has no row lock form; each form against itself without the limit.
            for form in ("lease",) if db == "sqlite" else ("lease", "rowlock", "adv-row"):
                found.append(
                    Pair(
                        f"{DB_LABEL[db]} · {FORM_LABEL[form]} · {LIMIT_TENANTS} keys x "
                        f"N={LIMIT_N}, workers({LIMIT_WORKERS})",
                        db,
                        url,
                        Side("drain", form, (*same, "--limit-key", str(LIMIT_N))),
                        Side("drain", form, same),
                    )
                )
            continue
        if args.what == "pause":
            found.append(
                Pair(
                    f"{DB_LABEL[db]} · lease · pause table",
                    db,
                    url,
                    Side("drain", "lease", ("--pauses",)),
                    Side("drain", "lease"),
                )
            )
            continue
        if args.what == "headers":
            for module, what in (("publish", "publish"), ("drain", "drain")):
                found.append(
                    Pair(
                        f"{DB_LABEL[db]} · lease · {what}",
                        db,
                        url,
                        Side(module, "lease", ("--headers",)),
                        Side(module, "lease"),
                    )
                )
            continue
        forms = ("lease",) if db == "sqlite" else ("lease", "rowlock")
        for form in forms:
            found.append(
                Pair(
                    f"{DB_LABEL[db]} · {FORM_LABEL[form]} · {mode}",
                    db,
                    url,
                    Side("drain", f"{form}-prio"),
                    Side("drain", form),
                )
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "what", choices=["advisory", "priority", "headers", "unique", "limits", "pause"]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--window", type=float, default=60.0, help="seconds per run at most")
    parser.add_argument("--batch", type=int, default=None, help="both sides in .batch(K)")
    parser.add_argument("--sqlite", default="sqlite:////tmp/trinbox-bench-ratios/bench.db")
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--mysql", default=None)
    args = parser.parse_args()
    Path(args.sqlite.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    found = pairs(args)
    rates: dict[tuple[str, str], list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for pair in found:
            sides = (("top", pair.top), ("bottom", pair.bottom))
            got = {}
            for name, side in sides if round_ % 2 == 0 else sides[::-1]:
                got[name] = run(side, pair.db, pair.url, args.n, args.window, args.batch)
                rates.setdefault((pair.label, name), []).append(got[name])
            ratios.setdefault(pair.label, []).append(got["top"] / got["bottom"])
            print(
                f"round {round_ + 1} {pair.label}: {pair.top.module} {pair.top.form} "
                f"{got['top']:,.0f} jobs/s, {pair.bottom.module} {pair.bottom.form} "
                f"{got['bottom']:,.0f} jobs/s, ratio {got['top'] / got['bottom']:.2f}",
                file=sys.stderr,
                flush=True,
            )
    top, bottom = {
        "advisory": ("trinbox", "raw"),
        "priority": ("Priority()", "without"),
        "headers": ("with headers", "without"),
        "unique": ("Unique()", "without"),
        "limits": ("limited", "no limit"),
        "pause": ("pause table", "none"),
    }[args.what]
    print(
        f"| {'run' if args.what in ('headers', 'unique') else 'drain'} | {top} median jobs/s | "
        f"{bottom} median jobs/s | ratio median | "
        f"ratio range | rounds |"
    )
    print("|---|---|---|---|---|---|")
    for pair in found:
        r = ratios[pair.label]
        print(
            f"| {pair.label} | {statistics.median(rates[(pair.label, 'top')]):,.0f} | "
            f"{statistics.median(rates[(pair.label, 'bottom')]):,.0f} | "
            f"{statistics.median(r):.2f} | {min(r):.2f}-{max(r):.2f} | {len(r)} |"
        )


if __name__ == "__main__":
    main()
