"""A service's own background tasks (``app.background(fn)``), run in ``serve``'s nursery.

A background task is an async function taking no arguments, or only ``task_status`` (Trio's
``nursery.start`` protocol: ``serve`` then reports started once the task has). It starts once
every subscription serves and is cancelled once every subscription has stopped, before the
shutdown hooks run and the pools close: handlers finishing in the grace may still use what
the task keeps, and the task never sees a closed pool. An exception it raises after it
started stops the app gracefully, as a handler's under the fail-fast policy does; ``serve``
then raises it, as itself. One raised before it reported started ends ``serve`` as a failed
startup hook does.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

import trio

__all__ = ["BackgroundTask", "TaskFunction", "cancelled_at_exit"]

logger = logging.getLogger("trinbox.app")

TaskFunction = Callable[..., Awaitable[object]]


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """A checked background task: its function, and whether it takes ``task_status``."""

    fn: TaskFunction
    reports_started: bool

    @classmethod
    def of(cls, fn: object) -> BackgroundTask:
        """Check ``fn`` where it is added, or raise ``TypeError`` saying the rule."""
        name = getattr(fn, "__qualname__", repr(fn))
        target: object = fn
        while isinstance(target, functools.partial):
            target = target.func
        if not callable(fn) or not (
            inspect.iscoroutinefunction(target)
            or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004
        ):
            msg = (
                f"a background task is an async function, found {name}; declare it "
                f"`async def` (it runs in serve's nursery)"
            )
            raise TypeError(msg)
        params = inspect.signature(fn).parameters
        required = [
            p.name
            for p in params.values()
            if p.name != "task_status"
            and p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        if required:
            msg = (
                f"a background task takes no arguments (or only task_status), found {name} "
                f"requiring {', '.join(required)}; bind them first, with functools.partial "
                f"or a closure"
            )
            raise TypeError(msg)
        return cls(cast("TaskFunction", fn), "task_status" in params)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    async def run(
        self,
        app_name: str,
        on_crash: Callable[[BaseException], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the task. Before it reported started its exception is raised to the starter
        (``serve``); after, it is logged and handed to ``on_crash``, which stops the app."""
        status = _Status(task_status)
        try:
            if self.reports_started:
                await self.fn(task_status=status)
            else:
                status.started()
                await self.fn()
        except Exception as exc:
            if not status.done:
                raise
            logger.exception("%s: the background task %s raised", app_name, self.name)
            on_crash(exc)
            return
        if not status.done:
            # As nursery.start says of a task that returns without reporting, but by name.
            msg = (
                f"the background task {self.name} takes task_status, so serve waits for its "
                f"task_status.started(), found it returned without calling it; call it once "
                f"the task is ready"
            )
            raise RuntimeError(msg)


class _Status:
    """The starter's task status, noting whether the task has reported started."""

    def __init__(self, inner: trio.TaskStatus[None]) -> None:
        self._inner = inner
        self.done = False

    def started(self, value: None = None) -> None:
        self._inner.started(value)
        self.done = True


@asynccontextmanager
async def cancelled_at_exit() -> AsyncGenerator[trio.Nursery]:
    """A nursery whose tasks are cancelled when the block ends (the block's own nurseries
    have ended by then): where ``serve`` runs the background tasks."""
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        finally:
            nursery.cancel_scope.cancel()
