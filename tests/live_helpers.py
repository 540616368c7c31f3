"""Test-only: a live conversation's pieces (tools, responses shaped like the API's, the agent loop) for the
``Conversation`` tests, all run against ``brutus.testing.FakeMessagesAPI`` under the real SDK client."""

from __future__ import annotations

import copy
from typing import Any

import anthropic

from brutus.live.render import without_cache_control

MODEL = "claude-opus-4-6"
SYSTEM = "You are a coding agent. Work in the repository you are given."
TOOLS = [
    {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "bash", "description": "Run a shell command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
]
THINKING = {"type": "adaptive"}

def client(api: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.base_url, api_key="test-key", max_retries=0)


def async_client(api: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=api.base_url, api_key="test-key", max_retries=0)


def response(content: list[dict[str, Any]], *, stop_reason: str = "end_turn", usage: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A response dict as the API sends it."""
    return {
        "id": "msg_01XyZ",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": copy.deepcopy(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 1200, "output_tokens": 310, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 800},
        **extra,
    }


# Every kind of block the issue names, shaped as the API sends them.
EVERY_BLOCK = [
    {"type": "thinking", "thinking": "The user wants the failing test.\nLet me check.", "signature": "EqQBCkYIBRgCKkD1sig+/=="},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
    {"type": "text", "text": "The docs say:", "citations": [{"type": "char_location", "cited_text": "x = 1", "document_index": 0, "document_title": "a.py", "start_char_index": 0, "end_char_index": 5}]},
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "pytest flaky"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [{"type": "web_search_result", "url": "https://example.org", "title": "Flaky tests", "encrypted_content": "Eo8BCioIAhgB", "page_age": None}]},
    {"type": "text", "text": "Now I run the tests.", "citations": None},
    {"type": "future_block_kind", "payload": {"nested": [1, 2.5, "ü"]}},
    {"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": {"command": "pytest -x"}},
]


def assistant_blocks(kwargs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The content of every assistant message of a request, breakpoints left out."""
    return [without_cache_control(m["content"]) for m in kwargs["messages"] if m["role"] == "assistant"]


def breakpoints(kwargs: dict[str, Any]) -> int:
    """The cache breakpoints a request sets (the top-level one included)."""

    def count(value: Any) -> int:
        if isinstance(value, dict):
            return int("cache_control" in value) + sum(count(v) for k, v in value.items() if k != "cache_control")
        if isinstance(value, list):
            return sum(count(v) for v in value)
        return 0

    return count({k: v for k, v in kwargs.items() if k != "cache_control"}) + int("cache_control" in kwargs)


# -- scripted runs from real sessions -------------------------------------------------------------------------


class Step:
    """One step of a scripted run: a user turn (``text``), or a response (``reply``) and its tool results."""

    def __init__(self, *, text: str | None = None, reply: Any = None, results: list[dict[str, Any]] | None = None) -> None:
        self.text, self.reply, self.results = text, reply, results or []


def scripted_steps(history: list[Any], *, thinking: bool) -> list[Step]:
    """A recorded session as a script: each user message's text, each assistant message as the reply the fake
    gives (its text and tool calls; a thinking block first when ``thinking``) and the results the agent sends."""
    from brutus.testing import Reply

    steps: list[Step] = []
    calls = 0
    for message in history:
        if message.info.role == "user":
            text = "\n".join(p.text for p in message.parts if p.type == "text" and not p.ignored and p.text.strip())
            if text:
                steps.append(Step(text=text))
            continue
        if message.info.summary:
            continue
        blocks: list[dict[str, Any]] = []
        if thinking:
            reasoning = " ".join(p.text for p in message.parts if p.type == "reasoning" and p.text.strip())
            blocks.append({"type": "thinking", "thinking": reasoning or f"Step {len(steps)}: what next?"})
        results = []
        for part in message.parts:
            if part.type == "text" and part.text.strip():
                blocks.append({"type": "text", "text": part.text})
            elif part.type == "tool":
                calls += 1
                call_id = f"toolu_{calls:05d}"
                blocks.append({"type": "tool_use", "id": call_id, "name": part.tool, "input": part.state.input})
                failed = part.state.status == "error"
                output = (part.state.error if failed else part.state.output) or "(no output)"
                results.append({"tool_use_id": call_id, "content": output, **({"is_error": True} if failed else {})})
        if not any(b["type"] != "thinking" for b in blocks):
            blocks.append({"type": "text", "text": "(working)"})
        steps.append(Step(reply=Reply(blocks), results=results))
    return steps


class RunReport:
    """What a scripted run did, for the assertions and the note."""

    def __init__(self) -> None:
        self.requests = self.recovered = 0
        self.stripped: list[str] = []
        self.peak = 0


def drive(conv: Any, sdk: Any, steps: list[Step], queue: list[Any]) -> RunReport:
    """Run ``steps`` through ``conv`` and the fake (whose script pops ``queue``), as an agent loop would."""
    report = RunReport()
    for step in steps:
        if step.text is not None:
            conv.user(step.text)
            continue
        queue.append(step.reply)
        try:
            message = sdk.beta.messages.create(**conv.request())
        except anthropic.BadRequestError as exc:
            report.stripped += conv.last.stripped
            assert conv.recover(exc), f"recover() could not help: {exc}"
            report.recovered += 1
            message = sdk.beta.messages.create(**conv.request())
        report.stripped += conv.last.stripped
        report.requests += 1
        usage = message.usage
        report.peak = max(report.peak, usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0))
        conv.record(message)
        if step.results:
            conv.tool_results(step.results)
    return report


def popping(queue: list[Any]) -> Any:
    """A fake's script that answers each accepted request with the next queued reply."""
    return lambda request: queue.pop(0)
