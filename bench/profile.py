"""Profile one trinbox drain under py-spy and print its top frames: where the CPU of the trinbox
process goes (py-spy leaves out samples where the thread sleeps in epoll, so this is the CPU
profile, not the wall-clock one).

    .venv/bin/pip install py-spy        (not a bench dependency: a profiling tool)
    python -m bench.profile DB URL FORM N [--batch K] [--top 25] [--rate 500]

The table is filled first (not profiled); then ``python -m bench.drain ... --no-fill`` runs under
``py-spy record --format raw``. Frames are ``function (file:line)`` with the line dropped, so a
function's samples add up; "self" counts samples where it was the innermost frame, "total"
those where it was anywhere on the stack (once per sample).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import fill

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r":\d+\)$")


def frame_name(frame: str) -> str:
    """``fetch (trinbox/_drivers/postgres.py:133)`` -> ``fetch (trinbox/_drivers/postgres.py)``,
    with site-packages paths cut to the package."""
    name = _LINE.sub(")", frame.strip())
    return re.sub(r"\(.*?site-packages/", "(", name)


def summarize(raw: str, top: int) -> str:
    total_samples = 0
    self_count: collections.Counter[str] = collections.Counter()
    total_count: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";") if f.strip()]
        if frames and frames[0].startswith("process "):
            frames = frames[1:]
        if frames and frames[0].startswith("thread "):
            frames = frames[1:]
        if not frames:
            continue
        total_samples += count
        self_count[frames[-1]] += count
        for name in set(frames):
            total_count[name] += count
    out = [f"{total_samples} samples (CPU, idle excluded)", "", "top by self:"]
    for name, count in self_count.most_common(top):
        out.append(f"  {100 * count / total_samples:5.1f}%  {name}")
    out += ["", "top by total (trinbox and driver frames):"]
    shown = 0
    for name, count in total_count.most_common():
        if "trinbox/" in name or "asyncpg" in name or "aiomysql" in name or "trio_asyncio" in name:
            out.append(f"  {100 * count / total_samples:5.1f}%  {name}")
            shown += 1
            if shown >= top:
                break
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", choices=["postgres", "mysql", "sqlite"])
    parser.add_argument("url")
    parser.add_argument("form")
    parser.add_argument("n", type=int)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    a = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    fill(a.db, a.url, a.n, form=a.form)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.txt"
        drain = [sys.executable, "-m", "bench.drain", a.db, a.url, a.form, str(a.n), "--no-fill"]
        drain += ["--max-seconds", str(a.max_seconds)]
        if a.batch is not None:
            drain += ["--batch", str(a.batch)]
        command = [spy, "record", "--format", "raw", "--rate", str(a.rate), "-o", str(out)]
        done = subprocess.run(
            [*command, "--", *drain], cwd=ROOT, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        # py-spy's own notes follow the drain's JSON line on stdout
        line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("{"))
        result = json.loads(line)
        print(f"drain under py-spy: {result['jobs_per_s']:,.0f} jobs/s, {result['finished']} jobs")
        print(summarize(out.read_text(), a.top))


if __name__ == "__main__":
    main()
