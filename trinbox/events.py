"""What a serving app tells about itself: the event hooks (subclass ``Events`` and pass it to
``App(events=[...])``), the records each hook receives, and the statistics ``app.statistics()``
and ``app.share_statistics()`` return."""

from __future__ import annotations

from ._api.events import ClaimEvent as ClaimEvent
from ._api.events import Events as Events
from ._api.events import EventSource as EventSource
from ._api.events import HandleEnd as HandleEnd
from ._api.events import HandleEvent as HandleEvent
from ._api.events import LeaseEvent as LeaseEvent
from ._api.events import PublishEvent as PublishEvent
from ._api.events import PublishStart as PublishStart
from ._api.events import ReleaseEvent as ReleaseEvent
from ._api.events import SettleEvent as SettleEvent
from ._api.events import TickEvent as TickEvent
from ._engine.statistics import SharedStatistics as SharedStatistics
from ._engine.statistics import SubscriptionStatistics as SubscriptionStatistics

__all__ = [
    "ClaimEvent",
    "EventSource",
    "Events",
    "HandleEnd",
    "HandleEvent",
    "LeaseEvent",
    "PublishEvent",
    "PublishStart",
    "ReleaseEvent",
    "SettleEvent",
    "TickEvent",
    "SharedStatistics",
    "SubscriptionStatistics",
]
