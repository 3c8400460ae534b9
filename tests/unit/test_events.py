"""The event hook's dispatch, without a database: hooks are called in order (the end of a
handler run in reverse, so context set at its start unwinds last-in first-out), a hook that
raises is logged once per method and the others still run, and ``App`` takes hooks as one or
several and refuses what is not a hook."""

from __future__ import annotations

import logging

import pytest

from trinbox import App
from trinbox._api.events import EventBus
from trinbox.events import Events, EventSource, HandleEnd, HandleEvent, LeaseEvent

SOURCE = EventSource("emails", "send", "email_jobs", "emails", "sqlite")


class Calls(Events):
    def __init__(self, name: str, log: list[str], *, fail: bool = False) -> None:
        self.name = name
        self.log = log
        self.fail = fail

    def handle_started(self, event: HandleEvent) -> object:
        self.log.append(f"{self.name} start")
        if self.fail:
            raise RuntimeError("start")
        return f"{self.name} state"

    def handle_ended(self, event: HandleEvent, state: object, end: HandleEnd) -> None:
        self.log.append(f"{self.name} end {state}")

    def lease_extended(self, event: LeaseEvent) -> None:
        self.log.append(f"{self.name} lease")
        if self.fail:
            raise RuntimeError("lease")


def test_hooks_start_in_order_and_end_in_reverse() -> None:
    log: list[str] = []
    bus = EventBus([Calls("a", log), Calls("b", log)])
    event = HandleEvent(SOURCE, (1,), 1, 0)
    states = bus.handle_started(event)
    bus.handle_ended(event, states, HandleEnd(("ack",), None, 0.1))
    assert log == ["a start", "b start", "b end b state", "a end a state"]


def test_a_raising_hook_is_logged_once_per_method_and_the_others_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    bus = EventBus([Calls("bad", log, fail=True), Calls("good", log)])
    event = HandleEvent(SOURCE, (1,), 1, 0)
    caplog.set_level(logging.WARNING, logger="trinbox")
    for _ in range(3):
        states = bus.handle_started(event)
        bus.handle_ended(event, states, HandleEnd((), None, 0.1))
        bus.lease_extended(LeaseEvent(SOURCE, 1, True))
    assert log[:5] == [
        "bad start",
        "good start",
        "good end good state",
        "bad end None",
        "bad lease",
    ]
    assert bus.failures == 6
    assert [(r.name, r.getMessage().split(";")[0]) for r in caplog.records] == [
        ("trinbox.events", "the event hook Calls.handle_started raised"),
        ("trinbox.events", "the event hook Calls.lease_extended raised"),
    ]
    assert all(r.exc_info for r in caplog.records)


def test_app_takes_one_hook_or_several_and_refuses_anything_else() -> None:
    one, two = Events(), Events()
    assert App(events=one)._hooks == [one]
    app = App(events=[one, two])
    app.add_events(one)  # once is enough
    assert app._hooks == [one, two]
    with pytest.raises(TypeError, match=r"event hook is a trinbox\.events\.Events, found object"):
        app.add_events(object())  # type: ignore[arg-type]
