"""The row lock form's count at claim (``InboxQueue.count_attempt_at_claim()``): what its
statements (``build_plan(.., count_at_claim=True)`` in plans.py; ``count_guard`` on
PostgreSQL and MySQL/MariaDB) and the form agree on.

A claim takes the queue's guard (a session lock), selects and locks its rows, counts their
attempt and commits, then locks them again by id in the deliveries' transaction and lets the
guard go. Between the count's commit and the relock the rows are locked by no transaction;
the guard keeps every other counting claim of the queue out of that gap, so it must really be
held: ``lock`` returns 1 when it is, and the form refuses to go on otherwise. (MariaDB reads
``GET_LOCK``'s timeout -1 as an error, returns NULL and takes nothing, where MySQL waits for
ever; a year's timeout means the same on both.)
"""

from __future__ import annotations

__all__ = ["GUARD_TAKEN", "GUARD_WAIT_SECONDS"]

GUARD_TAKEN = 1
"""What ``lock`` returns when the guard is held (``GET_LOCK`` says 0 on timeout, NULL on error)."""

GUARD_WAIT_SECONDS = 365 * 24 * 3600
"""GET_LOCK's longest wait: MariaDB refuses a negative timeout (no lock, NULL)."""
