"""The fake's request pipeline: one request body in, one response (or error) out, every exchange recorded.

Rules:

- Requests are handled one at a time, in arrival order (one lock), so cache state and signatures are
  deterministic even when an async client sends several at once.
- Order of checks: the request's shape (``rules``), the ``compaction`` parameter's restrictions, the
  compaction blocks (signature, position), ``context_management``, the thinking signatures and prefix binding
  (``signing``: drops or refuses), the cache breakpoints (automatic one, TTL order), then the context window:
  the input tokens of what the model reads (see ``prompt``) must not exceed ``context_window``, else
  ``prompt is too long: N tokens > M maximum``. Only then is the script asked.
- A normal response: ``usage.iterations`` holds one ``message`` entry (after a ``compaction`` entry when
  threshold compaction ran); the top-level fields are the sum of the non-compaction entries.
  ``input_transformations`` is present (``[]`` when nothing was dropped) when the request sent the
  ``thinking-binding-controls-2026-08-01`` beta; ``context_management`` is ``{"applied_edits": []}`` when the
  request set it.
- Every request is recorded (``RequestRecord``): the body, the betas, the HTTP status, the error type and
  message, the response and its usage. ``Stats`` sums the records: token fields over every ``usage.iterations``
  entry of every accepted response (what was billed), compaction iterations, dropped thinking blocks.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import compaction, rules
from .cache import PromptCache, breakpoints
from .errors import ApiError, bad_request
from .prompt import THINKING_TYPES, Position, blocks_of, build_view, token_count, total_tokens
from .script import Reply, Script, ScriptRunner
from .signing import BINDING_BETA, Chain, Signer, unseal


@dataclass(frozen=True)
class RequestRecord:
    """One request the fake received, and what it answered."""

    number: int  # 1-based, in arrival order
    body: Any  # the parsed request body (None when it was not JSON)
    betas: tuple[str, ...]  # the anthropic-beta header values
    status: int
    response: dict[str, Any] | None  # the message sent back, for a 200
    error_type: str | None = None
    error: str | None = None  # the error message, for a refusal
    streamed: bool = False  # answered as server-sent events (``stream: true``)
    cut_after: int | None = None  # the stream was dropped after this many events (``Reply(cut_after=...)``)

    @property
    def accepted(self) -> bool:
        return self.status == 200

    @property
    def usage(self) -> dict[str, Any] | None:
        return None if self.response is None else self.response.get("usage")

    @property
    def input_transformations(self) -> list[dict[str, Any]] | None:
        return None if self.response is None else self.response.get("input_transformations")


@dataclass(frozen=True)
class Stats:
    """Totals over the recorded requests."""

    requests: int = 0
    accepted: int = 0
    refused: int = 0  # every non-200 answer: validation refusals and scripted errors
    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    output_tokens: int = 0
    thinking_blocks_dropped: int = 0
    compactions: int = 0

    @classmethod
    def of(cls, records: list[RequestRecord]) -> Stats:
        totals = dict.fromkeys(("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"), 0)
        dropped = compactions = 0
        for record in records:
            usage = record.usage or {}
            for entry in usage.get("iterations") or []:
                for key in totals:
                    totals[key] += int(entry.get(key) or 0)
                compactions += entry.get("type") == "compaction"
            dropped += sum(1 for t in record.input_transformations or [] if t.get("type") == "thinking_dropped")
        accepted = sum(r.accepted for r in records)
        return cls(requests=len(records), accepted=accepted, refused=len(records) - accepted,
                   thinking_blocks_dropped=dropped, compactions=compactions, **totals)


def _betas(header_values: list[str]) -> tuple[str, ...]:
    return tuple(b.strip() for value in header_values for b in value.split(",") if b.strip())


class Engine:
    """Checks, accounts and answers requests (see the module rules)."""

    def __init__(self, script: Script, *, context_window: int, clock: Callable[[], float], min_cacheable_tokens: int) -> None:
        self.context_window = context_window
        self.clock = clock
        self.script = ScriptRunner(script)
        self.signer = Signer()
        self.cache = PromptCache(min_cacheable_tokens=min_cacheable_tokens)
        self.records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._cut_after: int | None = None  # the reply being answered asks for its stream to be cut

    def handle(self, raw: bytes, beta_headers: list[str]) -> tuple[RequestRecord, dict[str, Any], str]:
        """Answer one POST /v1/messages: (its record, the JSON body to send, the request id). The record says
        the status, whether to stream the answer and where to cut it."""
        with self._lock:
            self._cut_after = None
            number = len(self.records) + 1
            request_id = f"req_fake{number:020d}"
            betas = _betas(beta_headers)
            body: Any = None
            try:
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    raise bad_request("There was an error parsing the body of your request: it is not valid JSON") from None
                try:
                    message = self._respond(body, set(betas), number)
                except ApiError:
                    raise
                except Exception as exc:  # a malformed scripted block, or a bug of the fake: answer, never hang
                    raise ApiError(500, "api_error", f"FakeMessagesAPI internal error: {type(exc).__name__}: {exc}") from exc
            except ApiError as error:
                self.records.append(RequestRecord(number, copy.deepcopy(body), betas, error.status, None,
                                                  error.error_type, error.message))
                return self.records[-1], error.body(request_id), request_id
            streamed = bool(body.get("stream"))
            self.records.append(RequestRecord(number, copy.deepcopy(body), betas, 200, copy.deepcopy(message),
                                              streamed=streamed, cut_after=self._cut_after if streamed else None))
            return self.records[-1], message, request_id

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return list(self.records)

    # -- the pipeline -----------------------------------------------------------------------------------------

    def _respond(self, body: Any, betas: set[str], number: int) -> dict[str, Any]:
        now = self.clock()
        rules.validate(body, betas)
        on_demand = body.get("compaction") is not None
        if on_demand:
            compaction.validate_request(body, betas)
        found = compaction.inspect(body, betas)
        threshold = compaction.threshold_of(body, betas, found)
        binding_beta = BINDING_BETA in betas
        binding = self.signer.check_bindings(body, start=found.start, compactions=found.payloads,
                                             drop=binding_beta and rules.drop_requested(body), beta=binding_beta)
        view = build_view(body, start=found.start, dropped=binding.dropped)
        points = breakpoints(view, body)
        total = total_tokens(view)
        if total > self.context_window:
            raise bad_request(f"prompt is too long: {total} tokens > {self.context_window} maximum")

        message: dict[str, Any] = {"id": f"msg_fake{number:020d}", "type": "message", "role": "assistant",
                                   "model": body["model"], "content": [], "stop_reason": None, "stop_sequence": None}
        if body.get("context_management") is not None:
            message["context_management"] = {"applied_edits": []}
        if binding_beta:
            message["input_transformations"] = binding.transformations
        if on_demand:
            return self._summarize(message, body, view, points, total, binding.chain, now, number)
        if body["max_tokens"] == 0:  # cache pre-warming: read the prompt, write the cache, sample nothing
            usage = self.cache.account(view, body, now, points).as_usage(0)
            message.update(stop_reason="max_tokens", usage={**usage, "iterations": [{"type": "message", **usage}]})
            return message

        reply = self.script.next(body, number) or Reply("OK")
        if reply.failure is not None:
            raise reply.failure
        self._cut_after = reply.cut_after
        content = reply.blocks()
        leading = content[0] if content and content[0].get("type") == "compaction" else None
        if threshold is not None and total >= threshold.trigger and leading is None:
            leading = {"type": "compaction", "content": compaction.default_summary(body, total)}
            content.insert(0, leading)
        paused = leading is not None and threshold is not None and threshold.pause
        if paused:
            content = [leading]
        self._finish(content, body, binding.chain, number)

        iterations: list[dict[str, Any]] = []
        message_view: list[Position] | None = view
        if leading is not None:
            iterations.append({"type": "compaction", **self.cache.account(view, body, now, points).as_usage(token_count(leading))})
            after = [{"role": "assistant", "content": [leading]}]
            message_view = None if paused else build_view(body, messages=after)
        body_tokens = sum(token_count(b) for b in content if b is not leading)
        output = reply.output_tokens if reply.output_tokens is not None else body_tokens
        top = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
               "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}
        if message_view is not None:
            top = self.cache.account(message_view, body, now, breakpoints(message_view, body)).as_usage(output)
            iterations.append({"type": "message", **top})
        stop = "compaction" if paused else reply.stop_reason or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn")
        message.update(content=content, stop_reason=stop, stop_sequence=reply.stop_sequence,
                       usage={**top, "iterations": iterations, "service_tier": "standard"})
        return message

    def _summarize(self, message: dict[str, Any], body: dict[str, Any], view: list[Position], points: list[Any],
                   total: int, chain: Chain, now: float, number: int) -> dict[str, Any]:
        """Answer a compaction request: one signed compaction block, nothing sampled after it."""
        if compaction.nothing_to_summarize(body):
            raise bad_request("messages: There is nothing to summarize: send at least one `user` or `assistant` message.",
                              error_code="compaction_nothing_to_summarize")
        reply = self.script.next(body, number)
        if reply is not None and reply.failure is not None:
            raise reply.failure
        block: dict[str, Any] | None = {"type": "compaction", "content": compaction.default_summary(body, total)}
        if reply is not None:
            blocks = reply.blocks()
            texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
            block = next((b for b in blocks if b.get("type") == "compaction"), None)
            if block is None and texts:
                block = {"type": "compaction", "content": "\n".join(texts)}
        if block is not None:
            compaction.sign_on_demand(block, chain)
        output = reply.output_tokens if reply is not None and reply.output_tokens is not None else (
            token_count(block) if block is not None else 0)
        usage = self.cache.account(view, body, now, points).as_usage(output)
        zero = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}
        stop = "compaction" if block is not None else (reply.stop_reason if reply is not None else None) or "end_turn"
        message.update(content=[block] if block is not None else [], stop_reason=stop,
                       usage={**zero, "iterations": [{"type": "compaction", **usage}], "service_tier": "standard"})
        return message

    def _finish(self, content: list[dict[str, Any]], body: dict[str, Any], chain: Chain, number: int) -> None:
        """Sign the produced blocks and give tool calls ids, continuing the request's prefix chain."""
        messages = body["messages"]
        last = messages[-1]
        if last.get("role") == "assistant":  # the response continues a prefilled assistant turn
            index, offset = len(messages) - 1, len(blocks_of(last.get("content")))
        else:
            index, offset = len(messages), 0
            chain.message("assistant", f"messages.{index}")
        for k, block in enumerate(content):
            path = f"messages.{index}.content.{offset + k}"
            kind = block.get("type")
            if kind in THINKING_TYPES:
                self.signer.sign_thinking(block, chain, body["model"])
            elif kind == "compaction":
                compaction.sign_threshold(block)
                chain.compaction(block, unseal(block.get("signature")) or {"mode": "threshold"}, path)
            else:
                if kind == "tool_use" and "id" not in block:
                    block["id"] = f"toolu_fake{number:08d}{k:04d}"
                chain.block(block, path)
