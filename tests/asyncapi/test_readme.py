"""README "## The AsyncAPI document": its example is real output, and its table of x-trinbox
fields names exactly the fields the documents have."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import yaml

from trinbox import (
    App,
    AppInfo,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    SqlBroker,
    Unique,
    subscriber,
)
from trinbox.asyncapi import document
from trinbox.outbox import Tracker

from . import apps
from .check import problems
from .test_command import trinbox_command

README = (Path(__file__).parents[2] / "README.md").read_text()


def section() -> str:
    start = README.index("## The AsyncAPI document\n")
    end = README.index("\n## ", start + 1)
    return README[start:end]


def block(lang: str) -> str:
    (found,) = re.findall(rf"```{lang}\n(.*?)\n```", section(), flags=re.DOTALL)
    return str(found)


def test_the_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(block("python") + "\n")
    done = trinbox_command("asyncapi", "shop:app", "--format", "yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    shown = block("yaml").splitlines()
    # The README shows a run of whole lines of the output: from servers to operations.
    start = lines.index(shown[0])
    assert lines[start : start + len(shown)] == shown
    assert lines[start + len(shown)] == "components:"
    doc = yaml.safe_load(done.stdout)
    assert problems(doc) == []
    assert "s3cret" not in done.stdout
    assert "shop:s3cret" in block("python")  # the URL shown does hold a password


def _bindings(doc: dict[str, Any]) -> dict[str, set[str]]:
    """The x-trinbox fields by what holds them: server, channel or operation."""
    holders = {"servers": "server", "channels": "channel", "operations": "operation"}
    return {
        kind: {
            field
            for item in doc.get(section, {}).values()
            for field in item["bindings"]["x-trinbox"]
            if field != "bindingVersion"
        }
        for section, kind in holders.items()
    }


class Keyed(Inbox[Lease], table="keyed"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()] = None
    payload: Annotated[bytes, Payload()]
    dedup: Annotated[str | None, Unique()] = None


class Billing(Inbox[Lease], table="billing_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


def test_the_binding_table_names_every_field() -> None:
    pooled = App(AppInfo("pooled"))
    pooled.add_broker(SqlBroker.postgres(apps.PG_URL, pgbouncer="transaction"))

    @subscriber(InboxQueue(apps.Locked, "ledger").every_group())
    async def post(entry: bytes) -> None:
        pass

    ledger = App(AppInfo("ledger"))
    ledger.include(SqlBroker.postgres(apps.PG_URL), post)

    @subscriber(InboxQueue(Keyed, "keyed"))
    async def sync(body: bytes) -> None:
        pass

    keyed = App(AppInfo("keyed"))
    keyed.include(SqlBroker.postgres(apps.PG_URL), sync)

    @subscriber(InboxQueue(Billing, "billing").tracked(Tracker("billing_seen")))
    async def bill(invoice: bytes) -> None:
        pass

    billing = App(AppInfo("billing"))
    billing.include(SqlBroker.postgres(apps.PG_URL), bill)
    seen: dict[str, set[str]] = {}
    for app in (apps.app(), pooled, ledger, apps.relayed(), apps.routed(), billing, keyed):
        for kind, fields in _bindings(document(app)).items():
            seen.setdefault(kind, set()).update(fields)
    table: dict[str, set[str]] = {}
    for kind, field in re.findall(r"^\| (\w+) \| `(\w+)` \|", section(), flags=re.MULTILINE):
        table.setdefault(kind, set()).add(field)
    assert table == seen
