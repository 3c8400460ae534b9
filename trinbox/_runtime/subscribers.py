"""``Subscriber``: a handler bound to its queue, typed by the handler it keeps.

``Subscriber[Row, Mode, Handler, Needs]``: ``Handler`` is the handler's own type (its
parameters and return), and ``Needs`` what the subscriber asks of a dialect: ``Needs[Row, Form,
Opening, Mode] | None`` for a decorated handler, ``tuple[Row, Mode] | None`` when written with
two arguments (``list[Subscriber[Job, Plain]]``). ``App.include`` has one overload per dialect
that checks it against what the dialect mounts (``tuple[RowOf[Forms, Openings], Modes]``,
_capabilities.py).

``Needs`` is a ``tuple[Row, Mode]`` (what is checked) that also names the row's form and
opening, so that a refused mount says which form the row has: "Needs[Locked, RowLock, Default,
Plain]", against the forms the dialect serves. It is a union on purpose: mypy joins the
subscribers of a list, ``[a, b]``, into one type, and the join of two unions is their union,
where the join of two row classes is ``object``, which no dialect mounts (pyright keeps a
list's items as a union). ``None`` is the member that keeps it a union; every dialect accepts
it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, final

from typing_extensions import TypeVar

from .._declare._markers import Form, Mode, Opening, Plain
from .outcome import HandlerOutcome
from .queue import InboxQueue
from .refusals import DecorateWithSubscriber, Row

__all__ = ["Handler", "Needs", "Result", "Subscriber", "bind"]

Result = HandlerOutcome | Sequence[HandlerOutcome] | None
Handler = Callable[..., Awaitable[Result]]

# Unbounded: mypy joins a list of subscribers of several row classes into Subscriber[object,
# ...] (a join outside a bound would be object itself, which include refuses).
R = TypeVar("R", covariant=True)
M = TypeVar("M", bound=Mode, covariant=True, default=Plain)
H = TypeVar("H", covariant=True, default=Handler)
N = TypeVar("N", covariant=True, default=tuple[R, M] | None)
NR = TypeVar("NR", bound=Row, covariant=True)
NF = TypeVar("NF", bound=Form, covariant=True)
NO = TypeVar("NO", bound=Opening, covariant=True)
NM = TypeVar("NM", bound=Mode, covariant=True)


@final
class Needs(tuple[NR, NM], Generic[NR, NF, NO, NM]):
    """What a subscriber asks of the broker's dialect, as type checkers' messages show it: its
    row class, the row's claim form and opening, and its mode. A type only: nothing is of it."""

    def __new__(cls) -> Needs[Any, Any, Any, Any]:
        msg = (
            "Needs names what a subscriber asks of a dialect, for type checkers; it is never "
            "instantiated"
        )
        raise TypeError(msg)


@final
class Subscriber(Generic[R, M, H, N]):
    """A handler bound to its queue; mount it with ``App.include(broker, subscriber)``.

    Made by decorating the handler, ``@subscriber(InboxQueue(Row, name))``, never directly:
    the decorator is what checks the handler against its queue."""

    queue: InboxQueue[Any, Any, Any]
    handler: H

    def __init__(self, queue: DecorateWithSubscriber, handler: DecorateWithSubscriber) -> None:
        msg = (
            f"a Subscriber is made by decorating its handler, found Subscriber({queue!r}, "
            f"{getattr(handler, '__qualname__', handler)!r}); write "
            f"@subscriber(InboxQueue(Row, name)) above the async def"
        )
        raise TypeError(msg)

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<Subscriber {name} on {self.queue.name!r} of {self.queue.row.__qualname__}>"


def bind(queue: InboxQueue[Any, Any, Any], handler: object) -> Subscriber[Any, Any, Any, Any]:
    """The subscriber of ``handler`` on ``queue`` (what the decorator returns)."""
    _check_handler(handler, queue)
    made: Subscriber[Any, Any, Any, Any] = object.__new__(Subscriber)  # pyright: ignore[reportUnknownVariableType]
    made.queue = queue
    made.handler = handler
    return made


def _check_handler(handler: object, queue: InboxQueue[Any, Any, Any]) -> None:
    """A handler is an ``async def`` (or an object whose ``__call__`` is one): a plain function
    would fail on every delivery, so it is refused where it is bound."""
    name = getattr(handler, "__qualname__", repr(handler))
    if not callable(handler):
        msg = (
            f"a subscriber's handler is an async function, found {handler!r} for queue "
            f"{queue.name!r} of {queue.row.__qualname__}; decorate an `async def`"
        )
        raise TypeError(msg)
    target: object = handler
    while isinstance(target, functools.partial):
        target = target.func
    if not (
        inspect.iscoroutinefunction(target)
        or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004
    ):
        msg = (
            f"a subscriber's handler is an async function, found the plain function {name} "
            f"for queue {queue.name!r} of {queue.row.__qualname__}; declare it `async def`"
        )
        raise TypeError(msg)
