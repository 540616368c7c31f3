"""What ``Conversation`` and ``AsyncConversation`` share: their settings, their state between calls, and every
decision that needs no database (``flows.py`` orders the store actions; the two classes run them).

Rules:

- The order of each call's store actions is in ``flows.py``; this module decides what they write.
- ``user(content)`` stores the content as given (a string or content blocks) in the message's metadata,
  with a text part per text block; ``record(response)`` stores the response whole (``brutus.blocks``);
  ``tool_results(results)`` completes the tool parts of the newest response. Each is one transaction.
- ``request()`` runs the context policy (``brutus.policy``), then renders the view (``render.py``) into the
  keyword arguments of ``client.beta.messages.create``. The prefix hash of what it rendered is what the
  next ``record`` keeps, so a response killed between ``create`` and ``record`` is the only thing lost.
- A view that ends with an assistant message (a response cut short, a compaction that summarized the
  last turn) gets the synthetic user message "Continue if you have next steps" before it is sent.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..compaction.plan import ENDED, post_tokens, stall_reason
from ..db.compaction_ops import CONTINUE_TEXT
from ..errors import InvalidInput
from ..models import Message, MessageWithParts, ModelLimits
from ..policy import ContextPolicy, Plan, over_threshold, plan_request
from ..estimates import context_size
from ..limits import model_limits
from ..tokens import estimate_tokens
from ..blocks import KEY, canonical, parse_response, parse_tool_result, recorded_response, response_dict
from .render import BINDING_BETA, COMPACTION_BETA, Hashes, Rendered, render_messages

__all__ = ["ConversationState", "RequestStats", "is_prompt_too_long", "request_timeout"]

log = logging.getLogger("brutus.live")

_TOO_LONG = ("prompt is too long", "model_context_window_exceeded", "context window", "input length and `max_tokens` exceed")


def is_prompt_too_long(error: BaseException) -> bool:
    """Whether ``error`` is the provider refusing a prompt over the model's context (a 400 ``prompt is too
    long: N tokens > M maximum``, or a context-window error)."""
    status = getattr(error, "status_code", None)
    text = str(getattr(error, "message", "") or error).lower()
    return (status in (None, 400, 413)) and any(marker in text for marker in _TOO_LONG)


def request_timeout(max_tokens: int) -> float | None:
    """Seconds a non-streaming request may take, when the anthropic SDK would otherwise refuse it.

    The SDK expects 3,600 s per 128,000 ``max_tokens`` and refuses (``Streaming is required for operations
    that may take longer than 10 minutes``) a non-streaming request it expects over 600 s, unless the call
    gives its own ``timeout``. With that expected time as the ``timeout`` a plain ``create`` works; a stream
    is unaffected (it is the wait between events)."""
    expected = 3600 * max_tokens / 128_000
    return float(math.ceil(expected)) if expected > 600 else None


@dataclass
class RequestStats:
    """What the last ``request()`` did.

    ``tokens_before``: the context the session filled when the policy ran (the last reported usage plus
    estimates after it); ``tokens_after``: what the rendered request fills once the policy is done (equal
    unless it pruned or compacted). ``first_change``: index of the first message that differs from the
    request before (None: append-only). ``stripped`` / ``drop_block``: thinking blocks stripped, or sent for
    the API to drop. ``pruned``: tool-output tokens pruned; ``compacted``: a compaction completed;
    ``stalled``: why a compaction was not done or did not help (the loop carries on; none again before the
    next user turn)."""

    first_change: int | None = None
    stripped: list[str] = field(default_factory=list)
    drop_block: list[str] = field(default_factory=list)
    pruned: int = 0
    compacted: bool = False
    stalled: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass
class ConversationState:
    """A conversation's settings and what it remembers between calls (nothing here touches the store)."""

    session_id: str
    model: str
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    thinking: dict[str, Any] | None = None
    policy: ContextPolicy = field(default_factory=ContextPolicy)
    limits: ModelLimits | None = None
    summarizer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    previous: list[str] | None = None  # prefix hashes of the last render
    pending_prefix: str | None = None  # what the next record() keeps
    overflow: bool = False  # a reactive compaction is due
    blocked_turns: int = -1  # no automatic compaction until the user turn after this count
    last_request_ms: int | None = None
    parent_id: str | None = None  # the newest user message, as the last render or user() saw it (record's parent)
    last: RequestStats = field(default_factory=RequestStats)
    loaded: dict[str, Any] = field(default_factory=dict, repr=False)  # the last load's entries (reuse_history)
    hashes: Hashes | None = field(default=None, repr=False)  # what the last render hashed (render_messages)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise InvalidInput("a conversation needs a model id")
        if self.system is not None and not isinstance(self.system, (str, list)):
            raise InvalidInput("system must be a string or a list of text blocks")
        if self.tools is not None and not (isinstance(self.tools, list) and all(isinstance(t, Mapping) for t in self.tools)):
            raise InvalidInput("tools must be a list of tool definitions (dicts)")
        if self.thinking is not None and not isinstance(self.thinking, Mapping):
            raise InvalidInput("thinking must be a dict such as {'type': 'adaptive'}")
        if not isinstance(self.policy, ContextPolicy):
            raise InvalidInput("policy must be a ContextPolicy")
        if self.limits is None:
            self.limits = model_limits(self.model)
        if self.max_tokens is None:
            self.max_tokens = min(self.limits.output or 8192, 32_000)
        if self.summarizer is None:  # Claude with ANTHROPIC_API_KEY, else the offline extractive one
            from ..summarizers import default_summarizer

            self.summarizer = default_summarizer()
        if isinstance(self.system, str):  # one block, so it can carry the cache breakpoint; always rendered so
            self.system = [{"type": "text", "text": self.system}] if self.system else None

    # -- user -----------------------------------------------------------------------------------------------

    def user_message(self, content: Any) -> dict[str, Any]:
        """The ``append_messages`` item for a user message with ``content`` (a string or content blocks)."""
        if isinstance(content, str):
            if not content.strip():
                raise InvalidInput("a user message needs non-blank text")
            parts = [{"type": "text", "text": content}]
        elif isinstance(content, list) and content and all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in content):
            parts = [{"type": "text", "text": str(b.get("text", ""))} for b in content if b.get("type") == "text"]
        else:
            raise InvalidInput("user content must be a string or a non-empty list of content blocks")
        stored = json.loads(canonical(content))
        return {"info": {"role": "user", "metadata": {KEY: {"content": stored}}}, "parts": parts}

    # -- the policy -------------------------------------------------------------------------------------------

    def measure(self, view: Sequence[MessageWithParts]) -> int:
        """The context the view fills: the last reported usage plus what came after, or, before any usage, the
        estimate of the messages, the system prompt and the tools."""
        tokens = context_size(view)
        if not any(m.info.role == "assistant" and m.info.tokens.total for m in view):
            tokens += estimate_tokens(canonical({"system": self.system, "tools": self.tools}).decode("utf-8", "replace"))
        return tokens

    def plan(self, view: Sequence[MessageWithParts], *, pending: bool, now: int) -> Plan:
        turns = sum(1 for m in view if m.info.role == "user" and not m.info.synthetic)
        last_assistant = next((m for m in reversed(view) if m.info.role == "assistant"), None)
        turn_ended = bool(view) and view[-1].info.role == "user" and last_assistant is not None and last_assistant.info.finish in ENDED
        idle = None if self.last_request_ms is None else now - self.last_request_ms
        self.last.tokens_before = self.measure(view)
        assert self.limits is not None
        return plan_request(
            self.policy,
            tokens=self.last.tokens_before,
            limits=self.limits,
            pending=pending,
            overflow=self.overflow,
            blocked=turns <= self.blocked_turns,
            turn_ended=turn_ended,
            idle_ms=idle,
        )

    def still_over(self, view: Sequence[MessageWithParts]) -> bool:
        assert self.limits is not None
        return over_threshold(self.measure(view), self.limits, self.policy)

    def block(self, view: Sequence[MessageWithParts], reason: str) -> None:
        """A compaction stalled: none again before the next user turn (logged, never raised: the loop goes on)."""
        self.blocked_turns = sum(1 for m in view if m.info.role == "user" and not m.info.synthetic)
        self.last.stalled = reason
        log.warning("session %s: %s; no automatic compaction before the next user turn", self.session_id, reason)

    def too_small(self, view: Sequence[MessageWithParts]) -> str | None:
        """Why compacting ``view`` cannot gain anything, or None: the compaction pair alone (an empty summary,
        no tail) would not bring it under the stall ratio, so it is not tried (no summary is paid for)."""
        tokens, floor = context_size(view), post_tokens("", [])
        if stall_reason(tokens, floor, self.policy.compaction_config()):
            return f"the session is too small to gain from compaction ({tokens:,} tokens)"
        return None

    @staticmethod
    def needs_continue(rendered: Rendered) -> bool:
        return bool(rendered.messages) and rendered.messages[-1]["role"] == "assistant"

    @staticmethod
    def continue_message() -> dict[str, Any]:
        return {"info": {"role": "user", "synthetic": True}, "parts": [{"type": "text", "text": CONTINUE_TEXT, "synthetic": True}]}

    # -- rendering --------------------------------------------------------------------------------------------

    def render(self, view: Sequence[MessageWithParts]) -> tuple[Rendered, dict[str, Any]]:
        rendered = render_messages(
            view,
            system=self.system,
            tools=self.tools,
            previous=self.previous,
            thinking_mismatch=self.policy.thinking_mismatch,
            last=self.hashes,
        )
        self.hashes = rendered.hashes
        self.previous = rendered.prefixes
        self.pending_prefix = rendered.prefixes[-1]
        self.parent_id = next((m.info.id for m in reversed(view) if m.info.role == "user"), None)
        self.last.first_change = rendered.first_change
        self.last.stripped = rendered.stripped
        self.last.drop_block = rendered.mismatched
        return rendered, self.kwargs(rendered)

    def preview(self, view: Sequence[MessageWithParts]) -> dict[str, Any]:
        """The arguments a request would send for ``view``, without counting as sent (a summary request
        extends them)."""
        rendered = render_messages(view, system=self.system, tools=self.tools, previous=None,
                                   thinking_mismatch=self.policy.thinking_mismatch)
        return self.kwargs(rendered)

    def summarizer_for(self, prefix: dict[str, Any]) -> Any:
        """The summarizer of one compaction: one that can extend the conversation's request does."""
        extending = getattr(self.summarizer, "extending", None)
        return extending(prefix) if callable(extending) else self.summarizer

    def _breakpoint(self) -> dict[str, Any]:
        ttl = self.policy.cache_ttl
        return {"type": "ephemeral", "ttl": ttl} if ttl != "5m" else {"type": "ephemeral"}

    def kwargs(self, rendered: Rendered) -> dict[str, Any]:
        """``client.beta.messages.create`` keyword arguments: at most three cache breakpoints (system or tools,
        the newest summary, the conversation's end), thinking with ``drop_block`` when the render needs it."""
        messages = rendered.messages
        if rendered.summary_index is not None and messages[rendered.summary_index]["content"]:
            messages = list(messages)
            summary = copy.deepcopy(messages[rendered.summary_index])
            summary["content"][-1]["cache_control"] = self._breakpoint()
            messages[rendered.summary_index] = summary
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": messages}
        betas: list[str] = list(self.extra.get("betas", ()))
        if self.system:
            system = copy.deepcopy(self.system)
            system[-1]["cache_control"] = self._breakpoint()
            kwargs["system"] = system
        if self.tools:
            tools = copy.deepcopy(self.tools)
            if not self.system:
                tools[-1]["cache_control"] = self._breakpoint()
            kwargs["tools"] = tools
        if self.thinking is not None:
            thinking = dict(self.thinking)
            if rendered.drop_block:
                thinking["block_binding"] = {"prefix_mismatch_behavior": "drop_block"}
            kwargs["thinking"] = thinking
        if rendered.drop_block or self.policy.thinking_mismatch == "drop_block":
            if BINDING_BETA not in betas:
                betas.append(BINDING_BETA)
        if COMPACTION_BETA not in betas and any(b.get("type") == "compaction" for m in messages[:1] for b in m["content"]):
            betas.append(COMPACTION_BETA)  # a compaction block is content only under the compaction beta
        kwargs["cache_control"] = self._breakpoint()
        if (timeout := request_timeout(self.max_tokens)) is not None:
            kwargs["timeout"] = timeout
        for key, value in self.extra.items():
            if key != "betas":
                kwargs.setdefault(key, value)
        if betas:
            kwargs["betas"] = betas
        return kwargs

    # -- responses and tool results ---------------------------------------------------------------------------

    def assistant_message(self, response: Any, parent_id: str | None, now: int) -> dict[str, Any]:
        """The ``append_messages`` item for a response; a cut-short tool call or a context-window stop asks
        for a reactive compaction before the next request."""
        data = response_dict(response)
        parsed = parse_response(data, self.pending_prefix)
        self.pending_prefix = None
        if parsed.metadata[KEY].get("discarded") or parsed.finish == "model_context_window_exceeded":
            self.overflow = True
        self.last_request_ms = now
        info = {
            "role": "assistant",
            "parent_id": parent_id,
            "model_id": parsed.model or self.model,
            "provider_id": "anthropic",
            "finish": parsed.finish,
            "tokens": parsed.tokens,
            "cost": parsed.cost,
            "metadata": parsed.metadata,
            "time": {"created": now, "completed": now},
        }
        return {"info": info, "parts": parsed.parts}

    @staticmethod
    def newest_response(view: Sequence[MessageWithParts]) -> Message:
        """The newest message of the view that records a response (a copy: the view's entries are reused by
        the next load, never handed out); ``InvalidInput`` when there is none."""
        message = next((m for m in reversed(view) if m.info.role == "assistant" and recorded_response(m.info.metadata)), None)
        if message is None:
            raise InvalidInput("there is no recorded response whose tool calls these results answer")
        return message.info.model_copy(deep=True)

    @staticmethod
    def match_results(open_calls: Mapping[str | None, str], results: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
        """For each result, the part id of the open call it answers (``open_calls``: call id → part id) and
        the parsed result; ``InvalidInput`` for a result that answers none, or one answered twice."""
        updates = []
        seen: set[str] = set()
        for raw in results:
            result = parse_tool_result(raw)
            part_id = open_calls.get(result.tool_use_id)
            if part_id is None or result.tool_use_id in seen:
                raise InvalidInput(f"tool_use_id {result.tool_use_id!r} names no open tool call of the newest response")
            seen.add(result.tool_use_id)
            updates.append((part_id, result))
        return updates

    @staticmethod
    def pending_calls(view: Sequence[MessageWithParts]) -> list[dict[str, Any]]:
        """The ``tool_use`` blocks of the newest response still waiting for their results (to run on resume)."""
        message = next((m for m in reversed(view) if m.info.role == "assistant"), None)
        record = recorded_response(message.info.metadata) if message is not None else None
        if record is None:
            return []
        waiting = {p.call_id for p in message.parts if p.type == "tool" and p.state.status in ("pending", "running")}
        discarded = set(record.get("discarded") or ())
        return [b for i, b in enumerate(record["response"]["content"]) if i not in discarded and b.get("type") == "tool_use" and b.get("id") in waiting]
