"""``trinbox inspect``: the numbers of each mounted queue against rows the test inserted, in
text and as JSON."""

from __future__ import annotations

import json
from typing import Any

from .kit import Service


def _fill(svc: Service) -> None:
    """emails: 4 due (the oldest due 60 s ago; one with an expired lease), 2 scheduled, 1
    leased, 2 processed (not counted); 2 dead letters in the group emails_dead, and one there
    that came from another queue (not counted); a row of another group. plain (advisory, no
    RetryAfter): 2 rows, 3 dead letters in its table."""
    for due in (-60.0, -30.0, -10.0):
        svc.email("emails", due=due)
    svc.email("emails", due=-20.0, locked=-3600.0)  # a lease that ran out: due again
    svc.email("emails", due=3600.0)
    svc.email("emails", due=7200.0)
    svc.email("emails", due=-5.0, locked=3600.0)
    svc.email("emails", due=-500.0, processed=True)
    svc.email("emails", due=-400.0, processed=True)
    svc.email("emails_dead", due=-900.0, attempt=4, origin="emails")
    svc.email("emails_dead", due=-800.0, attempt=4, origin="emails")
    svc.email("emails_dead", due=-700.0, attempt=4, origin="others")
    svc.email("others", due=-1000.0)
    svc.plain()
    svc.plain(tenant="u")
    for n in (1, 2, 3):
        svc.plain(table="plain_jobs_dead", id=100 + n, attempt=4)


def test_inspect_json_counts_what_the_tables_hold(svc: Service) -> None:
    _fill(svc)
    done = svc.trinbox("inspect", "svc:app", "--json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    emails, plain = found
    age = emails.pop("oldest_due_age_seconds")
    assert emails == {
        "table": "email_jobs",
        "group": "emails",
        "queue": "emails",
        "due": 4,
        "scheduled": 2,
        "in_work": 1,
        "dead": 2,
    }
    assert 59.0 <= age < 90.0, age
    assert plain == {
        "table": "plain_jobs",
        "group": None,
        "queue": "plain",
        "due": 2,
        "scheduled": 0,
        "in_work": None,
        "dead": 3,
        "oldest_due_age_seconds": None,
    }


def test_inspect_text_is_an_aligned_table(svc: Service) -> None:
    _fill(svc)
    done = svc.trinbox("inspect", "svc:app")
    assert done.returncode == 0, done.stderr
    header, emails, plain = done.stdout.splitlines()
    assert header.split() == [
        "TABLE",
        "QUEUE",
        "DUE",
        "SCHEDULED",
        "IN",
        "WORK",
        "DEAD",
        "OLDEST",
        "DUE",
    ]
    cells = emails.split()
    assert cells[:6] == ["email_jobs", "emails", "4", "2", "1", "2"]
    assert cells[6].endswith("s") and 59.0 <= float(cells[6][:-1]) < 90.0, cells
    assert plain.split() == ["plain_jobs", "plain", "2", "0", "—", "3", "—"]
    # Numbers are right-aligned under their headers.
    assert emails.index(" 4 ") + 2 == header.index("DUE") + 3


def test_inspect_of_empty_queues_and_one_queue(svc: Service) -> None:
    done = svc.trinbox("inspect", "svc:app", "--json", "--queue", "plain")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "table": "plain_jobs",
            "group": None,
            "queue": "plain",
            "due": 0,
            "scheduled": 0,
            "in_work": None,
            "dead": 0,
            "oldest_due_age_seconds": None,
        }
    ]
    empty = json.loads(svc.trinbox("inspect", "svc:app", "--json").stdout)[0]
    assert (empty["due"], empty["in_work"], empty["dead"], empty["oldest_due_age_seconds"]) == (
        0,
        0,
        0,
        None,
    )


def test_inspect_refusals_are_one_line(svc: Service) -> None:
    done = svc.trinbox("inspect", "svc:app", "--queue", "nope")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: --queue names a mounted queue, found 'nope', which svc has not (queues: "
        "email_jobs:emails, plain_jobs:plain)"
    ]
    svc.stand.script("DROP TABLE plain_jobs_dead")
    done = svc.trinbox("inspect", "svc:app")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "plain_jobs_dead" in lines[0]
