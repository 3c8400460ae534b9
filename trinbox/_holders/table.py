"""The holder table: what holds a claimed row, chosen once per subscription at startup from its
form and what its dialect and pool offer. The only place that picks."""

from __future__ import annotations

from ._base import FormContext
from .advisory_hold import AdvisoryHold
from .session_lock import SessionLocks
from .sqlite_key import ProcessKeys

__all__ = ["advisory_holder"]


def advisory_holder(ctx: FormContext) -> AdvisoryHold:
    """What holds an advisory row's key: a server session's lock where the dialect has one
    (the plan's lock and unlock), else this process's keys (SQLite)."""
    if ctx.statements.lock is not None:
        return SessionLocks(ctx.statements, ctx.spec.label)
    return ProcessKeys(ctx.pool)
