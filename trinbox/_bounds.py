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
    "ANNOUNCE",
    "CLAIM",
    "CLAIM_ERROR_WAIT",
    "CLEANUP",
    "CONNECT",
    "EXTEND_ERROR_WAIT",
    "GRACE",
    "HOOK",
    "ON_TIME",
    "PRUNE_EVERY",
    "RETAIN_EVERY",
    "SCHEDULER_NAP",
    "TICK",
    "TICK_ERROR_WAIT",
    "POOL_WAIT",
    "RELEASE",
    "SETTLE",
    "cleanup_scope",
    "within",
]

RELEASE = 5.0
"""A dropped delivery's release (rollback, lease release, unlock and close), all its steps
together, counted from the drop; deliveries dropped together are released side by side."""

ANNOUNCE = 5.0
"""The settlement notifications still unsent when serving ends: sent within this, else lost
(the waits of other processes then see the rows at their next poll)."""

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

ON_TIME = 60.0
"""How late a tick may be and still fire under ``Missed.skip()`` (a scheduler delayed by its
database, a host clock behind the others)."""

TICK = 30.0
"""A tick's transaction (its mark and its row) runs shielded from the app's shutdown, so a
tick committed is counted; past this it is given up, and rolls back."""

TICK_ERROR_WAIT = 1.0
"""A tick whose transaction failed is tried again this long after."""

PRUNE_EVERY = 600.0
"""A scheduler prunes its old ticks at most this often (Trio's clock)."""

RETAIN_EVERY = 60.0
"""A mount's retention runs a pass this often unless ``.retain(every=...)`` says (Trio's
clock): each kind it prunes, deleted a batch a statement while a statement finds a full
batch."""

SCHEDULER_NAP = 300.0
"""A scheduler waiting for its next tick reads its clock again at least this often (a host
clock stepped by NTP, a suspended machine)."""

_bound: ContextVar[within | None] = ContextVar("trinbox_bound", default=None)


class within:  # used like a function: `with within(SETTLE) as bound:`
    """Shield the block from its caller's cancellation, bounded by ``seconds`` from now (or by
    an enclosing bound's deadline, if that comes first), and pass the bound down to the
    clean-ups below it. Tasks spawned inside the block inherit the bound: spawn long-lived
    tasks outside it. A class, not a generator: it runs for every claim and settlement.

    The bound is live: shortening it (:meth:`shorten`: a claim cut when its subscription
    stops) shortens the clean-ups and bounds open below it, and those opened later read the
    new deadline."""

    __slots__ = ("_below", "_cleanups", "_outer", "_scope", "_token")

    def __init__(self, seconds: float) -> None:
        deadline = trio.current_time() + seconds
        outer = _bound.get()
        if outer is not None and outer.deadline < deadline:
            deadline = outer.deadline
        self._outer = outer
        # The clean-up scopes and inner bounds open below this one (made on first use).
        self._below: list[trio.CancelScope | within] | None = None
        self._scope = trio.CancelScope(shield=True, deadline=deadline)
        self._cleanups = deadline  # the clean-ups' deadline: the block's, unless shortened
        self._token: Token[within | None] = _bound.set(self)

    @property
    def deadline(self) -> float:
        """When the block is cut."""
        return self._scope.deadline

    @property
    def cleanup_deadline(self) -> float:
        """When the clean-ups below the block are cut."""
        return self._cleanups

    def shorten(self, deadline: float, *, release: float = 0.0) -> None:
        """Cut the block at ``deadline`` and the clean-ups below it (running, and opened
        later) at ``deadline + release``, where that is sooner. With ``release``, what the
        block holds when it is cut is released as a drop's is, within that much more."""
        if deadline < self._scope.deadline:
            self._scope.deadline = deadline
        if deadline + release < self._cleanups:
            self._cleanups = deadline + release
        for below in self._below or ():
            if isinstance(below, within):
                below.shorten(deadline, release=release)
            elif self._cleanups < below.deadline:
                below.deadline = self._cleanups

    @property
    def cancelled_caught(self) -> bool:
        """Whether the deadline cut the block."""
        return self._scope.cancelled_caught

    def hold(self, below: trio.CancelScope | within) -> None:
        if self._below is None:
            self._below = []
        self._below.append(below)

    def let_go(self, below: trio.CancelScope | within) -> None:
        if self._below is not None and below in self._below:
            self._below.remove(below)

    def __enter__(self) -> within:
        try:
            self._scope.__enter__()
        except BaseException:
            _bound.reset(self._token)
            raise
        if self._outer is not None:
            self._outer.hold(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return self._scope.__exit__(kind, exc, tb)
        finally:
            if self._outer is not None:
                self._outer.let_go(self)
            _bound.reset(self._token)


class cleanup_scope:  # used like a function: `with cleanup_scope() as scope:`
    """A shield for clean-up after an error or a cancel: within the deadline of the enclosing
    :func:`within` (read as the clean-up opens, and followed if the bound is shortened while
    it runs), or ``limit`` seconds from now outside any. When that deadline has passed, the
    scope is cancelled at once and the caller falls back to abandoning."""

    __slots__ = ("_bound", "_scope")

    def __init__(self, limit: float = CLEANUP) -> None:
        bound = _bound.get()
        deadline = trio.current_time() + limit if bound is None else bound.cleanup_deadline
        self._bound = bound
        self._scope = trio.CancelScope(shield=True, deadline=deadline)

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope.__enter__()
        if self._bound is not None:
            self._bound.hold(scope)
        return scope

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return self._scope.__exit__(kind, exc, tb)
        finally:
            if self._bound is not None:
                self._bound.let_go(self._scope)
