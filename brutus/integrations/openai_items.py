"""Responses-API items ↔ brutus messages and parts, for ``BrutusSession`` (pure: no store, no SDK import).

Rules:

- Each item is one part, except a ``function_call_output`` that answers an open call: it completes that
  call's tool part instead. A ``message`` item is a text part (user, system and developer messages are user
  messages, the role kept in the message's metadata when it is not "user"), ``reasoning`` a reasoning part,
  ``function_call`` a ``pending`` tool part (its JSON arguments as the input). Any other item (a hosted tool
  call, an output nothing is waiting for, a type brutus does not know) is an ignored text part: opaque.
- A user message item starts a user message. Other items join the assistant message being written (the
  session's last message, started after the last user message or tool output), else start one. So a model
  response is one assistant message, and its calls' outputs close it.
- Message and part ids are derived from the session's tag and the item's seq: ``msg_<tag>_<seq of the first
  item>``, ``prt_<tag>_<seq>`` (a branch's copied items keep the ids of the fork's copies). The items
  themselves are kept exactly elsewhere (``transcripts``, with the ids each went into): parts are what brutus
  shows, prunes and compacts.
- Back to items (``to_items``): a message of the session that came from no item (a compaction's "Continue",
  a hand-written one) becomes input items: its text as a message, its tool parts as a call and its output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..importers.claude_code_builder import prompt_title
from ..models import MessageWithParts, Part, ReasoningPart, TextPart, ToolPart
from .transcripts import JSON

__all__ = [
    "AddPlan",
    "Context",
    "NAMESPACE",
    "build_messages",
    "kind",
    "output_text",
    "part_for",
    "plan_add",
    "summary_item",
    "title",
    "to_items",
]

NAMESPACE = "openai_agents"
Kind = Literal["user", "assistant", "call", "output", "other"]
_RUN = ("assistant", "call", "other")  # kinds that make an assistant message
_USER_ROLES = ("user", "system", "developer")


def kind(item: JSON) -> Kind:
    """What an item is to brutus (see the rules)."""
    item_type, role = item.get("type"), item.get("role")
    if item_type in (None, "message") and role in _USER_ROLES:
        return "user"
    if item_type in (None, "message") and role == "assistant" or item_type == "reasoning":
        return "assistant"
    if item_type == "function_call" and isinstance(item.get("call_id"), str):
        return "call"
    if item_type == "function_call_output" and isinstance(item.get("call_id"), str):
        return "output"
    return "other"


@dataclass(frozen=True)
class Context:
    """Where the session stands before an ``add_items``: the assistant message still open (the session's
    last message, its last item not a user message or a tool output), the last user message, and the calls
    outside the batch that outputs in it answer (call id → (part id, message id), open calls only)."""

    open_message: str | None = None
    last_user: str | None = None
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class AddPlan:
    """The store calls an ``add_items`` makes, and the ids each item went into (its entry's columns)."""

    new_messages: list[JSON] = field(default_factory=list)  # for append_messages: {"info", "parts"}
    parts: list[tuple[str, Part]] = field(default_factory=list)  # appended to the open message
    calls_added: bool = False  # the open message now calls tools: its finish becomes tool-calls
    completions: list[tuple[str, str]] = field(default_factory=list)  # (tool part id, output) of earlier calls
    columns: list[JSON] = field(default_factory=list)


def plan_add(context: Context, items: list[tuple[int, JSON]], *, tag: str) -> AddPlan:
    """Where each item goes (``items``: (seq, item), seqs as they will be stored)."""
    plan = AddPlan()
    open_message, last_user = context.open_message, context.last_user
    new: dict[str, JSON] = {}
    open_calls = dict(context.calls)
    for seq, item in items:
        item_kind = kind(item)
        call_id = item.get("call_id") if item_kind in ("call", "output") else None
        if item_kind == "output" and call_id in open_calls:
            part_id, message_id = open_calls.pop(call_id)
            output = output_text(item)
            if message_id in new:
                _complete(new[message_id], part_id, output)
            else:
                plan.completions.append((part_id, output))
            plan.columns.append({"call_id": call_id, "message_id": message_id, "part_id": part_id})
            open_message = None
            continue
        part = part_for(item, f"prt_{tag}_{seq}")
        if item_kind == "user":
            message_id = f"msg_{tag}_{seq}"
            new[message_id] = _message(message_id, "user", item, None, part)
            last_user, open_message = message_id, None
        elif open_message is None or item_kind == "output":  # an output nothing waits for: opaque, after it
            message_id = f"msg_{tag}_{seq}"
            new[message_id] = _message(message_id, "assistant", item, last_user, part)
            open_message = message_id if item_kind != "output" else None
        else:
            message_id = open_message
            if message_id in new:
                new[message_id]["parts"].append(part)
            else:
                plan.parts.append((message_id, part))
                plan.calls_added = plan.calls_added or item_kind == "call"
        if item_kind == "call":
            open_calls[call_id] = (part.id, message_id)  # type: ignore[index]
        plan.columns.append({"call_id": call_id, "message_id": message_id, "part_id": part.id})
    plan.new_messages = [_settled(message) for message in new.values()]
    return plan


def build_messages(rows: list[tuple[int, str, str | None, JSON]], *, tag: str, parent: str | None) -> list[JSON]:
    """The messages stored items make again, for ``append_messages``, under the ids they had (``rows``: (seq,
    message id, part id, item) in seq order, the items of whole messages; ``parent``: the last user message
    before them)."""
    messages: dict[str, JSON] = {}
    for seq, message_id, part_id, item in rows:
        message = messages.get(message_id)
        if message is not None and kind(item) == "output" and any(p.id == part_id for p in message["parts"]):
            _complete(message, part_id or "", output_text(item))  # it answers a call of its message
            continue
        part = part_for(item, part_id or f"prt_{tag}_{seq}")
        if message is not None:
            message["parts"].append(part)
        elif kind(item) == "user":
            messages[message_id] = _message(message_id, "user", item, None, part)
            parent = message_id
        else:
            messages[message_id] = _message(message_id, "assistant", item, parent, part)
    return [_settled(m) for m in messages.values()]  # in the order of their first items: the messages' order


def _message(message_id: str, role: str, item: JSON, parent: str | None, part: Part) -> JSON:
    info: JSON = {"id": message_id, "role": role, "parent_id": parent}
    if role == "user" and item.get("role") != "user":
        info["metadata"] = {NAMESPACE: {"role": item.get("role")}}
    return {"info": info, "parts": [part]}


def _settled(message: JSON) -> JSON:
    """An assistant message's finish: it called tools, or it answered."""
    if message["info"]["role"] == "assistant":
        message["info"]["finish"] = "tool-calls" if any(p.type == "tool" for p in message["parts"]) else "stop"
    return message


def _complete(message: JSON, part_id: str, output: str) -> None:
    parts = message["parts"]
    for index, part in enumerate(parts):
        if part.id == part_id and part.type == "tool" and part.state.status == "pending":
            state = part.state.model_copy(update={"status": "completed", "output": output})
            parts[index] = part.model_copy(update={"state": state})


# -- items → parts -----------------------------------------------------------------------------------------


def part_for(item: JSON, part_id: str) -> Part:
    item_kind = kind(item)
    if item_kind in ("user", "assistant") and item.get("type") != "reasoning":
        return TextPart(id=part_id, text=_content_text(item.get("content")))
    if item_kind == "assistant":
        texts = _texts(item.get("summary")) or _texts(item.get("content"))
        return ReasoningPart(id=part_id, text="\n".join(texts))
    if item_kind == "call":
        name = item.get("name")
        return ToolPart(
            id=part_id,
            call_id=item["call_id"],
            tool=name if isinstance(name, str) and name else "unknown",
            state={"status": "pending", "input": _arguments(item.get("arguments"))},
        )
    kept = {"type": item.get("type") if isinstance(item.get("type"), str) else None}
    return TextPart(id=part_id, text="", ignored=True, metadata={NAMESPACE: kept})


def output_text(item: JSON) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(_texts(output))
    return json.dumps(output, ensure_ascii=False)


def title(items: list[JSON]) -> str | None:
    """A session's title: the first line of its first user message's text (not a system or developer one)."""
    first = next((item for item in items if kind(item) == "user" and item.get("role") == "user"), None)
    return None if first is None else prompt_title(_content_text(first.get("content")))


def _arguments(arguments: Any) -> JSON:
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"arguments": arguments}


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(_texts(content))


def _texts(blocks: Any) -> list[str]:
    if not isinstance(blocks, list):
        return []
    found = []
    for block in blocks:
        if isinstance(block, dict):
            text = block.get("text") if isinstance(block.get("text"), str) else block.get("refusal")
            if isinstance(text, str):
                found.append(text)
    return found


# -- messages → items ----------------------------------------------------------------------------------------


def summary_item(text: str) -> JSON:
    """A compaction's summary as the input message that opens the view."""
    return {"type": "message", "role": "user", "content": text}


def to_items(message: MessageWithParts) -> list[JSON]:
    """Input items for a message that came from no item."""
    role = message.info.role
    items: list[JSON] = []
    for part in message.parts:
        if part.type == "text" and not part.ignored and part.text:
            items.append({"type": "message", "role": role, "content": part.text})
        elif part.type == "tool":
            arguments = json.dumps(part.state.input, ensure_ascii=False)
            items.append({"type": "function_call", "call_id": part.call_id, "name": part.tool, "arguments": arguments})
            if part.state.status in ("completed", "error"):
                output = part.state.output if part.state.status == "completed" else part.state.error
                items.append({"type": "function_call_output", "call_id": part.call_id, "output": output or ""})
    return items
