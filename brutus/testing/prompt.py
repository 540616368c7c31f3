"""What the model reads: canonical JSON, the token count, and the prompt as an ordered list of positions.

Rules:

- Canonical JSON is ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` of the
  value with every ``cache_control`` key, and every key whose value is ``null``, removed at any depth. JSON
  formatting and key order never matter ("the values do"); moving a cache breakpoint is not an edit
  (preserved-thinking page, "What counts as an edit"); ``"citations": null`` is the same as no citations.
- A string ``content`` (or ``system``) is the same as one text block holding it; an empty string is no block.
- Token count (deterministic, documented, not the real tokenizer): a value costs
  ``ceil(len(canonical_json(value).encode("utf-8")) / 4)`` tokens, a block's opaque signature (``signature``
  of thinking and compaction blocks, ``data`` of redacted thinking) left out. The input of a request is the
  sum over the positions of its view: each tool definition, each ``system`` block, and each content block of
  each message the model reads. Output tokens are the same sum over the response's content blocks.
- The view is the request as the model reads it, in prompt order ``tools`` → ``system`` → ``messages``:
  content before the start position (the most recent compaction block: everything before it is dropped),
  thinking blocks dropped by the binding check, and turn-scoped ``role: "system"`` messages already cleared
  (``clear_at: "next_user_message"`` with a later ``user`` message) are left out; they cost no tokens.
- Each position records its explicit breakpoint (``cache_control`` on the block, or on a block nested in a
  ``tool_result``'s content) and whether it can take the automatic breakpoint (not a thinking block, not an
  empty text block).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def strip_cache_control(value: Any) -> Any:
    """A copy of ``value`` without any ``cache_control`` key, nor any key whose value is null, at any depth."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """Canonical JSON of ``value`` without its ``cache_control`` keys."""
    return json.dumps(strip_cache_control(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(*parts: str) -> str:
    """SHA-256 (hex) of the parts, joined by a separator no JSON text contains unescaped."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


_OPAQUE = {"thinking": "signature", "redacted_thinking": "data", "compaction": "signature"}


def token_count(value: Any) -> int:
    """The fake's token count of one value: ceil(UTF-8 bytes of its canonical JSON / 4), a block's signature
    (``signature`` of thinking and compaction blocks, ``data`` of redacted thinking) left out."""
    if isinstance(value, dict) and value.get("type") in _OPAQUE:
        value = {k: v for k, v in value.items() if k != _OPAQUE[value["type"]]}
    return math.ceil(len(canonical(value).encode("utf-8")) / 4)


def blocks_of(content: Any) -> list[Any]:
    """A message's (or ``system``'s) content as a list of blocks: a string is one text block."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return content
    return []


def cache_ttl(block: Any) -> str | None:
    """The TTL of the breakpoint on this block, or None: its own ``cache_control`` or one nested in a
    ``tool_result``'s content (the breakpoint then sits at the ``tool_result``)."""
    if not isinstance(block, dict):
        return None
    ttls = []
    if isinstance(block.get("cache_control"), dict):
        ttls.append(block["cache_control"].get("ttl") or "5m")
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        ttls += [(b["cache_control"].get("ttl") or "5m") for b in block["content"]
                 if isinstance(b, dict) and isinstance(b.get("cache_control"), dict)]
    if not ttls:
        return None
    return "1h" if "1h" in ttls else "5m"


@dataclass
class Position:
    """One block of the prompt as the model reads it."""

    segment: str  # "tools", "system" or "messages"
    path: str  # where it is in the request: "tools.0", "system.1", "messages.3.content.2"
    element: str  # canonical JSON hashed for the cache (role and message start included for messages)
    tokens: int
    ttl: str | None  # explicit breakpoint TTL on this block
    kind: str  # block type ("tool" for a tool definition)
    auto_eligible: bool  # can carry the automatic (top-level) breakpoint


def cleared_system_messages(messages: list[Any]) -> set[int]:
    """Indexes of turn-scoped system messages that a later ``user`` message has cleared."""
    cleared: set[int] = set()
    for i, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "system" and message.get("clear_at") == "next_user_message":
            if any(isinstance(m, dict) and m.get("role") == "user" for m in messages[i + 1:]):
                cleared.add(i)
    return cleared


def _eligible(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in THINKING_TYPES:
        return False
    return not (block.get("type") == "text" and not str(block.get("text", "")).strip())


def build_view(
    body: dict[str, Any],
    *,
    start: tuple[int, int] = (0, 0),
    dropped: Iterable[tuple[int, int]] = (),
    messages: list[Any] | None = None,
) -> list[Position]:
    """The request's prompt as positions in prompt order (see the module rules)."""
    dropped = set(dropped)
    view: list[Position] = []
    for t, tool in enumerate(body.get("tools") or []):
        view.append(Position("tools", f"tools.{t}", canonical(tool), token_count(tool), cache_ttl(tool), "tool", True))
    for s, block in enumerate(blocks_of(body.get("system"))):
        view.append(Position("system", f"system.{s}", canonical(block), token_count(block), cache_ttl(block),
                             str(block.get("type")) if isinstance(block, dict) else "?", _eligible(block)))
    view.extend(message_positions(body.get("messages") if messages is None else messages, start, dropped))
    return view


def message_positions(messages: Any, start: tuple[int, int], dropped: set[tuple[int, int]]) -> Iterator[Position]:
    messages = messages if isinstance(messages, list) else []
    cleared = cleared_system_messages(messages)
    for i, message in enumerate(messages):
        if i < start[0] or i in cleared or not isinstance(message, dict):
            continue
        first = True
        for j, block in enumerate(blocks_of(message.get("content"))):
            if (i == start[0] and j < start[1]) or (i, j) in dropped:
                continue
            element = json.dumps({"role": message.get("role"), "first": first, "block": canonical(block)}, sort_keys=True)
            first = False
            kind = str(block.get("type")) if isinstance(block, dict) else "?"
            yield Position("messages", f"messages.{i}.content.{j}", element, token_count(block), cache_ttl(block),
                           kind, _eligible(block))


def total_tokens(view: Iterable[Position]) -> int:
    return sum(p.tokens for p in view)
