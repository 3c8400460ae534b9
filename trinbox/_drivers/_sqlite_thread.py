"""A SQLite connection's own worker thread, fed by a queue.

Every call on a connection runs on a thread (``sqlite3`` blocks). Trio's ``to_thread`` takes a
thread from its cache per call, through a capacity limiter, a copied context, a job record and
the thread's name set again each time; a SQLite advisory delivery is one call, so that is paid
for every row. A thread of the connection's own, fed by a queue, runs the calls in the order
they came, and reports each back to Trio once (``run_sync_soon``) as ``to_thread`` does.

:func:`run_on` waits for a call like ``to_thread.run_sync(..., abandon_on_cancel=True)``: a
cancel ends the wait at once, and the call's own guard (``SqliteConnection._call``) decides
whether it had begun. It hands back the call's outcome, so whatever it raises itself ended
the wait (a cancel, a ``KeyboardInterrupt``), never the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

import outcome
import trio

__all__ = ["ConnectionThread", "run_on"]

T = TypeVar("T")


class ConnectionThread:
    """A daemon thread running the jobs put on it one at a time, until :meth:`stop`."""

    __slots__ = ("_jobs", "_thread")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="trinbox-sqlite", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            job()
            del job  # holds the call (and its connection) until the next one otherwise

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def stop(self) -> None:
        """The thread ends after the jobs already queued."""
        self._jobs.put(None)


async def run_on(thread: ConnectionThread, fn: Callable[[], T]) -> outcome.Outcome[T]:
    """Run ``fn`` on ``thread``; its outcome (its result, or the error it raised). A
    checkpoint: a cancel before it starts raises at once; one while it runs ends the wait
    (``fn`` goes on, its outcome is dropped). Jobs run in the order they came: one put on the
    thread after a call cut this way ends after it."""
    await trio.lowlevel.checkpoint_if_cancelled()
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()
    aborted = False  # read and written on the Trio thread only

    def report(result: outcome.Outcome[T]) -> None:  # on the Trio thread
        if not aborted:
            trio.lowlevel.reschedule(task, outcome.Value(result))

    def job() -> None:  # on the connection's thread
        result = outcome.capture(fn)
        try:
            token.run_sync_soon(report, result)
        except trio.RunFinishedError:
            pass  # Trio ended meanwhile: nobody waits for it

    def abort(_: object) -> trio.lowlevel.Abort:
        nonlocal aborted
        aborted = True
        return trio.lowlevel.Abort.SUCCEEDED

    thread.submit(job)
    result: outcome.Outcome[T] = await trio.lowlevel.wait_task_rescheduled(abort)
    return result
