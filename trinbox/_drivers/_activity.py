"""How many database calls are in flight in this process: a test clock that jumps virtual
time must not jump while the database is working (``trinbox.testing.VirtualClock``)."""

from __future__ import annotations

__all__ = ["calls_in_flight", "database_call"]

_in_flight = 0


def calls_in_flight() -> int:
    return _in_flight


class database_call:  # used like a function: `with database_call():`
    """Counts one call for the length of the block."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _in_flight
        _in_flight += 1

    def __exit__(self, *exc: object) -> None:
        global _in_flight
        _in_flight -= 1
