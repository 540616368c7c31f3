"""Where to split a history into the part to summarize and the tail kept verbatim (seeds 000, 002).

Rules:

- The tail is ``history[index:]``; its size is the sum of ``estimate_message_tokens`` over it.
- The budget is ``preserve_tokens``, or ``ratio`` (0.4, "keep ~40 %") of ``context_limit`` when it is None,
  floored. A ``context_limit`` of 0 means unlimited: everything fits.
- A split only happens at a *boundary*: a user message that is not a tool-results carrier (one whose parts
  are all tool parts). A turn (a user message and the assistant steps answering it) is never split, and a
  tool call is never separated from its result: in brutus both live in the same tool part of an assistant
  message, which always stays with its turn.
- ``split_point`` returns the *oldest* boundary whose tail fits the budget: as much as possible is kept.
  0 (when the history starts with a fitting user message) means nothing needs summarizing.
- When no boundary's tail fits (even the last turn is over budget), or there is no boundary at all, it
  returns ``len(history)``: summarize everything, keep no tail. A tail over budget would keep the context
  over its limit and the compaction would not help (brutus stops such compactions as stalled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .errors import InvalidInput
from .models import MessageWithParts, ToolPart
from .estimates import estimate_message_tokens

__all__ = ["DEFAULT_PRESERVE_RATIO", "is_split_boundary", "preserve_budget", "split_point"]

DEFAULT_PRESERVE_RATIO = 0.4


def is_split_boundary(message: MessageWithParts) -> bool:
    """A user message that does not only carry tool results."""
    if message.info.role != "user":
        return False
    return not (message.parts and all(isinstance(part, ToolPart) for part in message.parts))


def preserve_budget(
    preserve_tokens: int | None = None, *, context_limit: int | None = None, ratio: float = DEFAULT_PRESERVE_RATIO
) -> float:
    """The tail budget in tokens (``math.inf`` for an unlimited context)."""
    if preserve_tokens is not None:
        if preserve_tokens < 0:
            raise InvalidInput(f"preserve_tokens must be >= 0, not {preserve_tokens}")
        return preserve_tokens
    if context_limit is None:
        raise InvalidInput("split_point needs preserve_tokens or context_limit")
    if context_limit < 0:
        raise InvalidInput(f"context_limit must be >= 0 (0 is unlimited), not {context_limit}")
    if not 0 < ratio <= 1:
        raise InvalidInput(f"ratio must be in (0, 1], not {ratio}")
    if context_limit == 0:
        return math.inf
    return math.floor(round(context_limit * ratio, 6))  # 0.29 * 100 is 28.999…: round before flooring


def split_point(
    history: Sequence[MessageWithParts],
    preserve_tokens: int | None = None,
    *,
    context_limit: int | None = None,
    ratio: float = DEFAULT_PRESERVE_RATIO,
) -> int:
    """The index of the oldest user-message boundary whose tail fits the budget; ``len(history)`` if none."""
    budget = preserve_budget(preserve_tokens, context_limit=context_limit, ratio=ratio)
    best = len(history)
    tail = 0
    for index in range(len(history) - 1, -1, -1):
        tail += estimate_message_tokens(history[index])
        if tail > budget:
            break
        if is_split_boundary(history[index]):
            best = index
    return best
