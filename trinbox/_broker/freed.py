"""Freed slots of limited queues (``InboxQueue.limit``), for other processes: a row of a
limited queue that finishes here (settled or released) frees its key's slot, which a claim in
another process, its key at the limit, could take at once instead of at its next poll.

``FreedSlots`` (one per broker) keeps the (table, group) pairs whose rows finished here since
the last announcement, while an announcer runs (``notify.SlotAnnouncer``: one NOTIFY per pair
on the table's own channel, the group as payload, as a publish sends).
"""

from __future__ import annotations

from collections import Counter

import trio

__all__ = ["FreedSlots"]


class FreedSlots:
    """The (table, group) pairs of limited queues whose rows finished here, unannounced."""

    def __init__(self) -> None:
        self._unannounced: set[tuple[str, str]] | None = None  # None: nobody announces
        self._marked = trio.Event()
        self._sent: Counter[tuple[str, str]] = Counter()  # NOTIFYs sent per pair

    def freed(self, table: str, group: str | None) -> None:
        """A row of ``table``'s limited subscription to ``group`` (None: the whole table)
        finished here."""
        if self._unannounced is not None:
            self._unannounced.add((table, group or ""))
            self._marked.set()

    def sent_one(self, table: str, group: str) -> None:
        """A NOTIFY of (``table``, ``group``) went out."""
        self._sent[table, group] += 1

    def sent(self, table: str, group: str | None) -> int:
        """The NOTIFYs of ``table``'s subscription to ``group`` sent so far."""
        return self._sent[table, group or ""]

    def announcing(self, on: bool) -> None:
        """Keep the freed pairs for an announcer (from now on), or stop keeping them."""
        self._unannounced = set() if on else None

    async def unannounced(self) -> list[tuple[str, str]]:
        """The pairs freed since the last take, once there is one."""
        assert self._unannounced is not None, "announcing(True) first"
        while not self._unannounced:
            self._marked = trio.Event()
            await self._marked.wait()
        return self.take_unannounced()

    def take_unannounced(self) -> list[tuple[str, str]]:
        """The pairs freed since the last take, maybe none."""
        pairs = sorted(self._unannounced or ())
        if self._unannounced:
            self._unannounced = set()
        return pairs
