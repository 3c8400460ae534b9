"""Which groups a claim reads, by name: every group, or the groups named and those whose name
starts with a prefix (``"orders.*"``), as a relay serves an outbox's records by their name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from ..errors import DeclarationError
from ._spec import check_name

__all__ = ["GroupNames", "group_names"]


@dataclass(frozen=True, slots=True)
class GroupNames:
    """The groups a claim reads: those in ``exact`` and those starting with one of
    ``prefixes``, or every group when both are empty; never those in ``skip`` (a dead letter
    group, a group of the same table)."""

    exact: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    @property
    def every(self) -> bool:
        return not self.exact and not self.prefixes

    def without(self, group: str) -> GroupNames:
        """The same groups but ``group``."""
        return replace(self, skip=(*self.skip, group))

    @property
    def written(self) -> tuple[str, ...]:
        """The names as a relay's ``names=`` writes them (``("*",)``: every name), for the
        AsyncAPI document."""
        if self.every:
            return ("*",)
        return (*self.exact, *(prefix + "*" for prefix in self.prefixes))


def group_names(where: str, names: Sequence[str] | None) -> GroupNames:
    """``names`` read: ``None`` (or a ``"*"`` among them) is every group; a name ending in
    ``*`` is a prefix, any other a group's whole name. ``DeclarationError`` for anything else
    (a string in place of a list, no name at all, a ``*`` before the end)."""
    if names is None:
        return GroupNames()
    given: object = names  # untyped callers pass anything
    if isinstance(given, str) or not isinstance(given, Sequence):
        shown = f"the string {given!r}" if isinstance(given, str) else repr(given)
        example = given if isinstance(given, str) else "orders.*"
        msg = f"{where}: names= takes a list of names, found {shown}; write names=[{example!r}]"
        raise DeclarationError(msg)
    if not names:
        msg = (
            f"{where}: names= lists the names served, found an empty list; name one, or "
            f"leave names= out to serve every name"
        )
        raise DeclarationError(msg)
    exact: list[str] = []
    prefixes: list[str] = []
    for name in cast("Sequence[object]", names):
        if not isinstance(name, str) or not name:
            msg = (
                f"{where}: a name is a non-empty str, found {name!r} in names=; write the "
                f"name, or a prefix ending in * (like 'orders.*')"
            )
            raise DeclarationError(msg)
        check_name(where, "name", name)
        head = name[:-1] if name.endswith("*") else name
        if "*" in head:
            msg = (
                f"{where}: a * ends a prefix (every name starting with what comes before it), "
                f"found one inside {name!r}; write a whole name, or a prefix like "
                f"{head.split('*', 1)[0] + '*'!r}"
            )
            raise DeclarationError(msg)
        if name == "*":
            return GroupNames()
        target = prefixes if name.endswith("*") else exact
        if head not in target:
            target.append(head)
    return GroupNames(tuple(exact), tuple(prefixes))
