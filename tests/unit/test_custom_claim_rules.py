"""What ``InboxQueue.custom_claim`` refuses at declaration: the advisory form, a FIFO group (so
``.every_group()`` too), ``.count_attempt_at_claim()`` (either order), and what is not a function;
each message names the rule, what was found and the fix."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import pytest

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RowLock,
)
from trinbox.errors import DeclarationError
from trinbox.typing import Held


class Job(Inbox[RowLock], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


class LeasedJob(Inbox[Lease], table="leased_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class KeyedJob(Inbox[Advisory], table="keyed_jobs", advisory_lock="k-{id}"):
    id: Annotated[int, Id(generated=True)]
    payload: Annotated[bytes, Payload()]


class FifoJob(Inbox[Lease], table="fifo_jobs"):
    id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group(fifo=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def claim(conn: Held, group: str | None, limit: int) -> list[int]:
    return []


async def fetch(conn: Held, ids: list[int]) -> list[tuple[object, ...]]:
    return []


RULE = (
    ".custom_claim() claims rows of a row lock or lease table by the queue's own function, found "
)


def refused(label: str, found: str) -> str:
    return "^" + re.escape(f"{label}: {RULE}{found}") + "$"


def test_row_lock_and_lease_queues_take_a_custom_claim() -> None:
    for queue in (InboxQueue(Job, "jobs"), InboxQueue(LeasedJob, "jobs")):
        custom = queue.custom_claim(claim, fetch=fetch).custom
        assert custom is not None
        assert (custom.claim, custom.fetch) == (claim, fetch)
    assert InboxQueue(Job, "jobs").custom is None


def test_the_advisory_form_refuses_a_custom_claim() -> None:
    found = (
        "an Inbox[Advisory] table; the advisory form takes each candidate under its key's "
        "lock, so declare Inbox[RowLock] or Inbox[Lease]"
    )
    with pytest.raises(DeclarationError, match=refused("keyed_jobs (KeyedJob)", found)):
        InboxQueue(KeyedJob, "jobs").custom_claim(claim)


def test_a_fifo_group_refuses_a_custom_claim() -> None:
    found = (
        "Group(fifo=True); a FIFO group's claim is its guard's, so drop fifo=True or the "
        "custom claim"
    )
    with pytest.raises(DeclarationError, match=refused("fifo_jobs (FifoJob)", found)):
        InboxQueue(FifoJob, "g").custom_claim(claim)


def test_the_count_at_claim_and_a_custom_claim_refuse_each_other() -> None:
    label = "jobs (Job)"
    found = ".count_attempt_at_claim(); drop it or the custom claim"
    with pytest.raises(DeclarationError, match=refused(label, found)):
        InboxQueue(Job, "jobs").count_attempt_at_claim().custom_claim(claim)
    with pytest.raises(DeclarationError, match=refused(label, found)):
        InboxQueue(Job, "jobs").custom_claim(claim).count_attempt_at_claim()


def test_a_custom_claim_takes_functions() -> None:
    not_a_function: Any = "SELECT id FROM jobs"
    message = (
        "^"
        + re.escape(
            "jobs (Job): .custom_claim() takes async functions, found claim='SELECT id FROM "
            "jobs'; pass the function itself"
        )
        + "$"
    )
    with pytest.raises(DeclarationError, match=message):
        InboxQueue(Job, "jobs").custom_claim(not_a_function)
