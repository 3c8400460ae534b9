"""What a handler decides for its delivery, and what happens when it raises."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any, TypeVar, final, overload

from .routes import Reply, Route

__all__ = ["FailurePolicy", "HandlerOutcome", "OnFailure"]

T = TypeVar("T")


@final
@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    """A handler's decision: ``ack()``, ``retry()``, ``retry_after(delay)``,
    ``snooze(delay)`` or ``drop()``; an ack may carry a result for the row's Result field,
    ``ack(result)``, and follow-up messages, ``ack().reply(name, message)``.

    Returning ``None`` from a handler is ``ack()``.
    """

    kind: str
    delay: timedelta | None = None
    replies: tuple[Reply, ...] = ()
    result: object = None

    def __post_init__(self) -> None:
        # Outcomes are made by the class methods; one made by hand is checked as strictly.
        if self.kind not in _KINDS:
            msg = (
                f"an outcome is ack, retry, retry_after, snooze or drop, found {self.kind!r}; "
                f"use HandlerOutcome.ack(), .retry(), .retry_after(delay), .snooze(delay) or "
                f".drop()"
            )
            raise ValueError(msg)
        if (self.kind in _DELAYED) != isinstance(self.delay, timedelta):
            msg = (
                f"only retry_after and snooze carry a delay (a timedelta), found kind "
                f"{self.kind!r} with delay {self.delay!r}; use HandlerOutcome.retry_after(delay) "
                f"or HandlerOutcome.snooze(delay)"
            )
            raise ValueError(msg)
        if self.result is not None and self.kind != "ack":
            msg = (
                f"a result is written with the ack, found one on a {self.kind} outcome; "
                f"return HandlerOutcome.ack(result)"
            )
            raise ValueError(msg)
        if self.replies and self.kind != "ack":
            msg = (
                f"follow-up messages are written with the ack, found {len(self.replies)} on a "
                f"{self.kind} outcome; reply from HandlerOutcome.ack()"
            )
            raise ValueError(msg)

    @classmethod
    def ack(cls, result: object = None) -> HandlerOutcome:
        """Acknowledge: the row is deleted, or marked processed. ``result`` is written into
        the row's Result field in the same statement, in the broker's codec (``None``: JSON
        ``null``), for ``broker.wait(Row, id)`` to read."""
        return cls("ack", result=result)

    @classmethod
    def retry(cls) -> HandlerOutcome:
        """Return the row to its queue at once (or dead-letter it once its attempts are spent)."""
        return cls("retry")

    @classmethod
    def retry_after(cls, delay: timedelta) -> HandlerOutcome:
        """Return the row, claimable again no sooner than ``delay`` from now."""
        return cls("retry_after", _delay("a retry delay", delay))

    @classmethod
    def snooze(cls, delay: timedelta) -> HandlerOutcome:
        """Put the row back, claimable again no sooner than ``delay`` from now, without
        spending an attempt: nothing failed, the row is not due yet (a poll of something that
        is not ready). It never moves the row to its dead letter. Needs the table's RetryAfter
        field (a row that cannot wait would come back at once, in a loop)."""
        return cls("snooze", _delay("a snooze delay", delay))

    @classmethod
    def drop(cls) -> HandlerOutcome:
        """Finish the row without success; it never returns (same SQL as ack)."""
        return cls("drop")

    @overload
    def reply(
        self, to: Route[T], message: T, *, delay: timedelta | None = None, **columns: object
    ) -> HandlerOutcome: ...
    @overload
    def reply(
        self, to: str, message: object, *, delay: timedelta | None = None, **columns: object
    ) -> HandlerOutcome: ...
    def reply(
        self,
        to: str | Route[Any],
        message: object,
        *,
        delay: timedelta | None = None,
        **columns: object,
    ) -> HandlerOutcome:
        """This ack, with ``message`` sent to ``to`` (a name, or an exact route) as a
        follow-up: written when the ack settles (in the delivery's transaction on a
        transactional mount, so it commits with the ack and never without it), where the
        broker's routes lead the name. Chain it for several; ``columns`` give the row's other
        fields, ``delay`` makes it due later."""
        if self.kind != "ack":
            msg = (
                f"follow-up messages are written with the ack, found {self.kind}()"
                f".reply({to!r}, ..); reply from HandlerOutcome.ack()"
            )
            raise ValueError(msg)
        reply = Reply(to, message, delay, columns)
        return HandlerOutcome(self.kind, self.delay, (*self.replies, reply), self.result)

    @property
    def is_ack(self) -> bool:
        return self.kind == "ack"

    @property
    def is_retry(self) -> bool:
        return self.kind in ("retry", "retry_after")

    @property
    def is_drop(self) -> bool:
        return self.kind == "drop"

    @property
    def is_snooze(self) -> bool:
        return self.kind == "snooze"


_KINDS = ("ack", "retry", "retry_after", "snooze", "drop")
_DELAYED = ("retry_after", "snooze")


def _delay(what: str, delay: timedelta) -> timedelta:
    if not isinstance(delay, timedelta):
        msg = f"{what} is a timedelta, found {delay!r}; pass e.g. timedelta(seconds=5)"
        raise TypeError(msg)
    if delay < timedelta(0):
        msg = f"{what} is zero or more, found {delay}; pass a non-negative timedelta"
        raise ValueError(msg)
    return delay


class FailurePolicy(Enum):
    """What a handler exception or an undecodable row becomes."""

    FAIL_FAST = "fail_fast"  # log, drop the delivery (its row returns), shut the app down
    DROP = "drop"  # finish the row
    RETRY = "retry"  # return the row (counts toward max_attempts)
    SKIP = "skip"  # acknowledge the row


@final
@dataclass(frozen=True, slots=True)
class OnFailure:
    """Per subscription: ``handler`` for exceptions a handler raises (default: retry, so the
    row counts toward ``max_attempts``), ``decode`` for rows whose payload or columns do not
    decode (default: drop, as the reference does)."""

    handler: FailurePolicy = FailurePolicy.RETRY
    decode: FailurePolicy = FailurePolicy.DROP
    # With RETRY: the same delay after every failure (Backoff.constant); the queue's or the
    # mount's backoff wins when set.
    retry_delay: timedelta | None = None
