"""Routes: which table a message name leads to, and the follow-up messages a handler sends by
name.

``broker.route(Row, "orders.created")`` leads publishes of that name into ``Row``'s table, the
name written into its ``Group`` field; ``broker.route(Row, "orders.*")`` leads every name with
the prefix ``orders.``. Finding a name's route is a lookup, never a query: an exact route
beats a prefix, the longer prefix beats the shorter, and a name or prefix routed twice takes
the last route. A ``Route`` also names its messages' type (``Route[OrderCreated]``) where it
was given one, so that type checkers check what is published or replied through it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar, cast, final

from .._declare._inbox import Inbox, spec_of
from .._declare._spec import TableSpec
from ..errors import DeclarationError, NoRoute

__all__ = ["Reply", "Route", "Routes", "check_name"]

logger = logging.getLogger("trinbox.publish")

# Invariant: a Route[OrderCreated] passed where a message goes beside it pins the message's
# type (a covariant one would be solved to object, and take any message).
T = TypeVar("T")


def check_name(name: object, *, what: str) -> str:
    """A message name: a non-empty ``str`` without ``*`` (a pattern's wildcard)."""
    if not isinstance(name, str) or not name or "*" in name:
        msg = (
            f"{what} is a message name, a non-empty str without '*', found {name!r}; pass "
            f"the name a route leads, like 'orders.created'"
        )
        raise DeclarationError(msg)
    return name


@final
@dataclass(frozen=True, slots=True, eq=False)
class Route(Generic[T]):
    """Where publishes of a name, or of every name with a prefix (``"orders.*"``), go: into
    ``row``'s table, the name into its ``Group`` field. Made by ``broker.route(..)``.

    An exact route also stands for its name: ``broker.publish_named(route, message)``,
    ``HandlerOutcome.ack().reply(route, message)`` and ``out.publish(route, message)`` take it
    where they take a name, and type checkers check the message against ``message``."""

    row: type[Inbox[Any, Any]]
    pattern: str
    message: type[T]

    @property
    def prefix(self) -> str | None:
        """The prefix a ``"prefix*"`` route leads (``""`` for ``"*"``); ``None`` for an exact
        route."""
        return self.pattern[:-1] if self.pattern.endswith("*") else None

    @property
    def name(self) -> str:
        """The name an exact route leads; a prefix route names no single message."""
        if self.prefix is not None:
            msg = (
                f"a prefix route leads many names and publishes none by itself, found "
                f"{self!r} where a name goes; pass the name, like "
                f"{self.prefix + 'created'!r}"
            )
            raise DeclarationError(msg)
        return self.pattern

    @property
    def spec(self) -> TableSpec:
        return spec_of(self.row)

    def covers(self, name: str) -> bool:
        """Whether this route's pattern takes ``name`` (not whether it wins: ``Routes.find``)."""
        prefix = self.prefix
        return name == self.pattern if prefix is None else name.startswith(prefix)

    def __repr__(self) -> str:
        message = getattr(self.message, "__qualname__", repr(self.message))
        return f"<Route {self.pattern!r} into {self.row.__qualname__} of {message}>"


def make_route(row: object, pattern: object, message: object, *, where: str) -> Route[Any]:
    """A route checked: a payload row class, a pattern with at most one ``*``, at its end, and
    a message type."""
    spec = spec_of(cast("type[Any]", row))  # a clear error for anything but a row class
    if not isinstance(row, type):
        msg = (
            f"{where}: a route leads names into a row class's table, found the instance "
            f"{row!r}; pass its class, {type(row).__qualname__}"
        )
        raise DeclarationError(msg)
    if not isinstance(pattern, str) or not pattern or "*" in pattern[:-1]:
        msg = (
            f"{where}: a route's pattern is a name ('orders.created') or a prefix ending in "
            f"one '*' ('orders.*', or '*' for every name), found {pattern!r}; pass one of them"
        )
        raise DeclarationError(msg)
    if spec.payload is None:
        msg = (
            f"{where}: {spec.label} lends no payload, so no column holds a message's bytes; "
            f"route a table with a Payload field, or publish this table's rows with "
            f"broker.publish({row.__qualname__}, field=...)"
        )
        raise DeclarationError(msg)
    if not isinstance(message, type) and not hasattr(message, "__origin__"):
        msg = (
            f"{where}: a route's message is the type of the messages it leads, found "
            f"{message!r}; pass a class (a dataclass, a msgspec Struct, a pydantic model, a "
            f"TypedDict), or leave it out"
        )
        raise DeclarationError(msg)
    return Route(row, pattern, message)  # type: ignore[arg-type]


class Routes:
    """A broker's routes: a name's route is found by lookup (an exact route, else the longest
    prefix that takes it), with no query and no I/O."""

    def __init__(self) -> None:
        self._exact: dict[str, Route[Any]] = {}
        self._prefixes: dict[str, Route[Any]] = {}
        self._longest_first: list[Route[Any]] = []
        self._order: dict[str, Route[Any]] = {}  # every route by pattern, in the order added

    def add(self, route: Route[Any]) -> None:
        """Add ``route``; one of the same pattern before it is replaced (the last route
        wins)."""
        prefix = route.prefix
        if prefix is None:
            self._exact[route.pattern] = route
        else:
            self._prefixes[prefix] = route
            self._longest_first = sorted(
                self._prefixes.values(), key=lambda r: len(r.pattern), reverse=True
            )
        self._order.pop(route.pattern, None)
        self._order[route.pattern] = route

    def find(self, name: str) -> Route[Any] | None:
        """The route ``name`` takes, or ``None``."""
        exact = self._exact.get(name)
        if exact is not None:
            return exact
        for route in self._longest_first:
            if name.startswith(route.pattern[:-1]):
                return route
        return None

    def lead(self, to: str | Route[Any], *, where: str) -> tuple[str, Route[Any]]:
        """The name ``to`` names and the route it takes, or ``NoRoute`` (logged as a
        warning too: a publish that goes nowhere is a bug to see in the logs)."""
        name = to.name if isinstance(to, Route) else check_name(to, what=f"{where}: the name")
        route = self.find(name)
        if route is None:
            routed = ", ".join(repr(p) for p in self._order) or "none"
            msg = (
                f"{where}: no route leads the name {name!r} to a table (routed: {routed}); add "
                f".route(Row, {name!r}) to the broker, or a prefix route like "
                f".route(Row, {_prefix_of(name)!r})"
            )
            logger.warning("%s", msg)
            raise NoRoute(msg, name=name)
        return name, route

    def into(self, spec: TableSpec) -> list[Route[Any]]:
        """The routes that lead into ``spec``'s table, in the order they were added."""
        return [r for r in self._order.values() if r.spec.qualified_name == spec.qualified_name]

    def __iter__(self) -> Iterator[Route[Any]]:
        return iter(list(self._order.values()))

    def __len__(self) -> int:
        return len(self._order)


def _prefix_of(name: str) -> str:
    head, dot, _ = name.rpartition(".")
    return f"{head}{dot}*" if dot else "*"


@final
@dataclass(frozen=True, slots=True)
class Reply:
    """A follow-up message a handler sends by name: written when its delivery is acked (in
    the delivery's transaction on a transactional mount), where the routes lead ``to``."""

    to: str | Route[Any]
    message: object
    delay: timedelta | None = None
    columns: Mapping[str, object] = field(default_factory=dict[str, object])

    def __post_init__(self) -> None:
        # A bad name is refused where the reply is made, not when its delivery settles.
        if isinstance(self.to, Route):
            self.to.name  # noqa: B018  (a prefix route names no message: raises)
        else:
            check_name(self.to, what="a reply's name")

    @property
    def name(self) -> str:
        return self.to.name if isinstance(self.to, Route) else self.to
