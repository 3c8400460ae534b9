"""``trinbox dead-letters``: listing, redriving by ids and all of them (rows back in their
queue as first deliveries, gone from the dead letters, then handled by a served app), large
moves in chunks with a progress bar, and the refusals; queues sharing a dead letter group each
list and redrive only the rows that came from them (a served app's moves keep each row's
group), and the deliveries listed where the row lock form counts the attempt at claim."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from ..stands import SERVER_STANDS, fresh_stand
from .kit import Service, service, start_run


def _dead(svc: Service) -> None:
    """Three dead letters in the group emails_dead (ids 11-13), two in plain_jobs_dead."""
    for n in (11, 12, 13):
        body = f'{{"n":{n}}}'.encode()
        svc.email("emails_dead", due=-600.0, attempt=4, payload=body, job_id=n, origin="emails")
    svc.plain(table="plain_jobs_dead", id=21, attempt=4, payload=b'{"to": "ann@example.com"}')
    svc.plain(table="plain_jobs_dead", id=22, attempt=4, payload=b"x" * 200)


def test_list_shows_every_dead_letter(svc: Service) -> None:
    _dead(svc)
    done = svc.trinbox("dead-letters", "svc:app", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["QUEUE", "ID", "ATTEMPTS", "RETRY", "AFTER", "PAYLOAD"]
    cells = [line.split() for line in lines[1:6]]
    assert [c[:3] for c in cells] == [
        ["email_jobs:emails", "11", "3"],
        ["email_jobs:emails", "12", "3"],
        ["email_jobs:emails", "13", "3"],
        ["plain_jobs:plain", "21", "3"],
        ["plain_jobs:plain", "22", "3"],
    ]
    assert cells[0][-1] == '{"n":11}'
    assert cells[3][3:] == ["—", '{"to":', '"ann@example.com"}']
    assert cells[4][-1] == "x" * 47 + "…"
    assert lines[6:] == [
        "email_jobs:emails: 3 dead letters in emails_dead",
        "plain_jobs:plain: 2 dead letters in plain_jobs_dead",
    ]
    limited = svc.trinbox("dead-letters", "svc:app", "list", "--queue", "emails", "--limit", "1")
    assert limited.stdout.splitlines()[1:] == [
        limited.stdout.splitlines()[1],
        "email_jobs:emails: 3 dead letters in emails_dead, 1 shown",
    ]


def _attempts(svc: Service, where: str) -> list[tuple[int, str, int]]:
    found = svc.stand.rows(
        f"SELECT job_id, name, attempt FROM email_jobs WHERE {where} ORDER BY job_id"
    )
    return [(int(i), str(g), int(a)) for i, g, a in found]


async def test_redrive_ids_then_all_and_the_app_handles_them(svc: Service) -> None:
    _dead(svc)
    done = svc.trinbox("dead-letters", "svc:app", "redrive", "--queue", "emails", "--ids", "12,99")
    assert done.returncode == 1, done.stderr
    assert (
        done.stdout.strip() == "redrove 1 dead letter of email_jobs:emails back into the queue: 12"
    )
    assert done.stderr.strip() == "Error: not found among the dead letters of email_jobs:emails: 99"
    assert _attempts(svc, "name = 'emails'") == [(12, "emails", 1)]
    # Due now, lease cleared.
    due = svc.stand.value(
        "SELECT COUNT(*) FROM email_jobs WHERE name = 'emails' AND retry_after <= ? "
        "AND locked_until IS NULL",
        svc.time(1),
    )
    assert due == 1
    done = svc.trinbox("dead-letters", "svc:app", "redrive", "--queue", "plain", "--all")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip()
        == "redrove 2 dead letters of plain_jobs:plain back into the queue: 21, 22"
    )
    assert svc.stand.rows("SELECT id, attempt FROM plain_jobs ORDER BY id") == [(21, 1), (22, 1)]
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs_dead") == 0
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app"])
        await running.wait_for("2 subscriptions serving")
        await running.wait_lines('email {"n":12}', 'plain {"to": "ann@example.com"}', "plain xxx")
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs") == 0
    assert svc.stand.value("SELECT processed_at FROM email_jobs WHERE job_id = 12") is not None
    # The dead letters not redriven stayed where they were, untouched.
    assert _attempts(svc, "name = 'emails_dead'") == [
        (11, "emails_dead", 4),
        (13, "emails_dead", 4),
    ]


def test_a_large_redrive_moves_in_chunks_with_a_progress_bar(svc: Service) -> None:
    for n in range(1, 26):
        svc.plain(table="plain_jobs_dead", id=n, attempt=4)
    done = svc.trinbox(
        "dead-letters", "svc:app", "redrive", "--queue", "plain", "--all", "--chunk-size", "10"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "redrove 25 dead letters of plain_jobs:plain back into the queue: 1, 2, 3"
    )
    assert "redriving" in done.stderr
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs WHERE attempt = 1") == 25
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs_dead") == 0
    # Small moves show no bar.
    svc.plain(table="plain_jobs_dead", id=99, attempt=4)
    small = svc.trinbox("dead-letters", "svc:app", "redrive", "--queue", "plain", "--ids", "99")
    assert small.returncode == 0 and "redriving" not in small.stderr


def test_a_redrive_is_one_transaction(svc: Service) -> None:
    # The second chunk's insert fails (its id is in the queue already): nothing moves.
    for n in range(1, 6):
        svc.plain(table="plain_jobs_dead", id=n, attempt=4)
    svc.plain(id=4)
    done = svc.trinbox(
        "dead-letters", "svc:app", "redrive", "--queue", "plain", "--all", "--chunk-size", "2"
    )
    assert done.returncode == 1
    # The progress bar's label (stderr is no terminal), then the error in one line.
    assert done.stderr.strip().splitlines()[0] == "redriving", done.stderr
    assert len(done.stderr.strip().splitlines()) == 2, done.stderr
    assert done.stderr.strip().splitlines()[1].startswith("Error: "), done.stderr
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs_dead") == 5
    assert svc.stand.rows("SELECT id FROM plain_jobs") == [(4,)]


def test_refusals(svc: Service) -> None:
    _dead(svc)
    cases = [
        (["redrive", "--queue", "plain"], "--ids 12,13,... names, or --all of them; give one"),
        (["redrive", "--queue", "plain", "--all", "--ids", "21"], "give one, not both"),
        (["redrive", "--all"], "found 2 with a dead letter destination"),
        (["list", "--all"], "list takes none of them"),
        (["list", "--to-group", "x"], "list takes none of them"),
        (
            ["redrive", "--queue", "plain", "--all", "--to-group", "x"],
            "a redrive into another group moves rows within a table's group column, found "
            "to_group='x' for a table without a Group field",
        ),
        (
            ["redrive", "--queue", "emails", "--all", "--to-group", "emails_dead"],
            "found to_group='emails_dead' (the dead letter group itself)",
        ),
        (
            ["redrive", "--queue", "emails", "--ids", "x"],
            "the ids of email_jobs (Email) are int, found 'x'",
        ),
        (["redrive", "--queue", "nope", "--all"], "found 'nope'"),
    ]
    for args, words in cases:
        done = svc.trinbox("dead-letters", "svc:app", *args)
        assert done.returncode != 0, args
        assert words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    # Nothing moved.
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs_dead") == 2
    assert _attempts(svc, "name = 'emails_dead'") == [
        (11, "emails_dead", 4),
        (12, "emails_dead", 4),
        (13, "emails_dead", 4),
    ]


def test_help_of_every_command(svc: Service) -> None:
    for args in (["--help"], ["run", "--help"], ["inspect", "--help"], ["dead-letters", "--help"]):
        done = svc.trinbox(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout.startswith("Usage: trinbox"), done.stdout
    assert "--log-format [text|json]" in svc.trinbox("run", "--help").stdout
    assert "--json" in svc.trinbox("inspect", "--help").stdout
    assert "--ids" in svc.trinbox("dead-letters", "--help").stdout


# A per-account ledger (the queues acct-2 and acct-3 of one table) whose spent postings share
# one dead letter group; a posting whose payload is "poison" always fails.
LEDGER = """
import os
from datetime import datetime
from typing import Annotated

from trinbox import (
    App, AppInfo, Attempt, Backoff, Group, HandlerOutcome, Id, Inbox, InboxQueue, Lease,
    LockedUntil, OriginGroup, Payload, SqlBroker, keys, subscriber,
)


class Posting(Inbox[Lease], table="postings"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


def post(account: str, body: bytes, attempt: int) -> HandlerOutcome:
    print(account, body.decode(), attempt, flush=True)
    return HandlerOutcome.retry() if body == b"poison" else HandlerOutcome.ack()


@subscriber(InboxQueue(Posting, "acct-2").poll_interval(0.05))
async def acct_2(body: bytes, attempt: keys.Attempt) -> HandlerOutcome:
    return post("acct-2", body, attempt)


@subscriber(InboxQueue(Posting, "acct-3").poll_interval(0.05))
async def acct_3(body: bytes, attempt: keys.Attempt) -> HandlerOutcome:
    return post("acct-3", body, attempt)


URL, KIND = os.environ["SVC_URL"], os.environ["SVC_KIND"]
broker = getattr(SqlBroker, KIND)(URL)
app = App(AppInfo("ledger"))
for handler in (acct_2, acct_3):
    app.include(broker, handler).max_attempts(2).dead_letter("acct_dead").backoff(Backoff.none())
"""


def _ledger(svc: Service) -> None:
    """The ledger's module beside the service, its table made by ``trinbox schema``."""
    (svc.dir / "ledger.py").write_text(LEDGER)
    dialect = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mysql"}[svc.stand.name]
    made = svc.trinbox(
        "schema", "ledger:Posting", "--dialect", dialect, "--dead-letter", "acct_dead"
    )
    assert made.returncode == 0, made.stderr
    svc.stand.script(made.stdout)


def _postings(svc: Service) -> list[tuple[int, str, str | None, int]]:
    found = svc.stand.rows("SELECT id, account, dead_from, attempt FROM postings ORDER BY id")
    return [(int(i), str(a), None if d is None else str(d), int(n)) for i, a, d, n in found]


async def _serve_until_spent(svc: Service, spent: int, *handled: str) -> None:
    """``trinbox run ledger:app`` until ``handled`` were printed and ``spent`` rows moved to
    the dead letter group (the moves are logged before they run: the shutdown waits for them)."""
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["ledger:app"])
        await running.wait_for("2 subscriptions serving")
        await running.wait_lines(*handled)
        with trio.fail_after(60):
            while running.err.count(b"moving it to acct_dead") < spent:
                running.grew = trio.Event()
                await running.grew.wait()
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0


async def test_queues_sharing_a_dead_letter_group_keep_their_own(svc: Service) -> None:
    _ledger(svc)
    for account, body in (("acct-2", b"ok"), ("acct-2", b"poison"), ("acct-3", b"poison")):
        svc.stand.execute(
            "INSERT INTO postings (account, attempt, payload) VALUES (?, 1, ?)", account, body
        )
    await _serve_until_spent(svc, 2, "acct-2 ok 1", "acct-2 poison 2", "acct-3 poison 2")
    # The served app's moves kept each row's group.
    assert _postings(svc) == [(2, "acct_dead", "acct-2", 3), (3, "acct_dead", "acct-3", 3)]
    # A row moved into the dead letter group before the table had its OriginGroup: no queue's.
    svc.stand.execute(
        "INSERT INTO postings (account, attempt, payload) VALUES ('acct_dead', 3, ?)", b"old"
    )
    old = (4, "acct_dead", None, 3)

    # Each queue lists the dead letters that came from it, and only those.
    listed = svc.trinbox("dead-letters", "ledger:app", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[:3] for line in lines[1:3]] == [
        ["postings:acct-2", "2", "2"],
        ["postings:acct-3", "3", "2"],
    ]
    assert lines[3:] == [
        "postings:acct-2: 1 dead letter in acct_dead",
        "postings:acct-3: 1 dead letter in acct_dead",
    ]

    # acct-2's posting is never moved into acct-3's queue: refused and reported.
    done = svc.trinbox(
        "dead-letters", "ledger:app", "redrive", "--queue", "acct-3", "--ids", "2,4,9"
    )
    assert done.returncode == 1
    assert done.stdout.strip() == "redrove 0 dead letters of postings:acct-3 back into the queue"
    assert done.stderr.splitlines() == [
        "Error: dead letters of another queue, not of postings:acct-3, left where they are: "
        "2 (from acct-2), 4 (no group recorded); redrive each with --queue naming the queue it "
        "came from",
        "Error: not found among the dead letters of postings:acct-3: 9",
    ]
    assert _postings(svc) == [(2, "acct_dead", "acct-2", 3), (3, "acct_dead", "acct-3", 3), old]

    # --all of acct-3 moves its own row back, as a first delivery, no longer a dead letter.
    done = svc.trinbox("dead-letters", "ledger:app", "redrive", "--queue", "acct-3", "--all")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "redrove 1 dead letter of postings:acct-3 back into the queue: 3"
    assert _postings(svc) == [(2, "acct_dead", "acct-2", 3), (3, "acct-3", None, 1), old]

    # Told otherwise, a redrive moves rows into another group.
    done = svc.trinbox(
        "dead-letters",
        "ledger:app",
        "redrive",
        "--queue",
        "acct-2",
        "--ids",
        "2",
        "--to-group",
        "acct-3",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "redrove 1 dead letter of postings:acct-2 into the group acct-3: 2"
    )
    assert _postings(svc) == [(2, "acct-3", None, 1), (3, "acct-3", None, 1), old]
    listed = svc.trinbox("dead-letters", "ledger:app", "list")
    assert listed.stdout.splitlines() == [
        "postings:acct-2: 0 dead letters in acct_dead",
        "postings:acct-3: 0 dead letters in acct_dead",
    ]


# The row lock form counting the attempt at claim (PostgreSQL and MariaDB only): its column
# reads one ahead of the deliveries, as the lease form's does.
COUNTED = """
import os
from typing import Annotated

from trinbox import (
    App, AppInfo, Attempt, Backoff, HandlerOutcome, Id, Inbox, InboxQueue, Payload, RowLock,
    SqlBroker, keys, subscriber,
)


class Task(Inbox[RowLock], table="tasks"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(Task, "tasks").poll_interval(0.05).count_attempt_at_claim())
async def work(body: bytes, attempt: keys.Attempt) -> HandlerOutcome:
    print("task", body.decode(), attempt, flush=True)
    return HandlerOutcome.retry()


broker = getattr(SqlBroker, os.environ["SVC_KIND"])(os.environ["SVC_URL"])
app = App(AppInfo("counted"))
app.include(broker, work).max_attempts(2).dead_letter("tasks_dead").backoff(Backoff.none())
"""


@pytest.fixture(params=SERVER_STANDS)
def server_svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    with fresh_stand(request.param, tmp_path) as stand:
        yield service(stand, tmp_path)


async def test_deliveries_of_a_queue_counting_at_claim(server_svc: Service) -> None:
    svc = server_svc
    (svc.dir / "counted.py").write_text(COUNTED)
    dialect = {"postgres": "postgres", "mariadb": "mysql"}[svc.stand.name]
    made = svc.trinbox(
        "schema", "counted:Task", "--dialect", dialect, "--dead-letter", "tasks_dead"
    )
    assert made.returncode == 0, made.stderr
    svc.stand.script(made.stdout)
    svc.stand.execute("INSERT INTO tasks (attempt, payload) VALUES (1, ?)", b"t")
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["counted:app"])
        await running.wait_lines("task t 1", "task t 2")
        await running.wait_for("moving it to tasks_dead")
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0
    # Two deliveries, each counted at its claim: the column reads one ahead of them.
    assert svc.stand.rows("SELECT id, attempt FROM tasks_dead") == [(1, 3)]
    listed = svc.trinbox("dead-letters", "counted:app", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["tasks:tasks", "1", "2"]


SYNCS = """
import os
from datetime import datetime
from typing import Annotated

from trinbox import (
    App, AppInfo, Attempt, Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, SqlBroker,
    Unique, subscriber,
)


class Sync(Inbox[Lease], table="syncs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    user_key: Annotated[str | None, Unique()] = None


@subscriber(InboxQueue(Sync, "syncs"))
async def sync(body: bytes) -> None:
    pass


URL, KIND = os.environ["SVC_URL"], os.environ["SVC_KIND"]
broker = getattr(SqlBroker, KIND)(URL)
app = App(AppInfo("syncs"))
app.include(broker, sync).max_attempts(3).dead_letter("syncs_dead")
"""


def test_a_redrive_leaves_a_dead_letter_whose_key_a_live_row_holds(svc: Service) -> None:
    (svc.dir / "syncs.py").write_text(SYNCS)
    dialect = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mysql"}[svc.stand.name]
    made = svc.trinbox("schema", "syncs:Sync", "--dialect", dialect, "--dead-letter", "syncs_dead")
    assert made.returncode == 0, made.stderr
    svc.stand.script(made.stdout)
    insert = "INSERT INTO {} (id, attempt, payload, user_key) VALUES (?, ?, ?, ?)"
    svc.stand.execute(insert.format("syncs"), 1, 1, b"{}", "user-7")
    svc.stand.execute(insert.format("syncs_dead"), 5, 4, b"{}", "user-7")
    svc.stand.execute(insert.format("syncs_dead"), 6, 4, b"{}", "user-8")
    svc.stand.execute(insert.format("syncs_dead"), 7, 4, b"{}", "user-8")
    done = svc.trinbox("dead-letters", "syncs:app", "redrive", "--all")
    assert done.returncode == 1
    assert done.stdout.strip() == "redrove 1 dead letter of syncs:syncs back into the queue: 6"
    assert done.stderr.splitlines() == [
        "Error: dead letters whose dedup key an unfinished row of syncs (Sync) holds, left where "
        "they are: 5 (user-7), 7 (user-8); redrive them once that row is finished"
    ]
    assert svc.stand.rows("SELECT id FROM syncs_dead ORDER BY id") == [(5,), (7,)]
