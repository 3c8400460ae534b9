"""The holder table: what holds a claimed row, chosen once per subscription at startup from its
form and what its dialect and pool offer. The only place that picks."""

from __future__ import annotations

from .._dialects.plans import Plan
from .._drivers._base import Pool
from .sqlite_key import ProcessKeys

__all__ = ["advisory_keys"]


def advisory_keys(statements: Plan, pool: Pool) -> ProcessKeys | None:
    """What holds an advisory row's key: a server session (``None``, the dialect has a lock
    statement), or this process's keys (SQLite)."""
    if statements.lock is not None:
        return None
    return ProcessKeys(pool)
