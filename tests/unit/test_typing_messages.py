"""What mypy prints at each must-fail line of tests/typing/: the rule, in public names.

The check files are copied into a project of their own without their ``# type: ignore[code]``
comments, and ``mypy --strict`` runs on them as on a user's code (no mypy.ini of ours, this
checkout's trinbox as an installed one). Every message it prints must then be at a line that
had an ignore, with that code (and every such line gets one); and no message may name a private
module (``trinbox._...``) or a class that ``trinbox``, ``trinbox.keys`` or the standard typing
modules do not export, apart from the few pinned in ``UNAVOIDABLE``, each with its reason.
"""

from __future__ import annotations

import builtins
import collections.abc
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import trinbox
import trinbox.keys

TYPING = Path(__file__).parents[1] / "typing"
IGNORE = re.compile(r"  # type: ignore\[([a-z, -]+)\]")
LINE = re.compile(r"^(?P<file>[\w.]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")

UNAVOIDABLE = {
    # After "Unexpected keyword argument ... for "mysql" of "SqlBroker"" mypy notes where the
    # method is defined: the module of its definition (mypy's messages.py, for every call-arg
    # of a function in another module). SqlBroker is defined in trinbox._runtime.broker; only a
    # class declared in trinbox/__init__.py itself would read "defined in "trinbox"" (as the
    # mypy-only Inbox does for "__init_subclass__").
    '"mysql" defined in "trinbox._runtime.broker"',
    '"sqlite" defined in "trinbox._runtime.broker"',
    # Not mypy's doing: SqlBroker.publish_row takes an Inbox[F, Any], and a list of rows of two
    # forms joins into the public trinbox.Inbox, so one message names two classes called Inbox
    # and mypy prints both with their modules. Taking RowOf[F, Any] instead (as App.include's
    # dialect mounts do) reads "expected "RowOf[Lease | Advisory, Any]"": a change to broker.py,
    # left to whoever splits it.
    'Argument 1 to "publish_row" of "SqlBroker" has incompatible type "trinbox.Inbox[Form, '
    'Default]"; expected "trinbox._declare._inbox.Inbox[Lease | Advisory, Any]"  [arg-type]',
}


def strip(source: str) -> tuple[str, dict[int, set[str]]]:
    """``source`` without its ignore comments, and the codes each line ignored."""
    ignored: dict[int, set[str]] = {}
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        found = IGNORE.search(line)
        if found:
            ignored[number] = {code.strip() for code in found.group(1).split(",")}
            line = line[: found.start()] + line[found.end() :]
        lines.append(line)
    return "\n".join(lines) + "\n", ignored


Messages = tuple[list[dict[str, str]], dict[tuple[str, int], set[str]]]
"""mypy's messages (file, line, kind, text), and the codes each (file, line) ignored."""


@pytest.fixture(scope="module")
def messages(tmp_path_factory: pytest.TempPathFactory) -> Messages:
    project = tmp_path_factory.mktemp("must_fail")
    ignored: dict[tuple[str, int], set[str]] = {}
    checks = sorted(TYPING.glob("check_*.py"))
    assert len(checks) >= 7
    for check in checks:
        text, codes = strip(check.read_text())
        (project / check.name).write_text(text)
        ignored.update({(check.name, line): c for line, c in codes.items()})
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *(check.name for check in checks)],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(trinbox.__file__).parents[1])},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    body, summary = done.stdout.rstrip("\n").rsplit("\n", 1)
    assert summary.startswith("Found "), summary
    parsed = []
    for line in body.splitlines():
        found = LINE.match(line)
        assert found, line
        parsed.append(found.groupdict())
    return parsed, ignored


def test_each_must_fail_line_fails_with_its_code_and_nothing_else_fails(
    messages: Messages,
) -> None:
    parsed, ignored = messages
    assert len(ignored) > 150
    seen: dict[tuple[str, int], set[str]] = {}
    for message in parsed:
        where = (message["file"], int(message["line"]))
        assert where in ignored, message
        if message["kind"] == "error":
            code = re.search(r"  \[([a-z-]+)\]$", message["text"])
            assert code, message
            seen.setdefault(where, set()).add(code.group(1))
    assert seen == ignored


def test_no_message_names_a_private_module(
    messages: Messages,
) -> None:
    parsed, _ = messages
    private = [m["text"] for m in parsed if "trinbox._" in m["text"]]
    assert set(private) == UNAVOIDABLE, private
    # The include's old inference trick ended every message in "| Callable[[Never], Never]".
    assert not [m for m in parsed if "Callable[[Never], Never]" in m["text"]]


def test_each_refused_mount_names_the_row_form(messages: Messages) -> None:
    """A subscriber the broker's dialect cannot mount reads "Needs[Row, Form, Opening, Mode]"
    for each row it holds, beside the forms the dialect serves ("RowOf[Lease | Advisory, ..."),
    so the message says which form the row has."""
    parsed, _ = messages
    refused = 0
    for message in parsed:
        found = re.match(
            r'Argument 2 to "include" of "App" has incompatible type "(Subscriber\[.*?)"; '
            r'expected "Subscriber\[Any, Any, .*, tuple\[RowOf\[',
            message["text"],
        )
        if not found:
            continue
        refused += 1
        actual = found.group(1)
        if actual == (
            "Subscriber[Locked, Plain, Callable[..., Awaitable[HandlerOutcome | "
            "Sequence[HandlerOutcome] | None]], tuple[Locked, Plain] | None]"
        ):
            # check_loops: a list annotated list[Subscriber[Locked, Plain]] names no form.
            continue
        needs = re.findall(r"(Needs\[\w+, \w+, \w+, \w+\]|tuple\[)", actual)
        assert needs and all(n.startswith("Needs[") for n in needs), message
        forms = {n.split(", ")[1] for n in needs}
        assert forms <= {"RowLock", "Lease", "Advisory"}, message
    assert refused > 80


def test_every_name_in_a_message_is_importable(
    messages: Messages,
) -> None:
    """A class a message names (``Needs``, ``RowOf``, ``Form``, ``Pool``, ``TxNeedsTransactional``
    ...) is importable from ``trinbox`` (or ``trinbox.keys``), unless the check file declares it
    or it is a type variable of the signature a note prints (``def [S: Row] __call__``)."""
    parsed, _ = messages
    declared = set()
    for check in TYPING.glob("check_*.py"):
        declared |= set(re.findall(r"^\s*(?:class|def|async def) (\w+)", check.read_text(), re.M))
    named: set[str] = set()
    for message in parsed:
        text = message["text"]
        if text in UNAVOIDABLE:
            continue
        if text.endswith(":"):  # "Possible overload variants:"
            continue
        # What a message quotes, or a note's whole signature ("def [K1: (Attempt, Pool)] ...").
        quoted = " ".join(re.findall(r'"[^"]*"', text)) or text
        named |= set(re.findall(r"\b[A-Z]\w*\b", quoted))
    # Type variables (T, K1, FF...) and App.include's Message; the check files' own classes.
    typevars = {name for name in named if re.fullmatch(r"[A-Z]{1,2}\d?", name)}
    shown = named - declared - typevars - {"Message"}
    modules = (trinbox, trinbox.keys, builtins, typing, collections.abc)
    missing = {n for n in shown if not any(hasattr(module, n) for module in modules)}
    assert {"Needs", "RowOf", "Form", "Pool", "Inbox", "TxNeedsTransactional"} <= shown
    assert not missing, missing
