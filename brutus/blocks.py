"""What a Messages API response and a tool result become in the store, and back.

Rules:

- A response is kept whole, exactly as received (``to_dict()`` of the SDK object: the fields the API sent,
  nothing added), in the assistant message's ``metadata["anthropic"]["response"]``, together with the hash
  of the request prefix that produced it (``prefix``). Rendering sends its ``content`` back from there, so
  every block returns deep-equal: thinking signatures, redacted data, citations, server tool blocks,
  ``compaction`` blocks and block types brutus does not know.
- Beside it, the typed parts SQL, prune and stats read: ``text`` → a text part, ``thinking`` /
  ``redacted_thinking`` → a reasoning part, ``tool_use`` → a pending tool part (call id, name, input). Server
  tool blocks, compaction blocks and unknown blocks have no part of their own: they live in the response.
- Usage becomes the message's token columns (input, output, cache read / write); its cost is summed over
  ``usage.iterations`` when the API reports them (a compaction iteration is billed but not in the top-level
  usage), else taken from the top-level usage.
- A ``max_tokens`` stop that cut a ``tool_use`` block short discards that block (seed 000): it is listed in
  ``discarded`` and neither rendered nor given a tool part.
- A tool result is kept on its tool part: the output text (a string result, or the text of a block result)
  for estimates, prune and search, and the exact ``tool_result`` block beside it in the state's metadata
  (``metadata["anthropic"]["tool_result"]``) with its ``content`` left out when it is the output string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .errors import InvalidInput
from .models import CacheTokens, TokenCounts
from .pricing import usage_cost

__all__ = [
    "BINDING_BETA",
    "COMPACTION_BETA",
    "KEY",
    "RecordedResponse",
    "ToolResult",
    "canonical",
    "json_copy",
    "parse_response",
    "parse_tool_result",
    "recorded_response",
    "response_dict",
    "stored_tool_result",
]

BINDING_BETA = "thinking-binding-controls-2026-08-01"  # the thinking controls' beta (``drop_block``)
COMPACTION_BETA = "compact-2026-09-04"  # the API's on-demand compaction; its blocks need it to come back

KEY = "anthropic"  # the metadata key brutus keeps provider records under
_OUTPUT = "$output"  # a stored tool_result whose content is the tool part's output string


# json.dumps builds a new encoder per call when given options; one built once encodes the same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical(value: Any) -> bytes:
    """The bytes two equal JSON values share: sorted keys, no whitespace, UTF-8 (lone surrogates kept)."""
    return _CANONICAL(value).encode("utf-8", "surrogatepass")


def response_dict(response: Any) -> dict[str, Any]:
    """A response as the API sent it: an SDK ``Message`` / ``BetaMessage`` (its ``to_dict()``, which keeps
    exactly the fields received) or the dict itself."""
    if isinstance(response, Mapping):
        data = dict(response)
    elif hasattr(response, "to_dict"):
        data = response.to_dict(warnings=False)
    else:
        raise InvalidInput(f"record() takes an anthropic Message / BetaMessage or its dict, not {type(response).__name__}")
    if data.get("type", "message") != "message" or data.get("role", "assistant") != "assistant":
        raise InvalidInput("record() takes an assistant message response")
    if not isinstance(data.get("content"), list) or not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in data["content"]):
        raise InvalidInput("the response has no list of content blocks")
    return json.loads(canonical(data))  # a deep copy, and proof it is JSON


class RecordedResponse(NamedTuple):
    """A parsed response: the message fields, its parts, and the metadata that keeps it whole."""

    model: str | None
    finish: str
    tokens: TokenCounts
    cost: float
    parts: list[dict[str, Any]]
    metadata: dict[str, Any]


def _tokens(usage: Mapping[str, Any]) -> TokenCounts:
    return TokenCounts(
        input=int(usage.get("input_tokens") or 0),
        output=int(usage.get("output_tokens") or 0),
        cache=CacheTokens(
            read=int(usage.get("cache_read_input_tokens") or 0),
            write=int(usage.get("cache_creation_input_tokens") or 0),
        ),
    )


def _truncated_tool(data: Mapping[str, Any]) -> list[int]:
    """The index of a ``tool_use`` block a ``max_tokens`` stop cut short (the last block), else nothing."""
    content = data["content"]
    if data.get("stop_reason") == "max_tokens" and content and content[-1].get("type") == "tool_use":
        return [len(content) - 1]
    return []


def parse_response(data: dict[str, Any], prefix: str | None) -> RecordedResponse:
    """The parts and fields of a response dict (``response_dict``); ``prefix`` hashes the request it answered."""
    discarded = _truncated_tool(data)
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(data["content"]):
        if index in discarded:
            continue
        kind = block["type"]
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "text": str(block.get("thinking", ""))})
        elif kind == "redacted_thinking":
            parts.append({"type": "reasoning", "text": "", "metadata": {"redacted": True}})
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise InvalidInput(f"content.{index}: a tool_use block needs a string id and name")
            tool_input = block.get("input")
            parts.append({
                "type": "tool",
                "call_id": block["id"],
                "tool": block["name"],
                "state": {"status": "pending", "input": tool_input if isinstance(tool_input, dict) else {}},
            })
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
    model = data.get("model") if isinstance(data.get("model"), str) else None
    record: dict[str, Any] = {"response": data, "prefix": prefix}
    if discarded:
        record["discarded"] = discarded
    return RecordedResponse(
        model=model,
        finish=str(data.get("stop_reason") or "end_turn"),
        tokens=_tokens(usage),
        cost=usage_cost(model, usage),
        parts=parts,
        metadata={KEY: record},
    )


def recorded_response(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The provider record kept on a message (``{"response", "prefix", "discarded"?}``), or None."""
    if not metadata:
        return None
    record = metadata.get(KEY)
    if isinstance(record, Mapping) and isinstance(record.get("response"), Mapping):
        return dict(record)
    return None


# -- tool results -----------------------------------------------------------------------------------------


class ToolResult(NamedTuple):
    """One ``tool_result`` as the agent gave it: what the tool part stores."""

    tool_use_id: str
    output: str
    is_error: bool
    block: dict[str, Any]  # the exact block, content replaced by a marker when it is the output string


def _text_of(content: Sequence[Any]) -> str:
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")


def parse_tool_result(result: Mapping[str, Any]) -> ToolResult:
    """A ``{"tool_use_id", "content", "is_error"}`` dict (``type`` optional; content a string or blocks)."""
    if not isinstance(result, Mapping):
        raise InvalidInput("each tool result must be a dict with tool_use_id and content")
    block = json.loads(canonical({"type": "tool_result", **result}))
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        raise InvalidInput("a tool result needs its tool_use_id")
    if block["type"] != "tool_result":
        raise InvalidInput(f"a tool result has type 'tool_result', not {block['type']!r}")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise InvalidInput("is_error must be a boolean")
    content = block.get("content", "")
    if isinstance(content, str):
        output = content
        block["content"] = _OUTPUT
    elif isinstance(content, list):
        output = _text_of(content)
    else:
        raise InvalidInput("tool result content must be a string or a list of content blocks")
    return ToolResult(tool_use_id, output, is_error, block)


def json_copy(value: Any) -> Any:
    """A deep copy of a decoded JSON value (dicts, lists and immutable scalars), as ``copy.deepcopy`` makes it,
    at about 2.4 times its speed (no memo: JSON holds no cycles). A request copies every stored block it sends."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    return value


def stored_tool_result(metadata: Mapping[str, Any] | None, output: str | None) -> dict[str, Any] | None:
    """The exact ``tool_result`` block kept on a tool part, its content restored from ``output``; None when
    the part holds no recorded result."""
    record = (metadata or {}).get(KEY)
    block = record.get("tool_result") if isinstance(record, Mapping) else None
    if not isinstance(block, Mapping):
        return None
    # the request's own copy: the part it was read from may be loaded again (reuse_history)
    block = {key: json_copy(value) for key, value in block.items()}
    if block.get("content") == _OUTPUT:
        block["content"] = output if output is not None else ""
    return block
