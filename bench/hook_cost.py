"""The event hook's cost: the drain rate with no hook, a no-op hook and the Prometheus adapter,
beside the code before the hook existed (a worktree of an earlier commit), interleaved round by
round so every variant sees the same machine.

    python -m bench.hook_cost --base /path/to/worktree-of-main [--rounds 3] [--n 5000]
                              [--sqlite URL] [--postgres URL]

Each run is ``python -m bench.drain`` in a subprocess (the base runs its own copy, from its
own tree); the order of the variants rotates each round. Prints one Markdown table: the
median rate per variant, its ratio to the base's median, and the spread (lowest-highest) of
the rounds.
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
VARIANTS = ("base", "none", "noop", "prometheus")


def run(tree: Path, db: str, url: str, n: int, batch: int | None, events: str | None) -> float:
    command = [
        sys.executable,
        "-m",
        "bench.drain",
        db,
        url,
        "lease",
        str(n),
        "--max-seconds",
        "120",
    ]
    if batch is not None:
        command += ["--batch", str(batch)]
    if events is not None:
        command += ["--events", events]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["drained"], result
    return float(result["jobs_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--sqlite", default="sqlite:////tmp/trinbox-hook-cost/bench.db")
    parser.add_argument("--postgres", default=None)
    args = parser.parse_args()
    Path(args.sqlite.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    cases: list[tuple[str, str, str, int | None]] = [
        ("SQLite · lease · single", "sqlite", args.sqlite, None),
        ("SQLite · lease · .batch(100)", "sqlite", args.sqlite, 100),
    ]
    if args.postgres:
        cases.append(("PostgreSQL · lease · single", "postgres", args.postgres, None))
    rates: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        order = VARIANTS[round_ % 4 :] + VARIANTS[: round_ % 4]
        for label, db, url, batch in cases:
            for variant in order:
                tree = args.base if variant == "base" else HERE
                events = None if variant == "base" else variant
                rate = run(tree, db, url, args.n, batch, events)
                rates.setdefault((label, variant), []).append(rate)
                print(f"round {round_ + 1} {label} {variant}: {rate:,.0f} jobs/s", file=sys.stderr)
    print("| drain | variant | median jobs/s | ratio to base | rounds (lowest-highest) |")
    print("|---|---|---|---|---|")
    for label, *_ in cases:
        base = statistics.median(rates[(label, "base")])
        for variant in VARIANTS:
            found = rates[(label, variant)]
            median = statistics.median(found)
            spread = f"{min(found):,.0f}-{max(found):,.0f}"
            name = {"base": "before (main)", "none": "no hook", "noop": "no-op hook"}.get(
                variant, "Prometheus"
            )
            print(f"| {label} | {name} | {median:,.0f} | {median / base:.2f} | {spread} |")


if __name__ == "__main__":
    main()
