"""Rendering a history as an Anthropic Messages API request body (OpenCode's toModelMessages + Anthropic's rules).

Rules ``to_anthropic`` keeps, whatever the history holds:

- Tool calls: an assistant ``tool`` part becomes a ``tool_use`` block (id = its call id with characters
  outside ``[A-Za-z0-9_-]`` replaced by ``_``, made unique within the request; name = tool; input) and its
  ``tool_result`` goes into the *next* user message, before anything else in it (a user message is created
  when none follows). Results: a completed output as is (``(no output)`` when blank); a pruned output
  (``state.time.compacted`` set) as ``[Old tool result content cleared]`` while the call and input stay; an
  error as ``is_error`` with its text; a pending or running tool, or a completed one whose output was lost, as
  ``is_error`` ``[Tool execution was interrupted]``.
- Compaction: a user ``compaction`` part reads "What did we do so far?" and the summary is plain assistant
  text. When a completed compaction kept a verbatim tail (``tail_start_id`` before the compaction message),
  the compaction pair is rendered first and the tail after it.
- Shape: roles alternate (consecutive same-role messages merge), the first message is a user message (a
  ``(continued)`` placeholder is put first when the history starts with the assistant), no message is empty,
  no text block is empty or whitespace-only, and the final assistant content has no trailing whitespace.
- Omitted: reasoning (no valid signature to send back), step-start/step-finish/snapshot/patch/agent/retry
  parts, ignored text, and an assistant message that failed (an error other than an abort, or an abort that
  left nothing but steps and reasoning), as OpenCode leaves it out. Synthetic text is kept. A file part is a
  short text mention ``[file: name (mime)]``; a subtask part is text.
- Text that cannot be encoded as UTF-8 (lone surrogates, which brutus stores losslessly) is sent with each
  lone surrogate replaced by U+FFFD, in texts, tool results and tool inputs alike.
- An empty history renders to no messages; ``system`` is left out when None or empty.

``Walk`` is the one walk behind ``to_anthropic`` and the live request (``brutus.live.render``, which sends
recorded content back exactly). ``validate_anthropic`` checks a body against those API rules and is what the
tests run every render through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .errors import InvalidInput
from .history import completed_compactions
from .models import (
    CompactionPart,
    FilePart,
    MessageWithParts,
    Part,
    SubtaskPart,
    TextPart,
    ToolPart,
    ToolState,
)

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_PROMPT",
    "EMPTY_TOOL_OUTPUT",
    "FAILED_TOOL_OUTPUT",
    "INTERRUPTED_TOOL_OUTPUT",
    "PLACEHOLDER_USER_TEXT",
    "Walk",
    "anthropic_problems",
    "file_mention",
    "part_text",
    "subtask_text",
    "to_anthropic",
    "tool_result",
    "validate_anthropic",
]

CLEARED_TOOL_OUTPUT = "[Old tool result content cleared]"
INTERRUPTED_TOOL_OUTPUT = "[Tool execution was interrupted]"
FAILED_TOOL_OUTPUT = "[Tool execution failed]"
EMPTY_TOOL_OUTPUT = "(no output)"
COMPACTION_PROMPT = "What did we do so far?"
PLACEHOLDER_USER_TEXT = "(continued)"

_ABORTED = "MessageAbortedError"
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_TOOL_USE_ID = re.compile(r"^[A-Za-z0-9_-]+$")

Block = dict[str, Any]


# -- what a part says ------------------------------------------------------------------------------------


def tool_result(state: ToolState) -> tuple[str, bool]:
    """The text a tool state's result renders as, and whether it is an error result."""
    if state.status == "completed":
        if state.time.compacted:
            return CLEARED_TOOL_OUTPUT, False
        if state.output is None:  # completed, but the output is gone: the call never really returned
            return INTERRUPTED_TOOL_OUTPUT, True
        return (state.output if state.output.strip() else EMPTY_TOOL_OUTPUT), False
    if state.status == "error":
        return (state.error if state.error and state.error.strip() else FAILED_TOOL_OUTPUT), True
    return INTERRUPTED_TOOL_OUTPUT, True


def file_mention(part: FilePart) -> str:
    """``[file: name (mime)]``: the file's name, else its URL unless that is inline data."""
    name = part.filename or (part.url if part.url and not part.url.startswith("data:") else "unnamed")
    return f"[file: {name} ({part.mime})]"


def subtask_text(part: SubtaskPart) -> str:
    """``[subtask agent: description]`` followed by the subtask's prompt."""
    header = f"[subtask {part.agent}: {part.description}]"
    return f"{header}\n{part.prompt}" if part.prompt.strip() else header


def part_text(part: Part) -> str | None:
    """The text block a non-tool part renders as in a user message, or None when it renders as nothing."""
    if isinstance(part, TextPart):
        return None if part.ignored else part.text
    if isinstance(part, CompactionPart):
        return COMPACTION_PROMPT
    if isinstance(part, FilePart):
        return file_mention(part)
    if isinstance(part, SubtaskPart):
        return subtask_text(part)
    return None


# -- rendering -------------------------------------------------------------------------------------------


def _compaction_first(history: Sequence[MessageWithParts]) -> list[MessageWithParts]:
    """Move each completed compaction's verbatim tail to just after its summary."""
    order = list(history)
    moves = [
        (order[c.user_index], order[c.summary_index], order[c.tail_index])
        for c in completed_compactions(order)
        if c.tail_index is not None
    ]
    for user, summary, tail in moves:
        where = {id(message): index for index, message in enumerate(order)}
        start, boundary, end = where[id(tail)], where[id(user)], where[id(summary)]
        if start < boundary < end:
            order = order[:start] + order[boundary : end + 1] + order[start:boundary] + order[end + 1 :]
    return order


def _failed(message: MessageWithParts) -> bool:
    error = message.info.error
    if not error:
        return False
    if error.get("name") == _ABORTED:
        return not any(part.type not in ("step-start", "reasoning") for part in message.parts)
    return True


def _clean(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so the request body encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {_clean(str(key)): _clean_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean_json(item) for item in value]
    return value


def _text_block(text: str | None) -> list[Block]:
    return [{"type": "text", "text": _clean(text)}] if text and text.strip() else []


class Walk:
    """The one walk from stored messages to Messages API messages (the module rules, less the final trim).
    ``to_anthropic`` runs it as it is; the live request (``brutus.live.render``) overrides ``user`` and
    ``assistant`` to send recorded content back exactly. ``run()`` fills ``messages`` and, for each of them,
    ``opened_by``: the index in ``order`` (the history in the order it renders) of the entry that began it."""

    def __init__(self, history: Sequence[MessageWithParts]) -> None:
        self.order = _compaction_first(history)
        self.messages: list[dict[str, Any]] = []
        self.opened_by: list[int] = []
        self.tool_use_ids: set[str] = set()  # the ids taken so far: each is unique within the request

    def run(self) -> Walk:
        for position, message in enumerate(self.order):
            if message.info.role == "user":
                self._add(position, "user", self.user(message))
            elif (turn := self.assistant(message)) is not None:
                self._add(position, "assistant", turn[0])
                self._add(position, "user", turn[1])
        return self

    def user(self, message: MessageWithParts) -> list[Block]:
        """The blocks a user message renders as."""
        blocks: list[Block] = []
        for part in message.parts:
            blocks += _text_block(part_text(part))
        return blocks

    def assistant(self, message: MessageWithParts) -> tuple[list[Block], list[Block]] | None:
        """The blocks an assistant message renders as and the tool results of the user message after it; None
        when the message is left out."""
        if _failed(message):
            return None
        blocks: list[Block] = []
        results: list[Block] = []
        for part in message.parts:
            if isinstance(part, ToolPart):
                tool_use_id = self._tool_use_id(part)
                blocks.append(
                    {"type": "tool_use", "id": tool_use_id, "name": part.tool, "input": _clean_json(part.state.input)}
                )
                text, is_error = tool_result(part.state)
                result: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": _clean(text)}
                if is_error:
                    result["is_error"] = True
                results.append(result)
            elif not isinstance(part, CompactionPart):
                blocks += _text_block(part_text(part))
        return blocks, results

    def lead(self) -> bool:
        """Put a ``(continued)`` user message first when the messages start with the assistant; True if it did."""
        if not self.messages or self.messages[0]["role"] != "assistant":
            return False
        self.messages.insert(0, {"role": "user", "content": [{"type": "text", "text": PLACEHOLDER_USER_TEXT}]})
        self.opened_by.insert(0, -1)
        return True

    def _add(self, position: int, role: str, blocks: list[Block]) -> None:
        """Append ``blocks`` to the last message when it is ``role``'s (roles alternate), else begin one."""
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": role, "content": list(blocks)})
            self.opened_by.append(position)

    def _tool_use_id(self, part: ToolPart) -> str:
        """The call id with what Anthropic refuses replaced, made unique within the request."""
        base = _BAD_ID_CHARS.sub("_", part.call_id) or _BAD_ID_CHARS.sub("_", part.id or "") or "toolu"
        candidate, n = base, 1
        while candidate in self.tool_use_ids:
            n += 1
            candidate = f"{base}_{n}"
        self.tool_use_ids.add(candidate)
        return candidate


def _trim_final_assistant(turns: list[dict[str, Any]]) -> None:
    """The API refuses a final assistant text ending in whitespace; our text blocks are never blank, so a
    right-strip leaves them non-empty."""
    if turns and turns[-1]["role"] == "assistant":
        last = turns[-1]["content"][-1]
        if last["type"] == "text":
            last["text"] = last["text"].rstrip()


def to_anthropic(history: Sequence[MessageWithParts], *, system: str | None = None) -> dict[str, Any]:
    """``{"system": ..., "messages": [...]}`` for the Anthropic Messages API (see the module rules)."""
    walk = Walk(history).run()
    walk.lead()
    _trim_final_assistant(walk.messages)
    body: dict[str, Any] = {}
    if system:
        body["system"] = system
    body["messages"] = walk.messages
    return body


# -- validation ------------------------------------------------------------------------------------------


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_problems(where: str, block: Block) -> list[str]:
    text = block.get("text")
    if not isinstance(text, str) or not text.strip():
        return [f"{where}: text blocks must contain non-whitespace text"]
    if not _encodes(text):
        return [f"{where}: text is not valid UTF-8 (lone surrogate)"]
    return []


def _result_problems(where: str, block: Block) -> list[str]:
    problems: list[str] = []
    content = block.get("content")
    if isinstance(content, list):
        for j, inner in enumerate(content):
            if not isinstance(inner, dict) or inner.get("type") != "text":
                problems.append(f"{where}.content.{j}: only text blocks are rendered in tool results")
            else:
                problems += _text_problems(f"{where}.content.{j}", inner)
        empty = not content
    elif isinstance(content, str):
        empty = not content.strip()
        if not _encodes(content):
            problems.append(f"{where}: tool_result content is not valid UTF-8 (lone surrogate)")
    else:
        return [f"{where}: tool_result content must be a string or a list of blocks"]
    if empty:
        problems.append(f"{where}: tool_result content must not be empty")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        problems.append(f"{where}: is_error must be a boolean")
    return problems


def _block_problems(where: str, role: str, block: Any, ids: set[str]) -> list[str]:
    if not isinstance(block, dict):
        return [f"{where}: a content block must be an object"]
    kind = block.get("type")
    allowed = {"user": ("text", "tool_result"), "assistant": ("text", "tool_use")}[role]
    if kind not in allowed:
        return [f"{where}: a {role} message cannot hold a {kind!r} block"]
    if kind == "text":
        return _text_problems(where, block)
    if kind == "tool_result":
        return _result_problems(where, block)
    problems = []
    tool_use_id = block.get("id")
    if not isinstance(tool_use_id, str) or not _TOOL_USE_ID.match(tool_use_id):
        problems.append(f"{where}: tool_use id {tool_use_id!r} must match [A-Za-z0-9_-]+")
    elif tool_use_id in ids:
        problems.append(f"{where}: tool_use id {tool_use_id!r} is not unique")
    ids.add(str(tool_use_id))
    if not isinstance(block.get("name"), str) or not block["name"]:
        problems.append(f"{where}: tool_use needs a name")
    if not isinstance(block.get("input"), dict):
        problems.append(f"{where}: tool_use input must be an object")
    elif not _encodes(json.dumps(block["input"], ensure_ascii=False)):
        problems.append(f"{where}: tool_use input is not valid UTF-8 (lone surrogate)")
    return problems


def _pairing_problems(messages: list[Any]) -> list[str]:
    problems: list[str] = []
    for i, message in enumerate(messages):
        blocks = message.get("content") if isinstance(message, dict) else None
        if not isinstance(blocks, list):
            continue
        if message.get("role") == "user":
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
                problems.append(f"messages.{i}: tool_result blocks must come first in the content")
            previous = messages[i - 1].get("content") if i > 0 and isinstance(messages[i - 1], dict) else []
            previous_ids = {b.get("id") for b in previous if isinstance(b, dict) and b.get("type") == "tool_use"}
            for b in results:
                if b.get("tool_use_id") not in previous_ids:
                    problems.append(f"messages.{i}: tool_result {b.get('tool_use_id')!r} answers no tool_use "
                                    "in the previous message")
            continue
        wanted = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not wanted:
            continue
        following = messages[i + 1].get("content") if i + 1 < len(messages) else None
        answered = [b.get("tool_use_id") for b in following or [] if isinstance(b, dict)
                    and b.get("type") == "tool_result"]
        for tool_use_id in wanted:
            if answered.count(tool_use_id) != 1:
                problems.append(f"messages.{i}: tool_use {tool_use_id!r} needs exactly one tool_result in "
                                f"the next message (found {answered.count(tool_use_id)})")
    return problems


def anthropic_problems(body: Any, *, allow_empty: bool = False) -> list[str]:
    """Every way ``body`` breaks the Messages API rules ``to_anthropic`` promises; [] when it keeps them all."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return ["the body must be an object with a 'messages' list"]
    problems: list[str] = []
    if set(body) - {"system", "messages"}:
        problems.append(f"unexpected keys {sorted(set(body) - {'system', 'messages'})}")
    if "system" in body and not (isinstance(body["system"], str) and body["system"]):
        problems.append("system must be a non-empty string when present")
    messages = body["messages"]
    if not messages and not allow_empty:
        problems.append("messages must not be empty")
    ids: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"messages.{i}: role must be 'user' or 'assistant', not {role!r}")
            continue
        if i == 0 and role != "user":
            problems.append("messages.0: the first message must be a user message")
        if i > 0 and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == role:
            problems.append(f"messages.{i}: roles must alternate (two {role} messages in a row)")
        content = message.get("content")
        if not isinstance(content, list) or not content:
            problems.append(f"messages.{i}: content must be a non-empty list of blocks")
            continue
        for j, block in enumerate(content):
            problems += _block_problems(f"messages.{i}.content.{j}", role, block, ids)
    problems += _pairing_problems(messages)
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and isinstance(last.get("content"), list):
        final = last["content"][-1] if last["content"] else None
        if isinstance(final, dict) and final.get("type") == "text" and isinstance(final.get("text"), str) \
                and final["text"] != final["text"].rstrip():
            problems.append("final assistant content cannot end with trailing whitespace")
    return problems


def validate_anthropic(body: Any, *, allow_empty: bool = False) -> None:
    """Raise ``InvalidInput`` listing every problem ``anthropic_problems`` finds in ``body``."""
    problems = anthropic_problems(body, allow_empty=allow_empty)
    if problems:
        raise InvalidInput("invalid Anthropic request: " + "; ".join(problems))
