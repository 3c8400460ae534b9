"""The seed's transcoder: the videos of one channel go into work one at a time, several
channels side by side.

Each row of ``video_jobs`` is held by an advisory lock on its channel's key
(``video_jobs-{channel}``) while it is in work; an encode that fails returns its row with the
release of its key, and its attempt is counted.

    python -m examples.transcoder [path/to/jobs.db]

publishes a few dozen videos over several channels into a SQLite file, processes them with
several workers while showing progress, and prints a summary showing that several channels
were in work at once and no channel ever had two videos in work at once.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import trio

from trinbox import (
    Advisory,
    App,
    AppInfo,
    Attempt,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Payload,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import Sqlite


class Transcode(Inbox[Advisory], table="video_jobs", advisory_lock="video_jobs-{channel}"):
    """One row of ``video_jobs``, held by a lock on its channel's key while it is in work."""

    id: Annotated[int, Id(generated=True)]
    channel: str
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


@dataclass
class Video:
    title: str
    channel: str


@dataclass
class Studio:
    """What the encoders saw: videos in work per channel, and the most ever at once."""

    expected: int
    in_work: Counter[str] = field(default_factory=Counter[str])
    busiest: int = 0  # most videos in work at once over all channels
    most_at_once: Counter[str] = field(default_factory=Counter[str])
    encoded: list[str] = field(default_factory=list[str])
    failed_encodes: int = 0
    all_encoded: trio.Event = field(default_factory=trio.Event)


def service(broker: SqlBroker[Sqlite], studio: Studio, *, fail_rate: float = 0.2) -> App:
    """The transcoder: four workers on the ``videos`` queue of ``broker``."""
    app = App(AppInfo("transcoder", "0.1.0"), grace=5.0)

    @app.on_startup
    async def create_schema() -> None:
        # The queue table and its dead letter table, from the declaration, created (where
        # missing) before the subscription checks its statements against them.
        await broker.create_tables(Transcode, dead_letter="video_jobs_dead")

    @subscriber(InboxQueue(Transcode, "videos").workers(4))
    async def transcode(video: Video, attempt: keys.Attempt) -> HandlerOutcome:
        studio.in_work[video.channel] += 1
        studio.busiest = max(studio.busiest, sum(studio.in_work.values()))
        studio.most_at_once[video.channel] = max(
            studio.most_at_once[video.channel], studio.in_work[video.channel]
        )
        try:
            await trio.sleep(random.uniform(0.002, 0.01))  # the encode
            if attempt == 1 and random.random() < fail_rate:
                studio.failed_encodes += 1
                # A retry runs no statement: the claim counted the attempt, and releasing the
                # channel's key returns the row.
                return HandlerOutcome.retry()
        finally:
            studio.in_work[video.channel] -= 1
        studio.encoded.append(video.title)
        done = len(studio.encoded)
        if done % 8 == 0 or done == studio.expected:
            bar = "#" * (done * 30 // studio.expected)
            print(
                f"  [{bar:<30}] {done:3}/{studio.expected} encoded, "
                f"{studio.failed_encodes} failed encodes retried"
            )
        if done == studio.expected:
            studio.all_encoded.set()
        return HandlerOutcome.ack()

    app.include(broker, transcode).max_attempts(5).dead_letter("video_jobs_dead")
    return app


def app() -> App:
    """The transcoder on the SQLite file ``$TRANSCODER_DB`` (default ``videos.db``), for the
    ``trinbox`` command, run from the repository's root:
    ``TRANSCODER_DB=path/to/jobs.db trinbox inspect examples.transcoder:app``."""
    path = os.environ.get("TRANSCODER_DB", "videos.db")
    return service(SqlBroker.sqlite(f"sqlite:///{path}"), Studio(expected=1))


async def main(path: Path, *, videos: int = 36, channels: int = 6) -> int:
    url = f"sqlite:///{path}"
    broker = SqlBroker.sqlite(url, poll_interval=0.01)
    studio = Studio(expected=videos)
    app = service(broker, studio)
    print(f"transcoder: {videos} videos over {channels} channels in {path}")
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for n in range(videos):
            channel = f"channel-{n % channels}"
            await broker.publish(Transcode, Video(f"video-{n:02}", channel), channel=channel)
        with trio.fail_after(120):
            await studio.all_encoded.wait()
        app.shutdown()
    left = await _count_rows(path)
    print("summary:")
    for channel in sorted(studio.most_at_once):
        print(f"  {channel}: most videos in work at once = {studio.most_at_once[channel]}")
    worst = max(studio.most_at_once.values())
    print(
        f"  most videos in work at once over all channels: {studio.busiest} of 4 workers "
        f"(each of a different channel)"
    )
    print(
        f"  encoded {len(studio.encoded)}/{videos}, failed encodes retried: "
        f"{studio.failed_encodes}, rows left in the queue: {left}"
    )
    ok = worst == 1 and studio.busiest > 1 and len(set(studio.encoded)) == videos and left == 0
    print(
        "no channel ever had two videos in work at once"
        if worst == 1
        else "a channel had two videos in work at once!"
    )
    return 0 if ok else 1


async def _count_rows(path: Path) -> int:
    import sqlite3

    def count() -> int:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM video_jobs").fetchone()[0])

    return await trio.to_thread.run_sync(count)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
    else:
        target = Path(tempfile.mkdtemp(prefix="trinbox-demo-")) / "videos.db"
    sys.exit(trio.run(main, target))
