"""``trinbox run MODULE:APP``: serve an app until SIGINT or SIGTERM.

The first signal starts a graceful shutdown (``app.shutdown()``: claiming stops, handlers in
work get the app's grace); a second one cuts the grace (``app.cut_grace()``: handlers
still in work are cancelled and their rows released). Either way the command exits 0 once
the app has shut down. A startup error (the schema, the server, the connection, the target)
is one line on stderr and exit status 1; anything else that ends serving is a crash, with
its traceback.
"""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass, field

import click
import trio

from .._engine.app import App, ShutdownReport
from ..errors import ConnectError, DeclarationError, StartupError
from ._load import load_app
from ._logs import Held, configure

__all__ = ["command", "one_line"]

logger: logging.Logger = logging.getLogger("trinbox.cli")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What ends `run` with one line and status 1, not a traceback: the service cannot start.
_STARTUP = (StartupError, ConnectError, DeclarationError)


def one_line(exc: object) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass
class _Started:
    """The task status ``serve`` reports to (a ``trio.TaskStatus``)."""

    logs: Held | None = None
    event: trio.Event = field(default_factory=trio.Event)

    def started(self, value: None = None) -> None:
        self.event.set()
        if self.logs is not None:
            self.logs.let_go()


@dataclass
class _Outcome:
    report: ShutdownReport | None = None
    error: Exception | None = None
    cut: bool = False
    started: bool = False


async def serve_until_signalled(app: App, logs: Held | None = None) -> _Outcome:
    """Serve ``app``; the first SIGINT/SIGTERM shuts it down gracefully, a second cuts the
    grace. What ended it is in the outcome (a failure is raised by the caller)."""
    outcome = _Outcome()
    started = _Started(logs)
    serve_scope = trio.CancelScope()
    with trio.open_signal_receiver(*_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                try:
                    with serve_scope:
                        outcome.report = await app.serve(task_status=started)
                except Exception as exc:
                    outcome.error = exc
                finally:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(serve)
            received = 0
            async for signum in signals:
                received += 1
                name = signal.Signals(signum).name
                if received == 1 and started.event.is_set():
                    logger.info(
                        "%s: %s received, shutting down (grace %s s; send it again to cut "
                        "the grace)",
                        app.info.name,
                        name,
                        app.grace,
                    )
                    app.shutdown()
                else:
                    # A second signal, or one before serving began (nothing is in work yet).
                    if started.event.is_set():
                        logger.warning(
                            "%s: %s received again, cutting the grace: handlers still in "
                            "work are cancelled and their rows released",
                            app.info.name,
                            name,
                        )
                        outcome.cut = True
                        app.cut_grace()
                    else:
                        logger.info("%s: %s received during startup, stopping", app.info.name, name)
                        serve_scope.cancel()
    outcome.started = started.event.is_set()
    return outcome


@click.command("run")
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False),
    help="The least severe records written to stderr.",
)
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json"]),
    help="text lines, or one JSON object per line (time, level, logger, message, extras).",
)
def command(target: str, log_level: str, log_format: str) -> None:
    """Serve the app MODULE:APP until SIGINT or SIGTERM.

    MODULE:APP names an App, or a function without arguments that returns one, importable
    from the current directory (like examples.transcoder:app). The first signal shuts down
    gracefully (handlers in work get the app's grace); a second one cuts the grace. Exits 0
    once shut down, 1 with one line on stderr when the app cannot start."""
    logs = configure(log_level, "json" if log_format == "json" else "text")
    try:
        app = load_app(target)
    except click.BadParameter as exc:
        logs.let_go(logging.WARNING)
        raise click.ClickException(one_line(exc.message)) from None
    except _STARTUP as exc:
        logs.let_go(logging.WARNING)
        raise click.ClickException(one_line(exc)) from None
    try:
        outcome = trio.run(serve_until_signalled, app, logs)
    finally:
        # Not started: what was held is the story of a failed startup, told by its error.
        logs.let_go(logging.WARNING)
    if outcome.error is not None:
        if isinstance(outcome.error, _STARTUP) and not outcome.started:
            click.echo(f"Error: {app.info.name} did not start: {one_line(outcome.error)}", err=True)
            sys.exit(1)
        raise outcome.error
