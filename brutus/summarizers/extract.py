"""What an offline summary can know about a history without a model: ``history_facts``.

Rules:

- User directions are the user's own text parts (not synthetic, not ignored), in order, as written.
- Files read are the ``path`` / ``filePath`` / ``file_path`` / ``notebook_path`` inputs of completed read
  tools; files edited the same inputs of completed edit and write tools, the files named in a patch tool's
  patch text (``*** Update File: …``, ``+++ b/…``) and those of ``patch`` parts. A file edited is not also
  listed as read. Commands are the ``command`` (or ``cmd``) inputs of shell tools, whatever their status.
- Errors are tool errors (with the command for a shell tool), non-zero ``exit`` metadata of a completed
  shell tool, and assistant message errors other than an abort.
- Lists (directions aside) hold each value once, at its latest position, so cutting a list from the front
  drops the oldest.
- Summary messages are not work: a compaction summary becomes ``previous`` (the newest one), a tier block
  (``[SUMMARIZED]`` or ``[GOAL BATCH]`` text, or ``summary_type`` metadata) goes to ``memories``.
- ``last_state`` is the newest assistant text that is not a summary; ``open_request`` the newest direction
  when no such text came after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..models import MessageWithParts, PatchPart, TextPart, ToolPart
from .prompts import GOAL_BATCH_TAG, SUMMARIZED_TAG, message_text

__all__ = [
    "EDIT_TOOLS",
    "READ_TOOLS",
    "SHELL_TOOLS",
    "HistoryFacts",
    "history_facts",
    "is_tier_summary",
    "user_directions",
]

READ_TOOLS = frozenset({"read", "view", "cat", "read_file", "readfile", "notebookread", "open_file"})
EDIT_TOOLS = frozenset({
    "edit", "write", "multiedit", "patch", "apply_patch", "applypatch", "notebookedit", "write_file",
    "edit_file", "create_file", "str_replace", "str_replace_editor", "str_replace_based_edit_tool",
})
SHELL_TOOLS = frozenset({"bash", "shell", "sh", "zsh", "exec", "run", "terminal", "run_command",
                         "execute_command", "local_shell", "run_shell_command"})
_PATH_KEYS = ("path", "filePath", "file_path", "notebook_path")
_PATCH_KEYS = ("patchText", "patch", "input", "diff")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$"
                         r"|^\+\+\+ (?:b/)?(.+?)\s*$", re.MULTILINE)
_ABORTED = "MessageAbortedError"


@dataclass
class HistoryFacts:
    """The facts ``history_facts`` found, each list in chronological order."""

    messages: int = 0
    directions: list[str] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    files_edited: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    previous: str | None = None
    last_state: str | None = None
    open_request: str | None = None


class _Latest:
    """Values kept once each, at their latest position."""

    def __init__(self) -> None:
        self._order: dict[str, None] = {}

    def add(self, value: str) -> None:
        value = value.strip()
        if value:
            self._order.pop(value, None)
            self._order[value] = None

    def discard(self, value: str) -> None:
        self._order.pop(value, None)

    def __contains__(self, value: object) -> bool:
        return value in self._order

    def values(self) -> list[str]:
        return list(self._order)


def is_tier_summary(message: MessageWithParts) -> bool:
    """A ``[SUMMARIZED]`` or ``[GOAL BATCH]`` message of the tiered compaction (ADR-0041)."""
    if message.info.role != "assistant":
        return False
    metadata = message.info.metadata or {}
    if metadata.get("summary_type") in ("tool_call", "threshold", "goal_batch"):
        return True
    return message_text(message).startswith((SUMMARIZED_TAG, GOAL_BATCH_TAG))


def user_directions(message: MessageWithParts) -> list[str]:
    """The user's own text parts of a user message (not synthetic, not ignored, not blank), as written."""
    if message.info.role != "user":
        return []
    return [
        part.text
        for part in message.parts
        if isinstance(part, TextPart) and not part.synthetic and not part.ignored and part.text.strip()
    ]


def _paths(arguments: dict[str, Any]) -> Iterable[str]:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            yield value
    for key in _PATCH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            for match in _PATCH_FILE.finditer(value):
                path = next(group for group in match.groups() if group)
                if path != "/dev/null":
                    yield path


def _command(arguments: dict[str, Any]) -> str | None:
    value = arguments.get("command", arguments.get("cmd"))
    if isinstance(value, list):
        value = " ".join(str(item) for item in value)
    return value if isinstance(value, str) and value.strip() else None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _message_error(error: dict[str, Any]) -> str | None:
    name = error.get("name") or "error"
    if name == _ABORTED:
        return None
    data = error.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    message = message or error.get("message")
    return f"{name}: {message}" if message else str(name)


def _tool_facts(part: ToolPart, read: _Latest, edited: _Latest, commands: _Latest, errors: _Latest) -> None:
    name, state = part.tool.lower(), part.state
    command = _command(state.input) if name in SHELL_TOOLS else None
    if command:
        commands.add(command)
    if state.status == "completed":
        if name in READ_TOOLS:
            for path in _paths(state.input):
                read.add(path)
        elif name in EDIT_TOOLS:
            for path in _paths(state.input):
                edited.add(path)
        exit_code = (state.metadata or {}).get("exit")
        if command and isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0:
            errors.add(f"{part.tool} `{_first_line(command)}` exited with {exit_code}")
    elif state.status == "error":
        what = f"{part.tool} `{_first_line(command)}`" if command else part.tool
        errors.add(f"{what}: {state.error or 'failed'}")


def history_facts(history: Sequence[MessageWithParts]) -> HistoryFacts:
    """The facts of ``history`` (see the module rules)."""
    facts = HistoryFacts(messages=len(history))
    read, edited, commands, errors = _Latest(), _Latest(), _Latest(), _Latest()
    last_direction_at, last_state_at = -1, -1
    for index, message in enumerate(history):
        info = message.info
        if info.role == "user":
            directions = user_directions(message)
            facts.directions += directions
            last_direction_at = index if directions else last_direction_at
            continue
        if is_tier_summary(message):
            facts.memories.append(message_text(message))
            continue
        if info.summary:
            facts.previous = message_text(message) or facts.previous
            continue
        for part in message.parts:
            if isinstance(part, ToolPart):
                _tool_facts(part, read, edited, commands, errors)
            elif isinstance(part, PatchPart):
                for path in part.files:
                    edited.add(path)
        if info.error and (error := _message_error(info.error)):
            errors.add(error)
        text = message_text(message)
        if text:
            facts.last_state, last_state_at = text, index
    for path in edited.values():
        read.discard(path)
    facts.files_read, facts.files_edited = read.values(), edited.values()
    facts.commands, facts.errors = commands.values(), errors.values()
    if facts.directions and last_direction_at > last_state_at:
        facts.open_request = facts.directions[-1]
    return facts
