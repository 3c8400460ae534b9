"""The ``trinbox`` command line: ``run``, ``inspect``, ``dead-letters``, ``queues``, ``jobs``,
``prune``, ``schema`` and ``asyncapi``.

Each command lives in a module of its own; this module only assembles the group. A public
facade: it imports from ``trinbox`` and the runtime, never the other way round."""

from __future__ import annotations

import click

from . import asyncapi, dead_letters, inspect, jobs, prune, queues, run, schema

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trinbox")
def cli() -> None:
    """trinbox: task queues in your own SQL tables, for Trio."""


for _module in (run, inspect, dead_letters, queues, jobs, prune, schema, asyncapi):
    cli.add_command(_module.command)


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="trinbox")
