"""A rate held by four OS processes (``InboxQueue.limit(key=, rate=Rate(n, per=...))``, lease
form, every stand): with ``Rate(4, per=2 s)`` on one key and four workers in each process, the
starts of all of them stay within GCRA's bound (a burst of 4, then one per 0.5 s: from any start
to a later one, at most 4 + one per 0.5 s elapsed), and every row is handled once.

Each process is ``python -m tests.integration.matrix.rate_process`` (rate_process.py); a start
is its handler's entry on ``time.monotonic()``, one clock for every process of the host. An
entry follows its claim by the claim's commit and the dispatch to a worker, at most ``LAG``:
the starts between two entries were claimed at most ``LAG`` before the first, so the bound is
checked over the elapsed time plus ``LAG`` (two processes spending one burst would start 8 at
once, far beyond it).
"""

from __future__ import annotations

from trinbox.schema import DialectName, ddl

from .conftest import Case
from .kit import cells, insert_rows
from .rate_process import RATE, RATES
from .test_processes import plain_rows, run_workers

PROCESSES = 4
ROWS = 16
LAG = 0.2  # seconds from a claim to its handler's entry, at most (a loaded host)


def gcra_excess(starts: list[float], n: int, interval: float, lag: float) -> list[str]:
    """The pairs of starts (sorted) between which more started than GCRA allows."""
    found: list[str] = []
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            allowed = n + int((starts[j] - first + lag) / interval)
            if j - i + 1 > allowed:
                found.append(f"{j - i + 1} starts in {starts[j] - first:.3f} s (at most {allowed})")
    return found


@cells(forms=["lease"])
async def test_a_rate_held_by_four_processes_stays_within_gcra(case: Case) -> None:
    dialect: DialectName = "mysql" if case.stand.name == "mariadb" else case.stand.name
    for statement in ddl(RATES, dialect):
        case.stand.execute(statement)
    insert_rows(case.stand, "plain_jobs", plain_rows(["hot"] * ROWS))
    results = await run_workers(
        case, ROWS, "tests.integration.matrix.rate_process", processes=PROCESSES, deadline=120
    )
    starts = sorted(start for result in results for _, start, _ in result.intervals)
    interval = RATE.per.total_seconds() / RATE.n
    assert gcra_excess(starts, RATE.n, interval, LAG) == []
    # Spent, not starved: the burst at once, then the rest within a few polls of their turn.
    assert starts[RATE.n - 1] - starts[0] < LAG
    assert starts[-1] - starts[0] < (ROWS - RATE.n) * interval + 1
    handled = sorted(n for result in results for n in result.ids)
    assert handled == list(range(ROWS))
    assert sum(1 for result in results if result.ids) > 1, "one process handled every row"
    assert case.stand.rows("SELECT * FROM plain_jobs") == []
