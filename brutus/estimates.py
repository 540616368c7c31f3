"""What a history occupies in a model's context: estimates of messages and parts, and the context size.

Rules:

- ``estimate_message_tokens`` is conservative (it counts what may be sent, as it would be rendered): text
  (not ignored), reasoning, tool name + JSON input + the rendered result (a pruned output counts as its short
  placeholder), file mentions, subtasks and the compaction prompt, plus ``MESSAGE_OVERHEAD_TOKENS`` per message.
- ``context_size`` = the last assistant message's reported usage (input + output + cache read + cache write)
  plus the tool results added to it after that call and the estimates of every message after it. Usage
  reported before a summary message measured the context that the summary replaced, so the search stops
  at a summary; without usable usage the whole history is estimated.
- ``has_conversation_messages``: whether anything in a history is worth summarizing.

How much of the context may be used is in ``brutus.limits``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .models import MessageWithParts, Part, ReasoningPart, TokenCounts, ToolPart
from .render import part_text, tool_result
from .tokens import estimate_json_tokens, estimate_tokens

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "context_size",
    "estimate_message_tokens",
    "estimate_part_tokens",
    "has_conversation_messages",
]

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators (seeds 000, 003)


def estimate_part_tokens(part: Part) -> int:
    """The estimate of one part as it may be sent to a model."""
    if isinstance(part, ToolPart):
        text, _ = tool_result(part.state)
        return estimate_tokens(part.tool) + estimate_json_tokens(part.state.input) + estimate_tokens(text)
    if isinstance(part, ReasoningPart):
        return estimate_tokens(part.text)
    return estimate_tokens(part_text(part))


def estimate_message_tokens(message: MessageWithParts) -> int:
    """A conservative estimate of one message: its parts plus ``MESSAGE_OVERHEAD_TOKENS``."""
    return MESSAGE_OVERHEAD_TOKENS + sum(estimate_part_tokens(part) for part in message.parts)


def has_conversation_messages(history: Iterable[MessageWithParts]) -> bool:
    """Whether anything is worth summarizing: a non-blank, non-ignored text, a tool call, a file or a subtask."""
    for message in history:
        for part in message.parts:
            if part.type == "text":
                if not part.ignored and part.text.strip():
                    return True
            elif part.type in ("tool", "file", "subtask"):
                return True
    return False


def _reported(tokens: TokenCounts) -> int:
    return tokens.input + tokens.output + tokens.cache.read + tokens.cache.write


def context_size(history: Sequence[MessageWithParts]) -> int:
    """The tokens ``history`` (the view that will be sent) occupies: last reported usage plus estimates after it."""
    for index in range(len(history) - 1, -1, -1):
        info = history[index].info
        if info.role != "assistant":
            continue
        if info.summary:
            break
        if _reported(info.tokens):
            added = sum(
                estimate_tokens(tool_result(part.state)[0])
                for part in history[index].parts
                if isinstance(part, ToolPart)
            )
            return _reported(info.tokens) + added + sum(estimate_message_tokens(m) for m in history[index + 1 :])
    return sum(estimate_message_tokens(message) for message in history)
