"""The log formatters of ``trinbox run``: every ``extra`` field of a record, without a list of
them, as JSON fields or as ``key=value`` after the text line."""

from __future__ import annotations

import json
import logging
import sys

from trinbox.cli._logs import JsonFormatter, TextFormatter, extras


def _record(**extra: object) -> logging.LogRecord:
    logger = logging.getLogger("trinbox.test")
    return logger.makeRecord(
        "trinbox.test", logging.WARNING, __file__, 1, "row %s failed", ("7",), None, extra=extra
    )


def test_json_carries_every_extra_field() -> None:
    record = _record(subscription="emails", table="email_jobs", row_id=7, attempt=2, odd=object())
    found = json.loads(JsonFormatter().format(record))
    assert found["level"] == "WARNING"
    assert found["logger"] == "trinbox.test"
    assert found["message"] == "row 7 failed"
    assert found["time"].endswith("+00:00")
    assert (found["subscription"], found["table"], found["row_id"], found["attempt"]) == (
        "emails",
        "email_jobs",
        7,
        2,
    )
    assert found["odd"].startswith("<object object")  # what JSON cannot hold, as its str
    assert "exception" not in found


def test_json_has_the_traceback_once() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("t").makeRecord(
            "t", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    found = json.loads(line)
    assert found["exception"].startswith("Traceback") and "ValueError: boom" in found["exception"]


def test_text_appends_the_extras() -> None:
    line = TextFormatter().format(_record(subscription="emails", row_id=7))
    assert line.endswith(" WARNING trinbox.test: row 7 failed subscription=emails row_id=7")
    assert extras(_record()) == {}


def test_text_shows_each_field_once() -> None:
    # trinbox's own lines carry their fields in the message; the text line does not repeat
    # them (JSON still has them as fields).
    record = logging.getLogger("trinbox.delivery").makeRecord(
        "trinbox.delivery",
        logging.WARNING,
        __file__,
        1,
        "%s [%s]",
        ("handler failed", "subscription=emails table=jobs row_id=3 attempt=1"),
        None,
        extra={"subscription": "emails", "table": "jobs", "row_id": 3, "attempt": 1, "x": 2},
    )
    line = TextFormatter().format(record)
    assert line.endswith(": handler failed [subscription=emails table=jobs row_id=3 attempt=1] x=2")
    assert json.loads(JsonFormatter().format(record))["row_id"] == 3
