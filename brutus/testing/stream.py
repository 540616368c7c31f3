"""The streaming answer: a finished message as the server-sent events the Messages API streams.

Rules (docs: "Streaming Messages"):

- A request with ``stream: true`` that the fake accepts is answered with ``content-type: text/event-stream``:
  ``message_start`` (the message with empty ``content``, ``stop_reason`` and ``stop_sequence`` null, the
  usage with ``output_tokens`` 0), a ``ping``, then per content block ``content_block_start``, its
  ``content_block_delta`` events and ``content_block_stop``, then ``message_delta`` (``stop_reason``,
  ``stop_sequence``, the cumulative ``usage`` and ``context_management`` when set) and ``message_stop``.
  A refused request is answered as without streaming: an HTTP error with its JSON body.
- Deltas: ``text`` streams its text (``text_delta``); ``thinking`` its thinking (``thinking_delta``), then
  its signature (``signature_delta``); ``tool_use``, ``server_tool_use`` and ``mcp_tool_use`` their input as
  JSON text (``input_json_delta``), each block starting with the field empty. Any other block
  (``redacted_thinking``, ``compaction``, server tool results, unknown types) arrives whole in its
  ``content_block_start``. Text is cut into pieces of ``PIECE`` characters, so a client joins several deltas.
- So the SDK's ``stream.get_final_message()`` holds the same content and usage as the non-streaming answer.
- ``Reply(cut_after=n)`` sends only the first ``n`` events and then drops the connection (a response lost
  mid-stream); the request is recorded as answered, as the API bills it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

__all__ = ["PIECE", "events", "sse"]

PIECE = 24  # characters per text, thinking or JSON delta
_STREAMED_INPUT = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _pieces(text: str) -> Iterator[str]:
    for start in range(0, len(text), PIECE):
        yield text[start:start + PIECE]


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block.get("type")
    start = copy.deepcopy(block)
    deltas: list[dict[str, Any]] = []
    if kind == "text" and isinstance(block.get("text"), str):
        start["text"] = ""
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
    elif kind == "thinking" and isinstance(block.get("thinking"), str):
        start.update(thinking="", signature="")
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    elif kind in _STREAMED_INPUT and isinstance(block.get("input"), dict):
        start["input"] = {}
        text = json.dumps(block["input"]) if block["input"] else ""
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(text)]
    yield {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


def events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events that stream ``message`` (a finished non-streaming answer), in order."""
    usage = copy.deepcopy(message.get("usage") or {})
    head = {k: copy.deepcopy(v) for k, v in message.items() if k != "context_management"}
    head.update(content=[], stop_reason=None, stop_sequence=None, usage={**usage, "output_tokens": 0})
    out: list[dict[str, Any]] = [{"type": "message_start", "message": head}, {"type": "ping"}]
    for index, block in enumerate(message.get("content") or []):
        out.extend(_block_events(index, block))
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")},
                             "usage": usage}
    if message.get("context_management") is not None:
        delta["context_management"] = copy.deepcopy(message["context_management"])
    out.append(delta)
    out.append({"type": "message_stop"})
    return out


def sse(event: dict[str, Any]) -> bytes:
    """One server-sent event: its ``event:`` line names the type, ``data:`` holds the JSON."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode("ascii")
