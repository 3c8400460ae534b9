"""``trinbox dead-letters``: listing, redriving by ids and all of them (rows back in their
queue as first deliveries, gone from the dead letters, then handled by a served app), large
moves in chunks with a progress bar, and the refusals."""

from __future__ import annotations

import signal

import trio

from .kit import Service, start_run


def _dead(svc: Service) -> None:
    """Three dead letters in the group emails_dead (ids 11-13), two in plain_jobs_dead."""
    for n in (11, 12, 13):
        svc.email("emails_dead", due=-600.0, attempt=4, payload=f'{{"n":{n}}}'.encode(), job_id=n)
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
        (["list", "--all"], "list takes neither"),
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


def test_help_of_every_command(svc: Service) -> None:
    for args in (["--help"], ["run", "--help"], ["inspect", "--help"], ["dead-letters", "--help"]):
        done = svc.trinbox(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout.startswith("Usage: trinbox"), done.stdout
    assert "--log-format [text|json]" in svc.trinbox("run", "--help").stdout
    assert "--json" in svc.trinbox("inspect", "--help").stdout
    assert "--ids" in svc.trinbox("dead-letters", "--help").stdout
