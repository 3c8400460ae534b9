"""Checks of a rendered document: valid under the vendored AsyncAPI 3.0.0 JSON Schema, and
every ``$ref`` in it pointing at something the document holds (the schema cannot check that)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_FILE = Path(__file__).with_name("asyncapi-3.0.0.json")


@functools.cache
def validator() -> jsonschema.Draft7Validator:
    """The schema's own ``$schema`` names draft 7; formats are checked too."""
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema"
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


def problems(doc: dict[str, Any]) -> list[str]:
    """Every schema violation and dangling ``$ref`` of ``doc``, as readable lines."""
    found = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator().iter_errors(doc)
    ]
    found += [f"{ref}: points at nothing" for ref in refs(doc) if not _resolves(doc, ref)]
    return found


def refs(node: Any) -> list[str]:
    """Every ``$ref`` string in ``node``."""
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def _resolves(doc: dict[str, Any], ref: str) -> bool:
    if not ref.startswith("#/"):
        return False
    node: Any = doc
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
