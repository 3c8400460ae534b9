"""The pauses a broker's subscriptions obey, as the process last read them from the pause
table (``trinbox.Pauses``): one set of (table, group) keys, where the group ``WHOLE`` pauses
every subscription of the table. Each subscription holds a gate of the board: its claim loop
reads the gate's flag before a claim (a test of a bool, never a statement of the claim) and
waits on it while it is shut.

What fills the board is the pause watcher of ``App.serve`` (``_engine/pauses.py``), once per
poll interval (at once on a NOTIFY), and ``broker.pause``/``resume`` of this process the
moment their statement commits.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio

from .._dialects.pauses import WHOLE

__all__ = ["PauseBoard", "PauseGate", "paused_by"]

Key = tuple[str, str]
"""A pause: the table's qualified name and the group (``WHOLE``: the table)."""


def paused_by(keys: frozenset[Key], table: str, group: str | None) -> bool:
    """Whether the subscription of ``group`` of ``table`` (``None``: the whole table, or
    every group of it) is paused: by the table's pause, or by its own group's. A subscription
    over every group of a table is paused by the table's pause only."""
    return (table, WHOLE) in keys or (group is not None and (table, group) in keys)


class PauseGate:
    """One subscription's view of the board: ``paused``, and a wait for its end."""

    def __init__(self, table: str, group: str | None, paused: bool) -> None:
        self.table = table
        self.group = group
        self.paused = paused
        self._resumed = trio.Event()

    def set(self, paused: bool) -> None:
        if paused == self.paused:
            return
        self.paused = paused
        if paused:
            self._resumed = trio.Event()
        else:
            self._resumed.set()

    async def wait_resumed(self) -> None:
        while self.paused:
            await self._resumed.wait()


class PauseBoard:
    """The pauses this process knows of, and the gates of its subscriptions."""

    def __init__(self) -> None:
        self.keys: frozenset[Key] = frozenset()
        self._gates: list[PauseGate] = []
        self.reads = 0  # reads of the pause table (the watcher's), for statistics
        # Bumped by each pause or resume of this process: a read that began before one
        # committed is stale, and must not undo it.
        self.writes = 0
        self.read_failures = 0
        self._poked = trio.Event()
        self._read = trio.Event()

    def gate(self, table: str, group: str | None) -> PauseGate:
        gate = PauseGate(table, group, paused_by(self.keys, table, group))
        self._gates.append(gate)
        return gate

    def forget_gates(self) -> None:
        """Serving ended: the next serve makes its subscriptions' gates again."""
        self._gates.clear()

    def paused(self, table: str, group: str | None) -> bool:
        return paused_by(self.keys, table, group)

    def read(self, keys: Iterable[Key], *, writes: int) -> None:
        """The pauses as a read found them, the read begun when ``writes`` was the count of
        this process's own pauses and resumes; a read older than one of them is dropped (the
        next read sees it)."""
        self.reads += 1
        if writes == self.writes:
            self._set(frozenset(keys))
        self._read.set()
        self._read = trio.Event()

    async def wait_read(self) -> None:
        """Wait for the watcher's next read of the pause table (tests, ``trinbox inspect``)."""
        await self._read.wait()

    def add(self, key: Key) -> None:
        self.writes += 1
        self._set(self.keys | {key})

    def discard(self, key: Key) -> None:
        self.writes += 1
        self._set(self.keys - {key})

    def _set(self, keys: frozenset[Key]) -> None:
        """Every gate shut or opened to match (an opened one's claim loop claims at once)."""
        self.keys = keys
        for gate in self._gates:
            gate.set(paused_by(keys, gate.table, gate.group))

    def poke(self) -> None:
        """A NOTIFY said the pause table changed: the watcher reads it now."""
        self._poked.set()

    async def wait_poked(self) -> None:
        await self._poked.wait()
        self._poked = trio.Event()
