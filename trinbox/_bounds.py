"""Every bound on time, in one place, and the two scopes that apply them.

The runtime opens a bound (:func:`within`) around each unit of work that must finish even when
its caller is cancelled: a claim, a settlement, a drop's release, a shutdown hook. The bound's
deadline is passed down to everything below it, so a clean-up several calls deeper (a rollback,
an unlock, a close) shields itself with :func:`cleanup_scope` *within that same deadline*, never
with a timeout of its own: a drop's release is five seconds over all its steps, counted from the
drop. Past the deadline the clean-up gets no time at all, and its caller abandons the connection
(closes the socket; the server then frees its locks).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import TracebackType

import trio

__all__ = [
    "CLAIM",
    "CLAIM_ERROR_WAIT",
    "CLEANUP",
    "CONNECT",
    "EXTEND_ERROR_WAIT",
    "GRACE",
    "HOOK",
    "POOL_WAIT",
    "RELEASE",
    "SETTLE",
    "cleanup_scope",
    "within",
]

RELEASE = 5.0
"""A dropped delivery's release (rollback, lease release, unlock and close), all its steps
together, counted from the drop; deliveries dropped together are released side by side."""

SETTLE = 60.0
"""A settlement that takes longer is given up, and its delivery dropped."""

CLAIM = 60.0
"""A claim's round trips run shielded, so a cancel never cuts one halfway (a lease claim cut
after its stamps committed would leave rows leased that no handler saw); past this, or
:data:`RELEASE` after the subscription began to stop, the claim is given up."""

CLAIM_ERROR_WAIT = 1.0
"""A failed claim waits this long before the next one, whatever the poll interval."""

EXTEND_ERROR_WAIT = 1.0
"""A failed lease extension round is tried again this long after, not a round later."""

POOL_WAIT = 30.0
"""A wait for a pooled connection; past it the acquire fails with ``PoolExhausted``, which
names the pool's size and what holds its connections."""

CLEANUP = 5.0
"""A clean-up outside any bound of the runtime (a publish or a handler's statement cancelled
by its caller): its rollback, kill or close."""

CONNECT = 10.0
"""Opening a connection, the server's greeting and the session set-up included."""

HOOK = 10.0
"""Each shutdown hook."""

GRACE = 10.0
"""The default grace period of in-work handlers at shutdown (``App(grace=...)``)."""

_deadline: ContextVar[float | None] = ContextVar("trinbox_deadline", default=None)


class within:  # used like a function: `with within(SETTLE) as bound:`
    """Shield the block from its caller's cancellation, bounded by ``seconds`` from now (or by
    an enclosing bound's deadline, if that comes first), and pass the deadline down to the
    clean-ups below it. Tasks spawned inside the block inherit the deadline: spawn long-lived
    tasks outside it. A class, not a generator: it runs for every claim and settlement."""

    __slots__ = ("_scope", "_token")

    def __init__(self, seconds: float) -> None:
        deadline = trio.current_time() + seconds
        outer = _deadline.get()
        if outer is not None and outer < deadline:
            deadline = outer
        self._token: Token[float | None] = _deadline.set(deadline)
        self._scope = trio.CancelScope(shield=True, deadline=deadline)

    def __enter__(self) -> trio.CancelScope:
        try:
            return self._scope.__enter__()
        except BaseException:
            _deadline.reset(self._token)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return self._scope.__exit__(kind, exc, tb)
        finally:
            _deadline.reset(self._token)


def cleanup_scope(limit: float = CLEANUP) -> trio.CancelScope:
    """A shield for clean-up after an error or a cancel: within the deadline an enclosing
    :func:`within` passed down, or ``limit`` seconds from now outside any. When that deadline
    has passed, the scope is cancelled at once and the caller falls back to abandoning."""
    deadline = _deadline.get()
    if deadline is None:
        deadline = trio.current_time() + limit
    return trio.CancelScope(shield=True, deadline=deadline)
