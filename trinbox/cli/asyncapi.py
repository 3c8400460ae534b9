"""``trinbox asyncapi MODULE:APP``: the app's AsyncAPI 3.0.0 document, as JSON or YAML."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click

from .. import asyncapi
from ..errors import DeclarationError
from ._load import load_app

__all__ = ["command", "render"]


def render(doc: dict[str, Any], fmt: str) -> str:
    """``doc`` as JSON (indented, keys in the document's order) or YAML (PyYAML, the
    ``trinbox[yaml]`` extra)."""
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        msg = (
            "--format yaml writes through PyYAML, which is not installed; "
            'pip install "trinbox[yaml]" (or use --format json)'
        )
        raise click.ClickException(msg) from None
    return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100))


@click.command("asyncapi")
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "yaml"]),
    default="json",
    show_default=True,
    help="The document's format (yaml needs the trinbox[yaml] extra).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the document to this file instead of standard output.",
)
def command(target: str, fmt: str, output: Path | None) -> None:
    """Print the AsyncAPI 3.0.0 document of the app MODULE:APP names.

    One server per broker (host and port only), one channel per queue (table and group), one
    receive operation per subscriber, payload schemas from the handlers' message types. No
    database is opened.
    """
    app = load_app(target)
    try:
        doc = asyncapi.document(app)
    except (DeclarationError, ImportError, asyncapi.UndescribableType) as exc:
        raise click.ClickException(str(exc)) from exc
    text = render(doc, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
