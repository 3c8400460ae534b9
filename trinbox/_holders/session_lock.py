"""The server session lock: what holds an advisory row on PostgreSQL and MySQL, a lock on its
key held by one pooled session (``pg_try_advisory_lock``, ``GET_LOCK``) from the claim to the
settlement, with no transaction open.

The lock is tried without waiting, and the row taken, in one round trip; the unlock must be
confirmed, else the session is closed (never given back), so that the server ends it and frees
its locks. The form owns the sessions' comings and goings; this owns the lock's statements.
"""

from __future__ import annotations

import logging

from .._bounds import cleanup_scope
from .._dialects.plans import Plan
from .._drivers._base import Connection, Op, Result, stops

__all__ = ["SessionLocks"]

logger = logging.getLogger("trinbox.settle")


class SessionLocks:
    """The session locks of one advisory subscription's keys."""

    __slots__ = ("_label", "_lock", "_unlock")

    def __init__(self, plan: Plan, label: str) -> None:
        assert plan.lock is not None and plan.unlock is not None
        self._lock = plan.lock
        self._unlock = plan.unlock
        self._label = label

    def unlock_op(self, key: str) -> Op:
        """The unlock, as a step of a script (a settlement's round trip ends with it)."""
        return Op("fetch", self._unlock.sql, self._unlock.bind({"key": key}))

    async def lock_and_take(
        self, session: Connection, key: str, take: list[Op]
    ) -> list[Result] | None:
        """Lock ``key`` on ``session`` without waiting and, if it was taken, run ``take``, in
        one round trip: the take's results, or ``None`` when another session holds the key."""
        lock = Op("fetch", self._lock.sql, self._lock.bind({"key": key}))
        results = await session.script([lock, *take], until_empty=True)
        if stops(results[0]):
            return None
        return results[1:]

    async def unlock(self, conn: Connection, key: str, *, held: bool) -> bool:
        """Whether the session confirmed the unlock (within the bound around it); ``held``:
        the key was this session's, so an unconfirmed unlock is worth a warning."""
        with cleanup_scope():
            try:
                rows = await conn.fetch(self._unlock.sql, self._unlock.bind({"key": key}))
                if rows and rows[0][0]:
                    return True
            except Exception:
                logger.warning("unlocking %r failed", key, exc_info=True)
                return False
        if held:
            logger.warning(
                "%s: the unlock of %r was not confirmed; closing its session", self._label, key
            )
        return False
