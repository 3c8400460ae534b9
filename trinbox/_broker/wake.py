"""Wake permits: a publish into a (table, group) ends the poll wait of its subscription."""

from __future__ import annotations

from collections import Counter

import trio

__all__ = ["Permit", "WakeBoard"]


class Permit:
    """A one-slot permit: ``set`` stores a wake, ``wait`` takes it (at once if one is stored).
    A wake arriving while the claim runs is kept for the next wait."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


class WakeBoard:
    """One permit per (table, group) a subscription reads; ``None`` group = the whole table (a
    table without groups, or every group of a FIFO table): a wake of any group wakes it."""

    def __init__(self) -> None:
        self._permits: dict[tuple[str, str | None], Permit] = {}
        # Wakes asked for, by (table, group): a batch asks once per group it wrote.
        self.counts: Counter[tuple[str, str | None]] = Counter()

    def permit(self, table: str, group: str | None) -> Permit:
        return self._permits.setdefault((table, group), Permit())

    def wake(self, table: str, group: str | None) -> None:
        """Wake the subscription of that group, or every subscription of the table when the
        group is ``None`` (a group-less table, or a notification without payload)."""
        self.counts[(table, group)] += 1
        for (t, g), permit in self._permits.items():
            if t == table and (group is None or g is None or g == group):
                permit.set()

    def wake_all(self) -> None:
        for permit in self._permits.values():
            permit.set()
