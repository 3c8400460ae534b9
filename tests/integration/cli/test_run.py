"""``trinbox run``: serving until a signal, the second signal, startup errors, JSON logs."""

from __future__ import annotations

import json
import signal

import trio

from .kit import Service, start_run


def _processed(svc: Service) -> int:
    return int(svc.stand.value("SELECT COUNT(*) FROM email_jobs WHERE processed_at IS NOT NULL"))


async def test_serves_until_sigint_then_exits_0_with_rows_handled(svc: Service) -> None:
    for n in range(3):
        svc.email("emails", payload=f'{{"n": {n}}}'.encode())
    svc.plain(payload=b"p1")
    svc.plain(tenant="u", payload=b"p2")
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app"])
        await running.wait_for("2 subscriptions serving")
        await running.wait_lines(*(f'email {{"n": {n}}}' for n in range(3)), "plain p1", "plain p2")
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    # The graceful shutdown let the handlers' settlements finish.
    assert _processed(svc) == 3
    assert svc.stand.value("SELECT COUNT(*) FROM plain_jobs") == 0
    err = running.err.decode()
    assert "SIGINT received, shutting down" in err
    assert "shut down; 0 locks released" in err
    assert "Traceback" not in err


async def test_sigterm_is_a_graceful_shutdown_too(svc: Service) -> None:
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app"])
        await running.wait_for("2 subscriptions serving")
        svc.email("emails", payload=b"term")
        await running.wait_lines("email term")
        running.process.send_signal(signal.SIGTERM)
        assert await running.ended() == 0, running.err.decode()
    assert _processed(svc) == 1
    assert "SIGTERM received, shutting down" in running.err.decode()


async def test_a_second_signal_cuts_a_long_handlers_grace(svc: Service) -> None:
    svc.email("emails", payload=b"long")
    async with trio.open_nursery() as nursery:
        # A grace far longer than the test: only the second signal can end it in time.
        running = await start_run(nursery, svc, ["svc:app"], SVC_MODE="hang", SVC_GRACE="600")
        await running.wait_lines("hanging long")
        running.process.send_signal(signal.SIGINT)
        await running.wait_for("shutting down (grace 600.0 s")
        # Still in its grace: the process has not ended.
        with trio.move_on_after(0.5):
            await running.process.wait()
        assert running.process.returncode is None
        running.process.send_signal(signal.SIGINT)
        assert await running.ended(within=30) == 0, running.err.decode()
    err = running.err.decode()
    assert "received again, cutting the grace" in err
    # The handler was cancelled and its row released: due again, lease cleared, unprocessed.
    assert _processed(svc) == 0
    assert svc.stand.value("SELECT COUNT(*) FROM email_jobs WHERE locked_until IS NULL") == 1


async def test_json_log_lines_parse_with_their_fields(svc: Service) -> None:
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app", "--log-format", "json"])
        await running.wait_for("2 subscriptions serving")
        running.process.send_signal(signal.SIGINT)
        assert await running.ended() == 0, running.err.decode()
    lines = [json.loads(line) for line in running.err.decode().splitlines()]
    assert lines, running.err.decode()
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line)
    messages = [line["message"] for line in lines]
    assert "svc: 2 subscriptions serving" in messages
    assert any(m.startswith("svc: shut down;") for m in messages)


def test_a_startup_error_is_one_line_and_status_1(svc: Service) -> None:
    svc.stand.script("DROP TABLE plain_jobs")
    done = svc.trinbox("run", "svc:app")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[-1].startswith("Error: svc did not start: "), done.stderr
    assert "plain_jobs" in lines[-1]
    assert "Traceback" not in done.stderr


def test_a_connection_refused_is_one_line(svc: Service) -> None:
    url = {
        "sqlite": "sqlite:///no/such/dir/queue.db",
        "postgres": "postgresql://postgres@127.0.0.1:1/postgres",
        "mariadb": "mysql://trinbox:trinbox@127.0.0.1:1/trinbox",
    }[svc.stand.name]
    done = svc.trinbox("run", "svc:app", SVC_URL=url)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: svc did not start: "), done.stderr


def test_a_bad_target_is_one_line(svc: Service) -> None:
    for target, words in [
        ("nosuch:app", "no module 'nosuch'"),
        ("svc:nope", "has no attribute 'nope'"),
        ("svc", "a target is MODULE:NAME"),
        ("svc:Email", "not an App"),
    ]:
        done = svc.trinbox("run", target)
        assert done.returncode == 1, (target, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, (target, done.stderr)
        assert words in lines[0], (target, done.stderr)


async def test_a_crash_ends_with_its_traceback_and_status_1(svc: Service) -> None:
    svc.email("emails", payload=b"boom")
    async with trio.open_nursery() as nursery:
        running = await start_run(nursery, svc, ["svc:app"], SVC_MODE="crash")
        assert await running.ended() == 1, running.err.decode()
    err = running.err.decode()
    assert "Traceback (most recent call last)" in err
    assert "HandlerFailed: svc: a handler raised under the fail-fast policy" in err
    assert "RuntimeError: the handler broke" in err
