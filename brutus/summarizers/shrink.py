"""Making a summary request fit the summarizer's context, in stages, instead of failing "too long to compact".

Rules (DESIGN §4, "Never crash"):

- A request fits when the estimate of what is sent (the kind's system prompt, the final prompt with the
  previous summary and instructions, ``estimate_message_tokens`` of each message) plus ``max_tokens``
  reserved for the answer is at most ``context_tokens``; a ``context_tokens`` of 0 means unlimited.
- ``shrink_request`` applies the stages in order and stops after the first one that makes it fit:
  1. drop pruned tool calls (``compacted`` set: the model would only see "[Old tool result content cleared]");
  2. cut every tool output, tool error and string tool input longer than ``cut_chars`` to its start and end;
  3. drop the oldest turns (a turn starts at a user message that is not only tool results), keeping at
     least the newest, and put a synthetic user note in their place saying how many messages were left
     out; a dropped compaction summary becomes ``previous_summary`` when the request had none;
  4. cut every text part longer than ``cut_chars`` the same way.
  If even that does not fit (the prompts alone are too large), the last stage's request is returned and
  ``request_fits`` says so; the caller falls back to an offline summary.
- Pure: the input request, its messages and parts are never mutated; what changes is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidInput
from ..models import Message, MessageTime, MessageWithParts, TextPart, ToolPart
from ..estimates import estimate_message_tokens
from ..split import is_split_boundary
from ..tokens import estimate_tokens
from .base import SummaryRequest
from .facts import is_tier_summary
from .prompts import message_text, summary_prompt, system_prompt
from .text import cut_middle

__all__ = ["DEFAULT_CUT_CHARS", "estimate_request_tokens", "omitted_note", "request_fits", "shrink_request"]

DEFAULT_CUT_CHARS = 4_000


def omitted_note(count: int) -> str:
    """The text of the note that stands for ``count`` messages left out."""
    return f"[{count} earlier message{'' if count == 1 else 's'} left out to fit the summarizer's context]"


def _prompt_tokens(request: SummaryRequest) -> int:
    return estimate_tokens(system_prompt(request.kind)) + estimate_tokens(summary_prompt(request, transcript=False))


def estimate_request_tokens(request: SummaryRequest) -> int:
    """The estimated input tokens of ``request`` once sent (without the answer's ``max_tokens``)."""
    return _prompt_tokens(request) + sum(estimate_message_tokens(message) for message in request.history)


def request_fits(request: SummaryRequest, context_tokens: int) -> bool:
    """Whether ``request`` and its answer fit a context of ``context_tokens`` (0: unlimited)."""
    if context_tokens <= 0:
        return True
    return estimate_request_tokens(request) + request.max_tokens <= context_tokens


# -- stages ----------------------------------------------------------------------------------------------


def _map_parts(history: Sequence[MessageWithParts], change: Callable[[Any], Any | None]) -> list[MessageWithParts]:
    """``history`` with each part replaced by ``change(part)`` (None drops it); unchanged messages are kept."""
    result = []
    for message in history:
        parts = [new for part in message.parts if (new := change(part)) is not None]
        same = len(parts) == len(message.parts) and all(a is b for a, b in zip(parts, message.parts))
        result.append(message if same else message.model_copy(update={"parts": parts}))
    return result


def _drop_pruned(part: Any) -> Any | None:
    if isinstance(part, ToolPart) and part.state.status == "completed" and part.state.time.compacted:
        return None
    return part


def _cut_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return cut_middle(value, limit)
    if isinstance(value, dict):
        return {key: _cut_value(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_value(item, limit) for item in value]
    return value


def _cut_tool(limit: int) -> Callable[[Any], Any]:
    def change(part: Any) -> Any:
        if not isinstance(part, ToolPart):
            return part
        state = part.state
        update: dict[str, Any] = {}
        if state.output is not None and len(state.output) > limit:
            update["output"] = cut_middle(state.output, limit)
        if state.error is not None and len(state.error) > limit:
            update["error"] = cut_middle(state.error, limit)
        arguments = _cut_value(state.input, limit)
        if arguments != state.input:
            update["input"] = arguments
        return part.model_copy(update={"state": state.model_copy(update=update)}) if update else part

    return change


def _cut_text(limit: int) -> Callable[[Any], Any]:
    def change(part: Any) -> Any:
        if isinstance(part, TextPart) and len(part.text) > limit:
            return part.model_copy(update={"text": cut_middle(part.text, limit)})
        return part

    return change


def _turn_starts(history: Sequence[MessageWithParts]) -> list[int]:
    starts = [index for index, message in enumerate(history) if index and is_split_boundary(message)]
    return [0, *starts] if history else []


def _note_message(first_dropped: MessageWithParts, count: int) -> MessageWithParts:
    info = first_dropped.info
    message = Message(id=f"{info.id}~omitted", session_id=info.session_id, role="user", synthetic=True,
                      time=MessageTime(created=info.time.created))
    return MessageWithParts(info=message, parts=[TextPart(text=omitted_note(count), synthetic=True)])


def _is_compaction_summary(message: MessageWithParts) -> bool:
    return message.info.role == "assistant" and message.info.summary and not is_tier_summary(message)


def _without_oldest(request: SummaryRequest, drop_to: int, previous: str | None) -> SummaryRequest:
    history = request.history
    note = _note_message(history[0], drop_to)
    return request.model_copy(update={"history": [note, *history[drop_to:]], "previous_summary": previous})


def _drop_oldest_turns(request: SummaryRequest, context_tokens: int) -> SummaryRequest:
    """Stage 3: the fewest oldest turns dropped that make ``request`` fit (all but the newest at most)."""
    history = request.history
    starts = _turn_starts(history)
    if len(starts) < 2:
        return request
    costs = [estimate_message_tokens(message) for message in history]
    after = [0] * (len(history) + 1)  # after[i]: the estimate of history[i:]
    for index in range(len(history) - 1, -1, -1):
        after[index] = after[index + 1] + costs[index]
    previous, overhead, scanned = request.previous_summary, _prompt_tokens(request), 0
    for drop_to in starts[1:]:
        summaries = [m for m in history[scanned:drop_to] if m.info.role == "assistant" and m.info.summary]
        scanned = drop_to
        if summaries:  # the prompt may change: a previous summary to carry over, or one no longer in the history
            if request.previous_summary is None:
                texts = [message_text(m) for m in summaries if _is_compaction_summary(m)]
                previous = next((text for text in reversed(texts) if text), previous)
            overhead = _prompt_tokens(_without_oldest(request, drop_to, previous))
        note = estimate_message_tokens(_note_message(history[0], drop_to))
        if overhead + after[drop_to] + note + request.max_tokens <= context_tokens:
            break
    return _without_oldest(request, drop_to, previous)


def shrink_request(
    request: SummaryRequest, context_tokens: int, *, cut_chars: int = DEFAULT_CUT_CHARS
) -> SummaryRequest:
    """A copy of ``request`` made to fit ``context_tokens`` by the staged shrinking of the module rules."""
    if cut_chars < 1:
        raise InvalidInput(f"cut_chars must be a positive number of characters, not {cut_chars}")
    current = request.model_copy(update={"history": list(request.history)})
    if request_fits(current, context_tokens):
        return current
    current = current.model_copy(update={"history": _map_parts(current.history, _drop_pruned)})
    if request_fits(current, context_tokens):
        return current
    current = current.model_copy(update={"history": _map_parts(current.history, _cut_tool(cut_chars))})
    if request_fits(current, context_tokens):
        return current
    current = _drop_oldest_turns(current, context_tokens)
    if request_fits(current, context_tokens):
        return current
    return current.model_copy(update={"history": _map_parts(current.history, _cut_text(cut_chars))})
