"""What a ``[GOAL BATCH]`` must be before it is written (ADR-0041), and how much of the user's direction it kept.

Rules:

- It is never larger than the span of the tier view it replaces: the estimate of the summary message (its
  text plus the message overhead, as ``estimate_message_tokens``) is at most ``view_tokens`` of the covered
  view messages (their texts, tool inputs and outputs), which its metadata keeps as ``covered_tokens``. The
  summarizer is asked for at most ``goal_batch_budget`` tokens: that span less the message overhead and
  the tag, and never more than ``goal_batch_max_tokens``.
- It has ADR-0041's form: it starts with the tag, it holds a ``## Human Direction`` section with something in
  it when the turns it covers hold a user direction, and it was not cut off (stop reason ``max_tokens``).
- A summary that breaks a rule (``goal_batch_problem`` says which) is replaced by the extractive one written
  within the budget, which keeps every direction first and distils the rest; the summary's metadata then
  says ``fallback: extractive``. Should that break a rule too, or fail, no goal batch is written (never a
  crash, never a larger view). A model may word the directions its own way: only their section is checked.
- ``direction_coverage`` measures what a goal batch kept of the user's direction: the share of the distinct
  words of the covered user directions that its Human Direction section holds (1.0 when there are none).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from ..models import MessageWithParts
from ..estimates import MESSAGE_OVERHEAD_TOKENS
from ..summarizers.base import Summary, SummaryRequest
from ..summarizers.facts import user_directions
from ..summarizers.extractive import EXTRACTIVE_MODEL, extractive_summary
from ..summarizers.prompts import GOAL_BATCH_TAG
from ..tokens import estimate_tokens
from .config import TierConfig
from .metadata import tier_text
from .view import view_tokens

__all__ = [
    "HUMAN_DIRECTION",
    "direction_coverage",
    "fit_goal_batch",
    "goal_batch_budget",
    "goal_batch_problem",
    "section_text",
]

log = logging.getLogger("brutus.tiers")

HUMAN_DIRECTION = "Human Direction"
_CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_WORD = re.compile(r"\w+")


def goal_batch_budget(covered: Sequence[MessageWithParts], config: TierConfig) -> int:
    """The most tokens the text of the goal batch of the view messages ``covered`` may hold."""
    room = view_tokens(covered) - MESSAGE_OVERHEAD_TOKENS - estimate_tokens(f"{GOAL_BATCH_TAG}\n")
    return max(1, min(config.goal_batch_max_tokens, room))


def section_text(text: str, heading: str) -> str | None:
    """The body of the ``## heading`` section of a summary text, or None when it has none."""
    headings = list(_HEADING.finditer(text))
    for number, match in enumerate(headings):
        if match.group(1).strip().lower() == heading.lower():
            end = headings[number + 1].start() if number + 1 < len(headings) else len(text)
            return text[match.end() : end].strip()
    return None


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


def direction_coverage(text: str, covered: Sequence[MessageWithParts]) -> float:
    """The share of the distinct words of the user directions in ``covered`` found in the Human Direction
    section of ``text`` (1.0 when ``covered`` holds no direction, 0.0 when ``text`` has no such section)."""
    wanted = _words("\n".join(d for message in covered for d in user_directions(message)))
    if not wanted:
        return 1.0
    return len(wanted & _words(section_text(text, HUMAN_DIRECTION) or "")) / len(wanted)


def goal_batch_problem(summary: Summary, covered: Sequence[MessageWithParts]) -> str | None:
    """Why ``summary`` may not be written as the goal batch of the view messages ``covered`` (None: it may)."""
    text = tier_text("goal_batch", summary.text)
    size, covered_tokens = MESSAGE_OVERHEAD_TOKENS + estimate_tokens(text), view_tokens(covered)
    if size > covered_tokens:
        return f"it is {size} tokens, larger than the {covered_tokens} of the turns it replaces"
    if summary.stop_reason in _CUT_OFF:
        return f"it was cut off ({summary.stop_reason})"
    if not section_text(text, HUMAN_DIRECTION) and any(user_directions(m) for m in covered):
        return "it has no Human Direction section, or an empty one"
    return None


def fit_goal_batch(
    request: SummaryRequest, summary: Summary, fallback: str | None
) -> tuple[Summary, str | None] | None:
    """``summary`` (and its ``fallback``) when it may be written as the goal batch of ``request``; else the
    extractive goal batch of ``request`` (whose ``max_tokens`` is the budget), with the usage and cost of the
    summary it replaces; None when even that cannot be written (nothing is, this run)."""
    problem = goal_batch_problem(summary, request.history)
    if problem is None:
        return summary, fallback
    log.warning("goal batch from %s refused (%s); writing the extractive one", summary.model, problem)
    try:
        extractive = Summary(text=extractive_summary(request), model=EXTRACTIVE_MODEL, tokens=summary.tokens,
                             cost=summary.cost)
    except Exception as exc:  # noqa: BLE001  never crash: the batch waits for the next run
        log.warning("extractive goal batch failed (%s: %s); no goal batch written", type(exc).__name__, exc)
        return None
    problem = goal_batch_problem(extractive, request.history)
    if problem is not None:
        log.warning("extractive goal batch refused too (%s); no goal batch written", problem)
        return None
    return extractive, "extractive"
