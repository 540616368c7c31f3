"""Building one brutus session from a Claude Code session's lines, in file order (the rules are stated in
``brutus.importers.claude_code``): message drafts, parts from content blocks, tool results, compactions,
and the values (ids, times, usage) they are made of.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import ValidationError

from ..errors import ImportFormatError
from ..models import (
    MAX_COUNT,
    CompactionPart,
    FilePart,
    Message,
    MessageWithParts,
    Part,
    ReasoningPart,
    TextPart,
    TokenCounts,
    ToolPart,
)
from ..pricing import cost_of
from .fields import JSON, model_error

__all__ = ["NAMESPACE", "SessionBuilder", "ToolResult", "blocks", "derived_id", "entry_time", "line_uuid", "prompt_title"]

NAMESPACE = "claude_code"
PROVIDER = "anthropic"
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "refusal": "content-filter",
    "pause_turn": "other",
}
_ID = re.compile(r"[A-Za-z0-9_\-.:]{1,64}")
_MANUAL_COMPACT = "<command-name>/compact</command-name>"
_TITLE_CHARS = 80
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class ToolResult:
    """A tool_result block, the line that carried it and that line's number."""

    block: JSON
    line: JSON
    number: int


@dataclass
class _Draft:
    """A message being assembled from one or more lines."""

    id: str
    role: str
    created: int
    fields: JSON = field(default_factory=dict)
    metadata: JSON = field(default_factory=dict)
    parts: list[Part] = field(default_factory=list)
    usage: JSON | None = None
    stop_reason: str | None = None
    called_tools: bool = False
    completed: int | None = None


class SessionBuilder:
    """Turns a session's lines, in order, into message drafts."""

    def __init__(self, *, name: str, tag: str, results: dict[str, ToolResult]) -> None:
        self.name = name
        self.tag = tag
        self.results = results
        self.drafts: list[_Draft] = []
        self.by_message_id: dict[str, _Draft] = {}
        self.last_user: str | None = None
        self.boundary: _Draft | None = None  # a compaction waiting for its summary line
        self.recent_compaction: CompactionPart | None = None  # until the next assistant line
        self.pending_notices: list[JSON] = []
        self.first_prompt: str | None = None

    def add(self, number: int, entry: JSON) -> None:
        where = f"{self.name}: line {number}"
        kind = entry["type"]
        if kind == "system":
            if entry.get("subtype") == "compact_boundary":
                self._boundary(number, entry, where)
            else:
                self._notice(entry)
        elif kind == "user":
            if entry.get("isCompactSummary"):
                self._summary(number, entry, where)
            else:
                self._user(number, entry, where)
        else:
            self._assistant(number, entry, where)

    def title(self) -> str | None:
        return prompt_title(self.first_prompt)

    def history(self, *, session_id: str) -> list[MessageWithParts]:
        self._close_boundary()
        return [self._message(draft, session_id) for draft in self.drafts]

    # -- lines ------------------------------------------------------------------------------------------

    def _user(self, number: int, entry: JSON, where: str) -> None:
        uuid = line_uuid(entry, number)
        synthetic = bool(entry.get("isMeta"))
        found = (self._user_block(block, uuid, index, synthetic) for index, block in enumerate(_content(entry, where)))
        parts = [part for part in found if part is not None]
        if not parts:
            return  # a line of tool results only: they complete the assistant's tool parts
        text = next((p.text for p in parts if isinstance(p, TextPart)), "")
        if self.recent_compaction is not None and _MANUAL_COMPACT in text:
            self.recent_compaction.auto = False
        if not synthetic and self.first_prompt is None and not text.lstrip().startswith("<"):
            self.first_prompt = text
        self._close_boundary()
        draft = self._draft("user", uuid, entry, where)
        draft.fields["synthetic"] = synthetic
        draft.parts = parts
        self.last_user = draft.id

    def _user_block(self, block: JSON, uuid: str, index: int, synthetic: bool) -> Part | None:
        kind = block.get("type")
        part_id = self._id("prt", uuid, str(index))
        if kind == "tool_result":
            return None
        if kind == "text" and isinstance(block.get("text"), str):
            return TextPart(id=part_id, text=block["text"], synthetic=synthetic)
        source = block.get("source")
        if kind in ("image", "document") and isinstance(source, dict):
            mime = _str(source.get("media_type")) or "application/octet-stream"
            if source.get("type") == "base64" and isinstance(source.get("data"), str):
                return FilePart(id=part_id, mime=mime, url=f"data:{mime};base64,{source['data']}")
            if isinstance(source.get("url"), str):
                return FilePart(id=part_id, mime=mime, url=source["url"])
        return TextPart(id=part_id, text="", ignored=True, metadata={NAMESPACE: {"block": block}})

    def _assistant(self, number: int, entry: JSON, where: str) -> None:
        message = entry.get("message")
        if not isinstance(message, dict):
            raise ImportFormatError(f"{where}: an assistant line needs a 'message' object")
        content = _content(entry, where)
        uuid = line_uuid(entry, number)
        key = message["id"] if isinstance(message.get("id"), str) else uuid
        self._close_boundary()
        self.recent_compaction = None
        draft = self.by_message_id.get(key)
        if draft is None:
            draft = self._draft("assistant", uuid, entry, where)
            self.by_message_id[key] = draft
            draft.fields.update(parent_id=self.last_user, model_id=_str(message.get("model")), provider_id=PROVIDER)
            draft.metadata["message"] = {k: v for k, v in message.items() if k != "content"}
        else:
            draft.metadata.setdefault("uuids", [draft.metadata.get("uuid")]).append(uuid)
        for index, block in enumerate(content):
            draft.parts.append(self._assistant_block(draft, block, uuid, index, entry, where))
        if isinstance(message.get("usage"), dict):
            draft.usage = draft.metadata["message"]["usage"] = message["usage"]
        if isinstance(message.get("stop_reason"), str):
            draft.stop_reason = draft.metadata["message"]["stop_reason"] = message["stop_reason"]
        draft.completed = entry_time(entry, where)

    def _assistant_block(self, draft: _Draft, block: JSON, uuid: str, index: int, entry: JSON, where: str) -> Part:
        kind = block.get("type")
        part_id = self._id("prt", uuid, str(index))
        if kind == "text" and isinstance(block.get("text"), str):
            return TextPart(id=part_id, text=block["text"])
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            signature = {"signature": block["signature"]} if "signature" in block else {}
            return ReasoningPart(id=part_id, text=block["thinking"], metadata={"anthropic": signature})
        if kind == "redacted_thinking":
            return ReasoningPart(id=part_id, text="", metadata={"anthropic": {"redactedData": block.get("data")}})
        if kind == "tool_use" and isinstance(block.get("id"), str):
            draft.called_tools = True
            return self._tool(block, entry, where)
        return TextPart(id=part_id, text="", ignored=True, metadata={NAMESPACE: {"block": block}})

    def _tool(self, block: JSON, entry: JSON, where: str) -> ToolPart:
        call_id = block["id"]
        started = entry_time(entry, where)
        state: JSON = {"status": "running", "input": block.get("input") or {}, "time": {"start": started}}
        result = self.results.get(call_id)
        if result is not None:
            output, raw = _result_text(result.block.get("content"))
            extra: JSON = {"result_uuid": result.line.get("uuid")}
            if "toolUseResult" in result.line:
                extra["tool_use_result"] = result.line["toolUseResult"]
            if raw is not None:
                extra["content"] = raw
            state["time"]["end"] = max(started, entry_time(result.line, f"{self.name}: line {result.number}"))
            state["metadata"] = {NAMESPACE: extra}
            if result.block.get("is_error"):
                state.update(status="error", error=output or "(the tool reported an error without a message)")
            else:
                state.update(status="completed", output=output)
        try:
            return ToolPart(id=self._id("prt", call_id), call_id=call_id, tool=_str(block.get("name")) or "unknown", state=state)
        except ValidationError as exc:
            raise ImportFormatError(model_error(exc, f"{where}: tool_use {call_id}")) from None

    def _boundary(self, number: int, entry: JSON, where: str) -> None:
        self._close_boundary()
        meta = entry.get("compactMetadata") if isinstance(entry.get("compactMetadata"), dict) else {}
        draft = self._compaction(line_uuid(entry, number), entry, where, auto=meta.get("trigger") != "manual")
        self.boundary = draft

    def _summary(self, number: int, entry: JSON, where: str) -> None:
        uuid = line_uuid(entry, number)
        content = _content(entry, where)
        text = "\n".join(b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str))
        user = self.boundary
        self.boundary = None
        if user is None:
            marker = {"compact_summary_uuid": uuid}
            user = self._compaction(uuid, marker, where, auto=True, suffix="compaction", created=entry_time(entry, where))
        summary = self._draft("assistant", uuid, entry, where)
        summary.fields.update(parent_id=user.id, summary=True, finish="stop", mode="compaction", agent="compaction")
        summary.parts = [TextPart(id=self._id("prt", uuid, "summary"), text=text)]
        summary.completed = summary.created

    def _compaction(
        self, uuid: str, entry: JSON, where: str, *, auto: bool, suffix: str | None = None, created: int | None = None
    ) -> _Draft:
        draft = self._draft("user", uuid, entry, where, suffix=suffix, created=created)
        part = CompactionPart(id=self._id("prt", uuid, "compaction"), auto=auto)
        draft.parts = [part]
        self.recent_compaction = None if entry.get("compactMetadata") else part
        self.last_user = draft.id
        return draft

    def _close_boundary(self) -> None:
        """A boundary line no summary followed: its summary message is written empty, so it still counts."""
        if self.boundary is None:
            return
        user, self.boundary = self.boundary, None
        summary = _Draft(id=self._id("msg", user.metadata.get("uuid", user.id), "summary"), role="assistant", created=user.created)
        summary.fields.update(parent_id=user.id, summary=True, finish="stop", mode="compaction", agent="compaction")
        summary.metadata = {"summary_missing": True}
        summary.completed = user.created
        self.drafts.append(summary)

    def _notice(self, entry: JSON) -> None:
        notice = {k: v for k, v in entry.items() if k in ("uuid", "timestamp", "content", "level", "subtype")}
        if self.drafts:
            self.drafts[-1].metadata.setdefault("notices", []).append(notice)
        else:
            self.pending_notices.append(notice)

    # -- drafts -----------------------------------------------------------------------------------------

    def _draft(
        self, role: str, uuid: str, entry: JSON, where: str, *, suffix: str | None = None, created: int | None = None
    ) -> _Draft:
        keep = {k: v for k, v in entry.items() if k not in ("message", "toolUseResult")}
        draft = _Draft(
            id=self._id("msg", uuid, *([suffix] if suffix else [])),
            role=role,
            created=created if created is not None else entry_time(entry, where),
            metadata=keep,
        )
        if self.pending_notices:
            draft.metadata["notices"], self.pending_notices = self.pending_notices, []
        self.drafts.append(draft)
        return draft

    def _id(self, prefix: str, *keys: str) -> str:
        return derived_id(prefix, self.tag, *keys)

    def _message(self, draft: _Draft, session_id: str) -> MessageWithParts:
        fields = dict(draft.fields)
        if draft.role == "assistant" and not fields.get("summary"):
            reason = draft.stop_reason
            fields["finish"] = FINISH.get(reason, reason) if reason else "tool-calls" if draft.called_tools else "stop"
            fields["tokens"] = _tokens(draft.usage)
            # Claude Code records no cost: priced from the usage at Anthropic's published prices (0 when unknown)
            model = fields.get("model_id")
            fields["cost"] = cost_of(model, fields["tokens"]) if isinstance(model, str) else 0.0
        try:
            message = Message(
                id=draft.id,
                session_id=session_id,
                role=draft.role,  # type: ignore[arg-type]
                metadata={NAMESPACE: draft.metadata} if draft.metadata else None,
                time={"created": draft.created, "completed": draft.completed},
                **fields,
            )
            return MessageWithParts(info=message, parts=draft.parts)
        except ValidationError as exc:
            raise ImportFormatError(model_error(exc, f"{self.name}: message {draft.id}")) from None


# -- values ------------------------------------------------------------------------------------------------


def prompt_title(prompt: str | None) -> str | None:
    """A session's title from its first prompt: the prompt's first line, cut to 80 characters."""
    if prompt is None:
        return None
    line = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return line[:_TITLE_CHARS] or None


def derived_id(prefix: str, *keys: str) -> str:
    """``prefix_key1_key2…`` when that is a valid brutus id, else ``prefix_`` and a digest of the keys."""
    candidate = "_".join((prefix, *keys))
    if _ID.fullmatch(candidate):
        return candidate
    return f"{prefix}_{hashlib.sha256('/'.join(keys).encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def line_uuid(entry: JSON, number: int) -> str:
    """The key a line's message and part ids derive from: its uuid, else its line number."""
    uuid = entry.get("uuid")
    return uuid if isinstance(uuid, str) and uuid else f"line{number}"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def entry_time(entry: JSON, where: str) -> int:
    """A line's ``timestamp`` in epoch ms (``ImportFormatError`` when it has no valid ISO timestamp)."""
    stamp = entry.get("timestamp")
    try:
        moment = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise ImportFormatError(f"{where}: no valid ISO timestamp ({stamp!r})")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def blocks(entry: JSON) -> list[JSON]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _content(entry: JSON, where: str) -> list[JSON]:
    """A line's content blocks (a string is one text block)."""
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise ImportFormatError(f"{where}: message.content must be a string or a list of blocks")


def _result_text(content: Any) -> tuple[str, list | None]:
    """A tool_result's text, and its raw blocks when the text alone does not say everything."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return content, None
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        text = "\n".join(t for t in texts if isinstance(t, str))
        only_text = len(texts) == len(content) and all(isinstance(t, str) for t in texts)
        return text, None if only_text else content
    return str(content), [content]


def _tokens(usage: JSON | None) -> TokenCounts:
    usage = usage or {}

    def count(key: str) -> int:
        value = usage.get(key)  # a count no column can hold is as unusable as a negative one
        return value if isinstance(value, int) and 0 <= value <= MAX_COUNT else 0

    return TokenCounts(
        input=count("input_tokens"),
        output=count("output_tokens"),
        cache={"read": count("cache_read_input_tokens"), "write": count("cache_creation_input_tokens")},
    )
