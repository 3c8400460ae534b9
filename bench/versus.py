"""Two trees of trinbox side by side: the drain rate of every (database, form, shape) cell in a
worktree of an earlier commit (``--before``) and in this tree, interleaved round by round so
both see the same machine; the order of the two alternates each round.

    python -m bench.versus --before /path/to/worktree [--rounds 3] [--n 3000]
                           [--sqlite URL] [--postgres URL] [--mysql URL]
                           [--forms lease,rowlock,adv-row,adv-10] [--shapes single,batch]

Each run is ``python -m bench.drain`` in a subprocess, from its own tree (so each side runs its
own code and its own copy of the bench). Cells a database does not serve (row lock on SQLite)
are skipped. Prints one Markdown table: the median rate of each side, the ratio after/before
of the medians, and each side's spread (lowest-highest) over the rounds. A change is slower
in a cell when the ratio is below the spread's noise: read the spreads, not only the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
BATCH = 100


def run(tree: Path, db: str, url: str, form: str, n: int, batch: int | None) -> float:
    command = [sys.executable, "-m", "bench.drain", db, url, form, str(n), "--max-seconds", "120"]
    if batch is not None:
        command += ["--batch", str(batch)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(command[2:])} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not (result["ok"] and result["drained"]):
        raise SystemExit(f"{tree}: {' '.join(command[2:])} did not drain: {result}")
    return float(result["jobs_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True, help="a worktree of the base")
    parser.add_argument("--after", type=Path, default=HERE, help="default: this tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--sqlite", default="sqlite:////tmp/trinbox-versus/bench.db")
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--mysql", default=None)
    parser.add_argument("--forms", default="lease,rowlock,adv-row,adv-10")
    parser.add_argument("--shapes", default="single,batch")
    args = parser.parse_args()
    Path(args.sqlite.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    dbs = [("SQLite", "sqlite", args.sqlite)]
    dbs += [("PostgreSQL", "postgres", args.postgres)] if args.postgres else []
    dbs += [("MariaDB", "mysql", args.mysql)] if args.mysql else []
    cells = [
        (f"{name} · {form} · {shape}", db, url, form, BATCH if shape == "batch" else None)
        for name, db, url in dbs
        for form in args.forms.split(",")
        if not (db == "sqlite" and form.startswith("rowlock"))
        for shape in args.shapes.split(",")
    ]
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rates: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
        for label, db, url, form, batch in cells:
            for side in order:
                rate = run(sides[side], db, url, form, args.n, batch)
                rates.setdefault((label, side), []).append(rate)
                print(f"round {round_ + 1} {label} {side}: {rate:,.0f} jobs/s", file=sys.stderr)
    print(
        f"before: {sides['before']}  after: {sides['after']}  rounds: {args.rounds}, "
        f"{args.n} jobs each"
    )
    print()
    print("| drain | before jobs/s | after jobs/s | after/before | before spread | after spread |")
    print("|---|---|---|---|---|---|")
    for label, *_ in cells:
        before, after = rates[(label, "before")], rates[(label, "after")]
        ratio = statistics.median(after) / statistics.median(before)
        print(
            f"| {label} | {statistics.median(before):,.0f} | {statistics.median(after):,.0f} "
            f"| {ratio:.2f} | {min(before):,.0f}-{max(before):,.0f} "
            f"| {min(after):,.0f}-{max(after):,.0f} |"
        )


if __name__ == "__main__":
    main()
