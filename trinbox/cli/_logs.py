"""Log formatting for ``trinbox run``: a text line, or one JSON object per line.

Both carry every ``extra`` field of a record (any attribute a plain ``LogRecord`` does not
have), so fields trinbox adds to its records (``subscription``, ``table``, ``row_id``,
``attempt``...) and those of the service's own loggers appear without being listed here.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal

__all__ = ["Held", "JsonFormatter", "TextFormatter", "configure", "extras"]

LogFormat = Literal["text", "json"]

# What every LogRecord has (plus what Formatter.format adds); anything else came as `extra`.
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "taskName"}
)


def extras(record: logging.LogRecord) -> dict[str, object]:
    """The record's ``extra`` fields, in the order they were given."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, every extra field, and the
    traceback (``exception``) when the record has one. Values JSON cannot hold are written
    as their ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        found: dict[str, object] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in extras(record).items():
            found.setdefault(key, value)
        if record.exc_info:
            found["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            found["exception"] = record.exc_text
        if record.stack_info:
            found["stack"] = self.formatStack(record.stack_info)
        return json.dumps(found, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` (the extras the message does not show
    already), the traceback on the lines after."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _time(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        # trinbox's own lines carry their fields in the message already
        # ("... [subscription=emails table=jobs ...]"): each field once.
        message = record.getMessage()
        fields = " ".join(f"{k}={v}" for k, v in extras(record).items() if f"{k}=" not in message)
        return f"{line} {fields}" if fields else line


class Held(logging.Handler):
    """Holds the records of a startup until it is known how it ended: started, every one is
    written; failed, only warnings and errors (the failure itself is one line of its own, and
    "shut down" lines of an app that never started say nothing)."""

    def __init__(self, target: logging.Handler) -> None:
        super().__init__()
        self.target = target
        self.held: list[logging.LogRecord] | None = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.held is not None:
            self.held.append(record)
        else:
            self.target.handle(record)

    def let_go(self, least: int = logging.NOTSET) -> None:
        """Write the held records at ``least`` and above, and every record from now on."""
        held, self.held = self.held or [], None
        for record in held:
            if record.levelno >= least:
                self.target.handle(record)


def configure(level: str, form: LogFormat) -> Held:
    """Send every logger's records at ``level`` and above to stderr, formatted as ``form``,
    held until ``let_go()``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    held = Held(handler)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(held)
    root.setLevel(level.upper())
    return held
