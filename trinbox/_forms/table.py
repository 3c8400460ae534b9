"""The form table: a subscription's claim form and what holds its rows, chosen once at startup
from the table's form and whether its dialect holds locks in server sessions. The only place
that picks; the forms never ask which holder they have."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .._declare._markers import Advisory, Form, Lease, RowLock
from .._drivers._base import ThreadedPool
from .._holders._base import ClaimForm, FormContext, whole_seconds
from .._holders.lease_token import LeaseKeeper, LeaseTokens
from .._holders.process_keys import ProcessKeys
from .._holders.session_lock import SessionLocks
from .advisory import AdvisoryForm
from .lease import LeaseForm
from .rowlock import RowLockForm

__all__ = ["make_form"]


def _lease_tokens(ctx: FormContext) -> ClaimForm:
    ctx.lease = whole_seconds(ctx.lease)  # the lease is written in whole seconds
    tokens = LeaseTokens(ctx.pool)
    return LeaseForm(ctx, tokens, LeaseKeeper(ctx, tokens))


def _claim_transactions(ctx: FormContext) -> ClaimForm:
    return RowLockForm(ctx)


def _session_locks(ctx: FormContext) -> ClaimForm:
    return AdvisoryForm(ctx, SessionLocks(ctx.statements, ctx.spec.label))


def _process_keys(ctx: FormContext) -> ClaimForm:
    pool = ctx.pool
    if not isinstance(pool, ThreadedPool):
        msg = (
            f"{ctx.spec.label}: SQLite's advisory keys are claimed by one call on a "
            f"connection's thread, found a pool without threads ({type(pool).__name__}); "
            f"give the subscription the SQLite driver's pool"
        )
        raise TypeError(msg)
    return AdvisoryForm(ctx, ProcessKeys(pool, ctx))


FORMS: Mapping[tuple[type[Form], bool], Callable[[FormContext], ClaimForm]] = {
    # (the table's form, whether its plan locks keys in server sessions): its form over its
    # holder. A row lock plan counting at claim locks a guard in a session; its rows are
    # still held by the claim's transaction.
    (Lease, False): _lease_tokens,  # a token written by the claim, kept by the lease keeper
    (Lease, True): _lease_tokens,
    (RowLock, False): _claim_transactions,  # the claim's transaction holds the row lock
    (RowLock, True): _claim_transactions,
    (Advisory, True): _session_locks,  # PostgreSQL, MySQL: a lock held by a pooled session
    (Advisory, False): _process_keys,  # SQLite: this process's keys
}
"""Each form and kind of hold, and how to build it."""


def make_form(ctx: FormContext) -> ClaimForm:
    """The claim form of the table, over the holder its dialect offers."""
    return FORMS[ctx.spec.form, ctx.statements.lock is not None](ctx)
