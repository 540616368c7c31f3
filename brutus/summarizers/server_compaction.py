"""``AnthropicServerCompaction``: the Messages API compacts the conversation itself, on demand.

Rules:

- The request is the conversation's own (``extending(prefix)``, inside a live ``Conversation``: its model,
  ``system``, ``tools``, thinking and messages), or outside one the history rendered by ``to_anthropic``,
  with ``compaction={"type": "summarize"}`` (plus the compaction's custom instructions) and the beta
  ``compact-2026-09-04``, through ``client.beta.messages.create``. What the API refuses alongside it
  (``context_management``, ``stop_sequences``) is left out.
- The answer is one signed ``compaction`` block. It becomes the summary: its ``content`` is the summary text
  brutus reads (prune, stats, the extractive fallback of the next compaction), and the whole response is
  kept on the summary message (``metadata["anthropic"]["response"]``), so a live conversation sends the
  block back first in ``messages``, byte-identical, and nothing before it.
- No summary (no block, ``content`` null, or a stop such as ``max_tokens``, ``model_context_window_exceeded``
  or ``refusal``) and the API's ``compaction_*`` errors raise ``SummarizerError``: the store falls back to
  the next summarizer (the extractive one), as for any summarizer failure.
- Cost is the response's usage priced over its iterations (``brutus.pricing``).
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import SummarizerError
from ..blocks import COMPACTION_BETA, KEY, response_dict
from ..models import CacheTokens, TokenCounts
from ..pricing import usage_cost
from ..render import to_anthropic
from .anthropic_api import DEFAULT_MODEL, import_anthropic, provider_errors
from .base import Summary, SummaryRequest
from .prompts import system_prompt

__all__ = ["COMPACTION_BETA", "AnthropicServerCompaction", "compaction_request"]

_REFUSED_WITH_IT = ("context_management", "stop_sequences", "cache_control")


def compaction_request(prefix: dict[str, Any], instructions: str | None) -> dict[str, Any]:
    """``prefix`` (a ``messages.create`` request) asking the API to compact it."""
    arguments = {k: copy.deepcopy(v) for k, v in prefix.items() if k not in _REFUSED_WITH_IT}
    compaction: dict[str, Any] = {"type": "summarize"}
    if instructions and instructions.strip():
        compaction["instructions"] = instructions
    arguments["compaction"] = compaction
    betas = list(arguments.get("betas") or [])
    if COMPACTION_BETA not in betas:
        betas.append(COMPACTION_BETA)
    arguments["betas"] = betas
    return arguments


def _usage_tokens(usage: dict[str, Any]) -> TokenCounts:
    """The compaction's own tokens: its iteration when reported (the top level is zero for it)."""
    source = usage
    for iteration in usage.get("iterations") or []:
        if isinstance(iteration, dict) and iteration.get("type") == "compaction":
            source = iteration
    return TokenCounts(
        input=int(source.get("input_tokens") or 0),
        output=int(source.get("output_tokens") or 0),
        cache=CacheTokens(read=int(source.get("cache_read_input_tokens") or 0), write=int(source.get("cache_creation_input_tokens") or 0)),
    )


class AnthropicServerCompaction:
    """A summarizer that asks the Messages API to compact (see the module rules)."""

    def __init__(self, client: Any | None = None, model: str = DEFAULT_MODEL, max_tokens: int = 4096) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self._client = client
        self.prefix: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"AnthropicServerCompaction(model={self.model!r})"

    def extending(self, prefix: dict[str, Any]) -> AnthropicServerCompaction:
        """This compaction for a live conversation whose next request would be ``prefix``."""
        bound = AnthropicServerCompaction(self._client, prefix.get("model") or self.model, self.max_tokens)
        bound.prefix = prefix
        return bound

    def request_for(self, request: SummaryRequest) -> dict[str, Any]:
        prefix = self.prefix
        if prefix is None:
            prefix = {"model": self.model, "max_tokens": min(self.max_tokens, request.max_tokens),
                      "system": system_prompt(request.kind), "messages": to_anthropic(request.history)["messages"]}
        return compaction_request(prefix, request.instructions)

    def summarize(self, request: SummaryRequest) -> Summary:
        arguments = self.request_for(request)
        model = str(arguments.get("model") or self.model)
        with provider_errors(model):
            if self._client is None:
                self._client = import_anthropic(model).Anthropic()
            response = self._client.beta.messages.create(**arguments)
        return self._summary(response, model)

    def _summary(self, response: Any, model: str) -> Summary:
        data = response_dict(response)
        content = data["content"]
        stop = data.get("stop_reason")
        block = content[0] if len(content) == 1 and content[0].get("type") == "compaction" else None
        if block is None or not isinstance(block.get("content"), str) or not block["content"].strip():
            raise SummarizerError(f"{model}: the API returned no compaction summary (stop reason {stop})", model=model,
                                  stop_reason=stop, context_overflow=stop == "model_context_window_exceeded")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        used = str(data.get("model") or model)
        return Summary(
            text=block["content"],
            model=used,
            tokens=_usage_tokens(usage),
            cost=usage_cost(used, usage),
            stop_reason=stop,
            metadata={KEY: {"response": data, "prefix": None}},
        )
