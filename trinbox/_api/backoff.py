"""How long a failed delivery waits before its row is claimable again.

A handler that raises, or returns something that is not an outcome, is retried after a
backoff, never at once: a broken handler must not turn into a loop that redelivers the same
row hundreds of times a second. The delay grows with the row's attempt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, final

__all__ = ["DEFAULT_BACKOFF", "RETRY_AFTER_FIELD", "Backoff", "require_backoff"]

# What a table adds to hold its failed rows back (the fix the messages name).
RETRY_AFTER_FIELD = "retry_after: Annotated[datetime, RetryAfter()]"


@final
@dataclass(frozen=True, slots=True)
class Backoff:
    """A backoff policy: ``Backoff.exponential(..)`` (the default), ``Backoff.linear(..)``,
    ``Backoff.constant(..)`` or ``Backoff.none()``. Set it per queue
    (``InboxQueue(..).backoff(..)``) or per mount (``app.include(..).backoff(..)``)."""

    kind: Literal["exponential", "linear", "constant", "none"]
    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(minutes=5)
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.base < timedelta(0) or self.cap < timedelta(0):
            msg = (
                f"a backoff waits zero or more, found base={self.base} cap={self.cap}; "
                f"pass non-negative durations"
            )
            raise ValueError(msg)
        if not 0.0 <= self.jitter <= 1.0:
            msg = (
                f"a backoff's jitter is a fraction of the delay from 0 to 1, found "
                f"{self.jitter}; pass e.g. 0.5"
            )
            raise ValueError(msg)

    @classmethod
    def exponential(
        cls,
        base: timedelta | float = 1.0,
        *,
        cap: timedelta | float = 300.0,
        jitter: float = 0.5,
    ) -> Backoff:
        """``base * 2 ** (attempt - 1)``, at most ``cap``; ``jitter`` takes up to that fraction
        off at random, so rows that failed together do not return together."""
        return cls("exponential", _duration(base), _duration(cap), jitter)

    @classmethod
    def linear(
        cls, step: timedelta | float = 1.0, *, cap: timedelta | float = 300.0, jitter: float = 0.0
    ) -> Backoff:
        """``step * attempt``, at most ``cap``."""
        return cls("linear", _duration(step), _duration(cap), jitter)

    @classmethod
    def constant(cls, delay: timedelta | float, *, jitter: float = 0.0) -> Backoff:
        """The same ``delay`` after every failure."""
        delay = _duration(delay)
        return cls("constant", delay, delay, jitter)

    @classmethod
    def none(cls) -> Backoff:
        """Retry at once (a failing handler then redelivers its row as fast as it fails)."""
        return cls("none", timedelta(0), timedelta(0))

    @property
    def waits(self) -> bool:
        """Whether any failure waits (``Backoff.none()`` and zero durations do not)."""
        return self.base > timedelta(0) and self.cap > timedelta(0)

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The wait after the failure of delivery ``attempt`` (1 for the first)."""
        attempt = max(1, attempt)
        if self.kind == "none":
            return timedelta(0)
        if self.kind == "exponential":
            # Past 2**40 any base is over any cap: no float overflow on a row retried for ever.
            seconds = self.base.total_seconds() * 2.0 ** min(attempt - 1, 40)
        elif self.kind == "linear":
            seconds = self.base.total_seconds() * attempt
        else:
            seconds = self.base.total_seconds()
        seconds = min(seconds, self.cap.total_seconds())
        if self.jitter:
            seconds *= 1.0 - self.jitter * (rng or random).random()
        return timedelta(seconds=seconds)


def require_backoff(policy: object) -> Backoff:
    """``policy`` if it is a Backoff, else a clear error where it was set."""
    if not isinstance(policy, Backoff):
        msg = (
            f"a backoff is a trinbox.Backoff, found {policy!r}; pass e.g. "
            f"Backoff.exponential(base=1.0, cap=300.0)"
        )
        raise TypeError(msg)
    return policy


def _duration(value: timedelta | float) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"a backoff duration is a timedelta or seconds, found {value!r}; pass a duration"
        raise TypeError(msg)
    return timedelta(seconds=value)


DEFAULT_BACKOFF = Backoff.exponential()
"""After a handler exception or a return that is not an outcome: 1 s, 2 s, 4 s, ... at most
five minutes, each up to half shorter at random."""
