"""``AnthropicSummarizer``: the summary agent on the official ``anthropic`` SDK (Messages API, no tools).

Rules:

- The request is the history rendered by ``brutus.render.to_anthropic`` with the kind's system prompt, plus
  the summary prompt as a final user text block (merged into the last user message when there is one, so
  roles still alternate); a goal batch is one user message holding the ADR transcript (see ``prompts``).
  No tools are offered. ``max_tokens`` is the smaller of the summarizer's and the request's.
- The answer is its text blocks joined; usage becomes ``TokenCounts`` (cache reads and writes included,
  thinking tokens as reasoning) and the cost comes from ``pricing``. A ``max_tokens`` stop that still wrote
  text is returned with ``stop_reason="max_tokens"``, so the caller can see it was cut.
- No usable summary raises ``SummarizerError``: an empty answer, a stop before any text, a refusal, or an
  API error once the SDK's own retries (429, 529 and 5xx) are spent; ``context_overflow`` is set when the
  request was too long for the model. SDK exceptions never leave this module.
- Inside a live ``Conversation`` the request is a prefix-extension of what the conversation sends
  (``extending(prefix)``): the same model, ``system``, ``tools``, ``tool_choice``, thinking, betas and
  messages, the summary prompt added to the last user message, so it reads the prompt cache the
  conversation wrote. Tools are forbidden by the prompt (``NO_TOOLS``), not by ``tool_choice``: a changed
  ``tool_choice`` invalidates the cached messages (Anthropic's prompt-caching docs), which would make the
  summary pay for the whole context again. If that prefix is itself too long for the model, the plain
  request is sent instead.
- ``anthropic`` is imported when a client is first needed, never at import time (``import brutus`` stays
  fast); without a client one is built from the environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInput, SummarizerError
from ..models import CacheTokens, TokenCounts
from ..pricing import cost_of
from ..render import to_anthropic
from .base import Summary, SummaryRequest
from .prompts import summary_prompt, system_prompt

__all__ = [
    "DEFAULT_MODEL",
    "NO_TOOLS",
    "AnthropicSummarizer",
    "build_messages_request",
    "extend_request",
    "import_anthropic",
    "provider_errors",
]

NO_TOOLS = "Do not call any tool: answer with the summary as text only."

DEFAULT_MODEL = "claude-haiku-4-5"
_CUT_OFF = ("max_tokens", "model_context_window_exceeded")
_OVERFLOW_HINTS = ("prompt is too long", "context window", "context_window", "too many tokens", "input length")


def build_messages_request(request: SummaryRequest, *, model: str, max_tokens: int) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for ``request`` (model, max_tokens, system, messages)."""
    prompt = {"type": "text", "text": summary_prompt(request)}
    if request.kind == "goal_batch":
        messages: list[dict[str, Any]] = [{"role": "user", "content": [prompt]}]
    else:
        messages = to_anthropic(request.history)["messages"]
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].append(prompt)
        else:
            messages.append({"role": "user", "content": [prompt]})
    return {
        "model": model,
        "max_tokens": min(max_tokens, request.max_tokens),
        "system": system_prompt(request.kind),
        "messages": messages,
    }


def extend_request(prefix: dict[str, Any], request: SummaryRequest, *, max_tokens: int) -> dict[str, Any]:
    """``prefix`` (a conversation's ``request()`` arguments) with the summary prompt after its messages and
    tools forbidden: everything before the prompt is byte-identical, so the cache the conversation wrote is read."""
    import copy

    arguments = copy.deepcopy(prefix)
    prompt = {"type": "text", "text": f"{summary_prompt(request)}\n\n{NO_TOOLS}"}
    messages = arguments["messages"]
    if messages and messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], prompt]}
    else:
        messages.append({"role": "user", "content": [prompt]})
    arguments["max_tokens"] = min(max_tokens, request.max_tokens, int(arguments.get("max_tokens") or max_tokens))
    return arguments


def _anthropic_module() -> Any | None:
    try:
        import anthropic  # heavy (about 2 s): only when a summary is actually requested
    except ImportError:
        return None
    return anthropic


def import_anthropic(model: str) -> Any:
    anthropic = _anthropic_module()
    if anthropic is None:
        raise SummarizerError("the anthropic package is not installed (brutus-store depends on it): pip install anthropic", model=model)
    return anthropic


def _status_message(exc: Any) -> str:
    message = getattr(exc, "api_message", None)
    body = getattr(exc, "body", None)
    if not message and isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
    return str(message or exc)


@contextmanager
def provider_errors(model: str) -> Iterator[None]:
    """Translate the SDK's exceptions (after its own retries) into ``SummarizerError``."""
    try:
        yield
    except SummarizerError:
        raise
    except Exception as exc:
        if isinstance(exc, TypeError) and "authentication" in str(exc).lower():  # the SDK found no credentials
            raise SummarizerError(
                f"{model}: no Anthropic credentials: set ANTHROPIC_API_KEY or pass a client ({exc})", model=model
            ) from exc
        anthropic = _anthropic_module()
        if anthropic is None:  # not an SDK error (a duck-typed client): let it through unchanged
            raise
        if isinstance(exc, anthropic.APITimeoutError):
            raise SummarizerError(f"{model}: the summary request timed out", model=model) from exc
        if isinstance(exc, anthropic.APIConnectionError):
            raise SummarizerError(f"{model}: could not reach the Anthropic API ({exc})", model=model) from exc
        if isinstance(exc, anthropic.APIStatusError):
            status, message = exc.status_code, _status_message(exc)
            overflow = status == 413 or (status == 400 and any(h in message.lower() for h in _OVERFLOW_HINTS))
            raise SummarizerError(
                f"{model}: HTTP {status}: {message}", model=model, status_code=status, context_overflow=overflow
            ) from exc
        if isinstance(exc, anthropic.AnthropicError):
            raise SummarizerError(f"{model}: {exc}", model=model) from exc
        raise


def _tokens(usage: Any) -> TokenCounts:
    if usage is None:
        return TokenCounts()
    output = usage.output_tokens or 0
    details = getattr(usage, "output_tokens_details", None)
    thinking = min(getattr(details, "thinking_tokens", 0) or 0, output)
    return TokenCounts(
        input=usage.input_tokens or 0,
        output=output - thinking,
        reasoning=thinking,
        cache=CacheTokens(
            read=getattr(usage, "cache_read_input_tokens", None) or 0,
            write=getattr(usage, "cache_creation_input_tokens", None) or 0,
        ),
    )


def _summary(response: Any, model: str) -> Summary:
    stop = getattr(response, "stop_reason", None)
    used = getattr(response, "model", None) or model
    texts = [block.text for block in response.content or [] if getattr(block, "type", None) == "text"]
    text = "\n\n".join(t.strip() for t in texts if t and t.strip())
    if stop == "refusal":
        raise SummarizerError(f"{used}: the model refused to summarize", model=used, stop_reason=stop)
    if not text:
        if stop in _CUT_OFF:
            raise SummarizerError(
                f"{used}: stopped ({stop}) before writing any summary",
                model=used,
                stop_reason=stop,
                context_overflow=stop == "model_context_window_exceeded",
            )
        raise SummarizerError(f"{used}: the summary came back empty", model=used, stop_reason=stop)
    tokens = _tokens(getattr(response, "usage", None))
    return Summary(text=text, model=used, tokens=tokens, cost=cost_of(used, tokens), stop_reason=stop)


class AnthropicSummarizer:
    """Summaries written by a Claude model (a cheap one by default, as seed 002 advises)."""

    def __init__(
        self,
        client: Any | None = None,
        model: str = DEFAULT_MODEL,
        max_tokens: int = 4096,
        async_client: Any | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"model must be a model id such as {DEFAULT_MODEL!r}, not {model!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInput(f"max_tokens must be a positive integer, not {max_tokens!r}")
        self.model = model
        self.max_tokens = max_tokens
        self._client = client
        self._async_client = async_client
        self.prefix: dict[str, Any] | None = None  # set by extending(): a live conversation's request

    def extending(self, prefix: dict[str, Any]) -> AnthropicSummarizer:
        """This summarizer for one compaction of a live conversation whose next request would be ``prefix``:
        the summary request extends it (same model, prompt cached), see the module rules."""
        bound = AnthropicSummarizer(self._client, prefix.get("model") or self.model, self.max_tokens, self._async_client)
        bound.prefix = prefix
        return bound

    def __repr__(self) -> str:
        return f"AnthropicSummarizer(model={self.model!r}, max_tokens={self.max_tokens})"

    def request_for(self, request: SummaryRequest) -> dict[str, Any]:
        """The ``messages.create`` arguments this summarizer sends for ``request``."""
        return build_messages_request(request, model=self.model, max_tokens=self.max_tokens)

    def summarize(self, request: SummaryRequest) -> Summary:
        if self.prefix is not None:
            try:
                arguments = extend_request(self.prefix, request, max_tokens=self.max_tokens)
                with provider_errors(self.model):
                    if self._client is None:
                        self._client = import_anthropic(self.model).Anthropic()
                    return _summary(self._client.beta.messages.create(**arguments), self.model)
            except SummarizerError as exc:
                if not exc.context_overflow:
                    raise
        arguments = self.request_for(request)
        with provider_errors(self.model):
            if self._client is None:
                self._client = import_anthropic(self.model).Anthropic()
            response = self._client.messages.create(**arguments)
        return _summary(response, self.model)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        if self.prefix is not None:
            try:
                arguments = extend_request(self.prefix, request, max_tokens=self.max_tokens)
                with provider_errors(self.model):
                    if self._async_client is None:
                        self._async_client = import_anthropic(self.model).AsyncAnthropic()
                    return _summary(await self._async_client.beta.messages.create(**arguments), self.model)
            except SummarizerError as exc:
                if not exc.context_overflow:
                    raise
        arguments = self.request_for(request)
        with provider_errors(self.model):
            if self._async_client is None:
                self._async_client = import_anthropic(self.model).AsyncAnthropic()
            response = await self._async_client.messages.create(**arguments)
        return _summary(response, self.model)
