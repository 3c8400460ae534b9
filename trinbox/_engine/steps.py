"""How a delivery's handler result becomes a settlement step: the outcome (or the failure
policy) and the mount's attempts, dead letter and backoff."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from .._api.backoff import RETRY_AFTER_FIELD, Backoff
from .._api.codecs import Codec
from .._api.outcome import FailurePolicy, HandlerOutcome
from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter
from .._holders._base import Ack, DeadLetterStep, Delivery, Drop, Retry, RetryAt, Snooze, Step
from ..errors import DeclarationError
from .statistics import Fields

__all__ = ["LATEST_RETRY", "StepRules"]

delivery_log = logging.getLogger("trinbox.delivery")
WARNING = logging.WARNING

LATEST_RETRY = datetime(9999, 1, 1, tzinfo=UTC)  # MySQL DATETIME ends in 9999
RESULT_FIELD = "result: Annotated[Receipt | None, Result()] = None"


@dataclass(frozen=True, slots=True)
class Encoded:
    """An ack's result as the Result field's JSON text, encoded when the handler returned (so
    that a result the codec cannot encode is the handler's failure, not the settlement's)."""

    text: str


class StepRules:
    """The steps of one subscription's deliveries."""

    def __init__(
        self,
        spec: TableSpec,
        *,
        batch: bool,
        dead_letter: DeadLetter | None,
        max_attempts: int | None,
        counts_at_claim: bool,
        backoff: Backoff,
        clock: Callable[[], datetime],
        due_in: Callable[[float], None],
        where: str,
        fields: Fields,
        codec: Codec,
    ) -> None:
        self._spec = spec
        self._codec = codec
        self._queue_batch = batch
        self._dead_letter = dead_letter
        self._max_attempts = max_attempts
        self._counts_at_claim = counts_at_claim
        self._backoff = backoff
        self._clock = clock
        self._due_in = due_in
        self.where = where
        self.fields = fields
        self._said_no_backoff = False

    def spent_at_claim(self, delivery: Delivery) -> DeadLetterStep | None:
        """The dead letter step of a row claimed with its attempts spent, before its handler
        runs; ``None`` for a row whose handler may run.

        Where the claim counts the attempt in a commit of its own, every claim counts: a
        delivery that reports more than ``max_attempts`` follows ``max_attempts`` deliveries
        that never settled (their process died: a segfault, the OOM killer, ``os._exit``),
        which no handler's retry can move out. Without this such a row runs its handler for
        ever, and blocks its FIFO group for good. Where the count is the settlement's (the
        plain row lock form), a dying process rolls it back: nothing tells such a row apart."""
        if (
            not self._counts_at_claim
            or self._dead_letter is None
            or self._max_attempts is None
            or delivery.attempt is None
            or delivery.attempt <= self._max_attempts
        ):
            return None
        self.fields.log(
            delivery_log,
            WARNING,
            f"the row was claimed with its attempts spent (max_attempts({self._max_attempts}));"
            f" its earlier deliveries ended unsettled (their process died, or they were "
            f"released); moving it to {self._dead_letter.label} without running the handler",
            row=True,
            row_id=delivery.id,
            attempt=delivery.attempt,
        )
        return DeadLetterStep(self._dead_letter)

    def outcomes(self, result: object, count: int) -> list[HandlerOutcome]:
        """The outcome of each of ``count`` rows from what the handler returned; a return
        that is no outcome, or an outcome the table cannot take, raises (the failure policy
        then settles the rows)."""
        if result is None:
            return [HandlerOutcome.ack()] * count
        if isinstance(result, HandlerOutcome):
            return [self._check(result)] * count
        if (
            self._queue_batch
            and isinstance(result, Sequence)
            and not isinstance(result, str | bytes)
            and all(isinstance(o, HandlerOutcome) for o in result)
        ):
            if len(result) != count:
                msg = (
                    f"{self.where}: a batch handler returns one outcome per row, found "
                    f"{len(result)} for {count} rows"
                )
                raise TypeError(msg)
            return [self._check(outcome) for outcome in result]
        msg = (
            f"{self.where}: a handler returns a HandlerOutcome or None, found "
            f"{type(result).__name__}"
        )
        raise TypeError(msg)

    def _check(self, outcome: HandlerOutcome) -> HandlerOutcome:
        """``outcome``, its result encoded for the Result field; refused: a snooze on a table
        without a RetryAfter field (nothing would hold the row back, and a row that spends no
        attempt would come back at once, for ever) and a result on a table without a Result
        field (it would be lost). Which outcome a handler returns is known only when it
        returns, so it is refused then."""
        if outcome.is_ack and self._spec.result is not None:
            return replace(outcome, result=Encoded(self._encoded(outcome.result)))
        if outcome.result is not None:
            msg = (
                f"{self.where}: a result is written into the row's Result field, found "
                f"HandlerOutcome.ack({outcome.result!r}) on {self._spec.label}, which has none; "
                f"add a Result field ({RESULT_FIELD}, beside a ProcessedAt field), or return "
                f"HandlerOutcome.ack()"
            )
            raise DeclarationError(msg)
        if outcome.is_snooze and self._spec.retry_after is None:
            msg = (
                f"{self.where}: a snooze holds the row back in its RetryAfter field, found "
                f"HandlerOutcome.snooze({outcome.delay!r}) on {self._spec.label}, which has "
                f"none; add a RetryAfter field ({RETRY_AFTER_FIELD}), or return "
                f"HandlerOutcome.retry() to spend an attempt"
            )
            raise DeclarationError(msg)
        return outcome

    def _encoded(self, result: object) -> str:
        data = self._codec.encode(result)
        try:
            text = data.decode()
        except UnicodeDecodeError:
            text = ""
        try:
            json.loads(text)
        except ValueError:
            msg = (
                f"{self.where}: a Result field holds JSON, found the codec's "
                f"{type(self._codec).__name__} encoding of {result!r} is not JSON text "
                f"({data[:40]!r}); give the broker a JSON codec (codec=JsonCodec()), or return "
                f"a result it encodes as JSON"
            )
            raise TypeError(msg) from None
        return text

    def policy_step(self, delivery: Delivery, policy: FailurePolicy) -> Step:
        if policy is FailurePolicy.SKIP:
            return Ack()
        if policy is FailurePolicy.RETRY:
            if self._spec.retry_after is None:
                self._no_backoff()
                return self.step(delivery, HandlerOutcome.retry())
            delay = self._backoff.delay(delivery.attempt or 1)
            if delay:
                return self.step(delivery, HandlerOutcome.retry_after(delay))
            return self.step(delivery, HandlerOutcome.retry())
        return Drop()

    def _no_backoff(self) -> None:
        """Say once that this table retries its failed rows at once: without a RetryAfter
        field nothing holds a row back, and waiting in the worker would hold the row and its
        slot (a backoff set on purpose was refused at startup)."""
        if self._said_no_backoff or not self._backoff.waits:
            return
        self._said_no_backoff = True
        self.fields.log(
            delivery_log,
            WARNING,
            f"{self._spec.label} has no RetryAfter field, so a failed delivery cannot wait out "
            f"its backoff there and is retried at once (said once); add a RetryAfter field "
            f"({RETRY_AFTER_FIELD}) to back off, give the mount max_attempts(n) so a failing "
            f"row leaves, or set .backoff(Backoff.none()) to say so",
        )

    def step(self, delivery: Delivery, outcome: HandlerOutcome) -> Step:
        if outcome.is_ack:
            found = outcome.result
            return Ack(result=found.text) if isinstance(found, Encoded) else Ack()
        if outcome.is_drop:
            return Drop()
        if outcome.is_snooze:
            # Spends no attempt, so it never meets max_attempts (checked in outcomes()).
            assert outcome.delay is not None and self._spec.retry_after is not None
            self._due_in(outcome.delay.total_seconds())
            at, delay = self.retry_at(delivery, outcome.delay)
            return Snooze(at, delay=delay)
        if (
            self._dead_letter is not None
            and self._max_attempts is not None
            and delivery.attempt is not None
            and delivery.attempt >= self._max_attempts
        ):
            self.fields.log(
                delivery_log,
                WARNING,
                f"the row's attempts are spent; moving it to {self._dead_letter.label}",
                row=True,
                row_id=delivery.id,
                attempt=delivery.attempt,
            )
            return DeadLetterStep(self._dead_letter)
        if outcome.delay is not None:
            if self._spec.retry_after is None:
                self.fields.log(
                    delivery_log,
                    WARNING,
                    "retry_after needs a RetryAfter field; the row is retried at once",
                    row=True,
                    row_id=delivery.id,
                    attempt=delivery.attempt,
                )
                return Retry()
            self._due_in(outcome.delay.total_seconds())
            at, delay = self.retry_at(delivery, outcome.delay)
            return RetryAt(at, delay=delay)
        return Retry()

    def retry_at(self, delivery: Delivery, delay: timedelta) -> tuple[datetime, timedelta]:
        """Now plus ``delay``, at most LATEST_RETRY (what every database's column holds), and
        the delay that reaches it (which the database clock adds to the server's now)."""
        now = self._clock()
        try:
            at = now + delay
        except OverflowError:
            at = LATEST_RETRY
        if at > LATEST_RETRY:
            self.fields.log(
                delivery_log,
                WARNING,
                f"the row asked to wait {delay}, past what a time column holds; it waits "
                f"until {LATEST_RETRY.date()}",
                row=True,
                row_id=delivery.id,
                attempt=delivery.attempt,
            )
            at = LATEST_RETRY
        return at, min(delay, at - now)
