"""What holds each connection of a pool, and the bounded wait for a free one.

Every acquire names its holder with a short label ("claim", "settlement", "lease keeper",
"publish", ...). A wait for a connection that lasts :data:`~trinbox._bounds.POOL_WAIT` raises
``PoolExhausted`` with the pool's size and how many connections each holder has: an exhausted
pool is an error that says why, never a silent wait.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Collection

import trio

from .._bounds import POOL_WAIT
from ..errors import PoolExhausted

__all__ = ["Holders"]


class Holders:
    """The holder of each connection a pool has handed out, by the connection."""

    __slots__ = ("_by_conn", "_identity", "_max_size")

    def __init__(self, identity: str, max_size: int) -> None:
        self._identity = identity
        self._max_size = max_size
        # Weak: a connection closed and dropped is forgotten (nothing to do on release; a
        # connection back in the pool keeps its last holder until its next one, unread).
        self._by_conn: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    def took(self, conn: object, holder: str) -> None:
        """``conn`` left the pool with ``holder``."""
        self._by_conn[conn] = holder

    def held(self, out: Collection[object]) -> Counter[str]:
        """How many of the connections handed out each holder has."""
        return Counter(self._by_conn.get(conn, "caller") for conn in out)

    async def wait(self, slots: trio.Semaphore, holder: str, out: Collection[object]) -> None:
        """Take one of ``slots`` for ``holder``, waiting ``POOL_WAIT`` at most."""
        with trio.move_on_after(POOL_WAIT):
            await slots.acquire()
            return
        raise PoolExhausted(self._exhausted(holder, out, slots.value), statement="acquire")

    def _exhausted(self, holder: str, out: Collection[object], free: int) -> str:
        held = self.held(out)
        connecting = self._max_size - free - len(out)
        if connecting > 0:
            held["connecting"] += connecting
        found = ", ".join(f"{n} by {label}" for label, n in sorted(held.items(), key=_most))
        return (
            f"the {holder} waited {POOL_WAIT:g} s for a connection of the {self._identity} "
            f"pool, the most it waits, and found all {self._max_size} of its connections held "
            f"all that time ({found or 'none handed out'}); give the broker a larger "
            f"pool_size, lower the workers(n) of subscriptions whose deliveries hold a "
            f"connection each, or give connections back sooner (a handler's keys.Pool block, "
            f"a transaction)"
        )


def _most(item: tuple[str, int]) -> tuple[int, str]:
    label, n = item
    return -n, label
