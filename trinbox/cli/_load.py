"""``MODULE:NAME`` targets, read as hypercorn and uvicorn read theirs: the module is imported
with the current directory first on ``sys.path``; ``NAME`` may be dotted; an app target may
name a function without arguments that returns the ``App``."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

import click

from .._declare._cancels import CancelRequests
from .._declare._inbox import Inbox
from .._declare._limit_records import LimitRecords
from .._declare._pauses import Pauses
from .._declare._rates import Rates
from .._declare._ticks import Ticks
from .._declare._tracker import Tracker
from .._engine.app import App

__all__ = ["load_app", "load_object", "load_row"]


def load_object(target: str) -> object:
    """The object ``MODULE:NAME`` names, or a ``click.BadParameter`` saying what is wrong."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        msg = f"a target is MODULE:NAME, like examples.transcoder:app; found {target!r}"
        raise click.BadParameter(msg)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            msg = (
                f"no module {module_name!r} importable from {cwd}; run trinbox from the "
                f"directory that holds it, or set PYTHONPATH"
            )
            raise click.BadParameter(msg) from exc
        raise
    found: Any = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            msg = f"module {module_name!r} has no attribute {attr!r}; check {target!r}"
            raise click.BadParameter(msg) from None
    return found


def load_app(target: str) -> App:
    """The ``App`` that ``target`` names, calling a factory function without arguments."""
    found = load_object(target)
    if not isinstance(found, App) and callable(found) and not isinstance(found, type):
        params = [
            p
            for p in inspect.signature(found).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        if params:
            msg = (
                f"{target} is a function of {len(params)} required arguments; an app target "
                f"names an App or a function without arguments that returns one"
            )
            raise click.BadParameter(msg)
        found = found()
    if not isinstance(found, App):
        msg = (
            f"{target} is {type(found).__name__}, not an App; name an App or a function "
            f"without arguments that returns one"
        )
        raise click.BadParameter(msg)
    return found


def load_row(target: str) -> type[Inbox[Any, Any]]:
    """The row class (a subclass of ``Inbox``) that ``target`` names."""
    found = load_object(target)
    if not (isinstance(found, type) and issubclass(found, Inbox)):
        msg = f"{target} is {found!r}, not a row class; name a class derived from Inbox[...]"
        raise click.BadParameter(msg)
    return found  # pyright: ignore[reportUnknownVariableType]  (issubclass: Inbox[Unknown, ...])


def load_table(
    target: str,
) -> type[Inbox[Any, Any]] | Tracker | Ticks | Pauses | CancelRequests | Rates | LimitRecords:
    """What ``trinbox schema`` prints the DDL of: a row class, a ``Tracker``'s seen-records
    table, a ``Ticks``' tick table, a ``Pauses``' pause table, a ``CancelRequests``' table or
    a ``Rates``' rate table."""
    found = load_object(target)
    if isinstance(found, Tracker | Ticks | Pauses | CancelRequests | Rates | LimitRecords):
        return found
    if not (isinstance(found, type) and issubclass(found, Inbox)):
        msg = (
            f"{target} is {found!r}, not a row class, a Tracker, a Ticks, a Pauses, a "
            f"CancelRequests, a Rates or a LimitRecords; name a class derived from Inbox[...], a "
            f"trinbox.outbox.Tracker, a trinbox.schedules.Ticks, a trinbox.Pauses, a "
            f"trinbox.CancelRequests, a trinbox.Rates or a trinbox.LimitRecords"
        )
        raise click.BadParameter(msg)
    return found  # pyright: ignore[reportUnknownVariableType]  (issubclass: Inbox[Unknown, ...])
