"""The three strategies of ADR-0041, as pure functions over a tier view: what each would summarize now.

Rules (ages and windows count view messages; a *raw* assistant message is one that is neither a prefix
summary nor a tier block; a range is always whole messages, so a tool call never leaves its result):

1. ``ToolCallSummarization``: runs of consecutive raw assistant messages that each hold a tool call, every
   call finished (completed or error), all older than the newest ``tool_call_recent_messages``; a run is
   taken when its estimate is at least ``tool_call_min_tokens``. Each run becomes one ``[SUMMARIZED]`` block.
2. ``ThresholdSummarization``: when the view's estimate is above ``threshold_tokens``, every run of raw
   assistant messages older than the newest ``threshold_recent_messages`` becomes one ``[SUMMARIZED]``
   block. User messages and existing summaries are never touched.
3. ``GoalBatchCompaction``: turns (``turn_units``) that are eligible — complete, old, no barrier — and sit
   side by side form runs; a run of at least ``min_turns_to_compact`` gives a batch of its oldest turns, at
   most ``max_turns_per_batch``, and what is left of it may give more (each of at least the minimum), up to
   ``max_batches_per_run`` batches, oldest first. So every ``[GOAL BATCH]`` covers between the minimum and
   the maximum of whole turns (3 to 6 by default). A ``[GOAL BATCH]`` block is never batched again: ADR-0041
   batches turns, and a goal batch's Human Direction must carry the direction of every turn it covers,
   which a batch of batches cannot do and still be smaller than what it replaces. What is older than the
   goal batches is the prefix compaction's (seed 004). Fewer than the minimum of eligible turns between two
   things that are not eligible turns wait, verbatim, for a newer turn to join them or for the prefix
   compaction. Deviation from the ADR, which counts eligible turns wherever they are: the turns of a batch
   must sit side by side, since one message takes their place, so ``should_run`` asks for such a run.

Each strategy's ``should_run(view, config)`` is whether ``select(view, config)`` finds anything. They take a
tier view (``tier_view``): in a raw history, superseded summaries would still sit where they were written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..models import MessageWithParts, ToolPart
from .config import TierConfig
from .metadata import TierKind
from .turns import Unit, is_tier_block, turn_units
from .view import view_tokens

__all__ = [
    "DEFAULT_STRATEGIES",
    "GoalBatchCompaction",
    "Selection",
    "Strategy",
    "ThresholdSummarization",
    "ToolCallSummarization",
    "goal_batch_selections",
    "is_raw_assistant",
    "is_tool_step",
    "threshold_selections",
    "tool_call_selections",
]

_FINISHED = ("completed", "error")


@dataclass(frozen=True, slots=True)
class Selection:
    """One summary to write: ``view[start:end + 1]`` becomes one block of ``kind``."""

    kind: TierKind
    start: int
    end: int
    turn_count: int  # the user turns the block will stand for
    parent_id: str | None = None  # the user message of the turn a [SUMMARIZED] block sits in

    def messages(self, view: Sequence[MessageWithParts]) -> list[MessageWithParts]:
        return list(view[self.start : self.end + 1])


def is_raw_assistant(message: MessageWithParts) -> bool:
    """An assistant message that is neither a prefix summary nor a tier block."""
    return message.info.role == "assistant" and not message.info.summary and not is_tier_block(message)


def is_tool_step(message: MessageWithParts) -> bool:
    """A raw assistant message with at least one tool call, every one of them finished."""
    tools = [part for part in message.parts if isinstance(part, ToolPart)]
    return is_raw_assistant(message) and bool(tools) and all(t.state.status in _FINISHED for t in tools)


def _runs(
    view: Sequence[MessageWithParts], limit: int, keep: Callable[[MessageWithParts], bool]
) -> list[tuple[int, int]]:
    """Maximal runs ``(start, end)`` of messages ``keep`` accepts, among ``view[:limit]``."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for index in range(max(0, min(limit, len(view)))):
        if keep(view[index]):
            start = index if start is None else start
            continue
        if start is not None:
            runs.append((start, index - 1))
            start = None
    if start is not None:
        runs.append((start, min(limit, len(view)) - 1))
    return runs


def _block(kind: TierKind, view: Sequence[MessageWithParts], start: int, end: int) -> Selection:
    """A ``[SUMMARIZED]`` selection, with the user message of the turn it sits in (if any)."""
    for index in range(start - 1, -1, -1):
        info = view[index].info
        if info.role == "user":
            return Selection(kind, start, end, 1, info.id)
    return Selection(kind, start, end, 0, None)


def tool_call_selections(view: Sequence[MessageWithParts], config: TierConfig) -> list[Selection]:
    """Strategy 1: old runs of finished tool calls worth summarizing."""
    limit = len(view) - config.tool_call_recent_messages
    return [
        _block("tool_call", view, start, end)
        for start, end in _runs(view, limit, is_tool_step)
        if view_tokens(view[start : end + 1]) >= config.tool_call_min_tokens
    ]


def threshold_selections(view: Sequence[MessageWithParts], config: TierConfig) -> list[Selection]:
    """Strategy 2: above the threshold, every old run of raw assistant messages."""
    if view_tokens(view) <= config.threshold_tokens:
        return []
    limit = len(view) - config.threshold_recent_messages
    return [_block("threshold", view, start, end) for start, end in _runs(view, limit, is_raw_assistant)]


def goal_batch_selections(view: Sequence[MessageWithParts], config: TierConfig) -> list[Selection]:
    """Strategy 3: the oldest batches of eligible turns sitting side by side."""
    units = turn_units(view)
    found: list[Selection] = []
    run: list[Unit] = []
    for number, unit in enumerate([*units, None]):
        if unit is not None and unit.eligible(config, last=number == len(units) - 1):
            run.append(unit)
            continue
        for first in range(0, len(run), config.max_turns_per_batch):
            chunk = run[first : first + config.max_turns_per_batch]
            if len(chunk) >= config.min_turns_to_compact:
                found.append(Selection("goal_batch", chunk[0].start, chunk[-1].end, len(chunk)))
        run = []
    return found[: config.max_batches_per_run]


# -- the strategy objects the manager runs ------------------------------------------------------------


@runtime_checkable
class Strategy(Protocol):
    """One tier: what kind of block it writes, whether it has work, and what that work is."""

    kind: TierKind

    def should_run(self, view: Sequence[MessageWithParts], config: TierConfig) -> bool: ...

    def select(self, view: Sequence[MessageWithParts], config: TierConfig) -> list[Selection]: ...


class _Tier:
    """A strategy is its ``select``: it should run when that finds anything."""

    kind: TierKind
    select: Callable[[Sequence[MessageWithParts], TierConfig], list[Selection]]

    def should_run(self, view: Sequence[MessageWithParts], config: TierConfig) -> bool:
        return bool(self.select(view, config))


class ToolCallSummarization(_Tier):
    """Tier 1: old runs of raw tool calls → ``[SUMMARIZED]``."""

    kind: TierKind = "tool_call"
    select = staticmethod(tool_call_selections)


class ThresholdSummarization(_Tier):
    """Tier 2: old assistant blocks → ``[SUMMARIZED]`` once the view is above the token threshold."""

    kind: TierKind = "threshold"
    select = staticmethod(threshold_selections)


class GoalBatchCompaction(_Tier):
    """Tier 3: old complete turns → ``[GOAL BATCH]``, proactively, on age and count."""

    kind: TierKind = "goal_batch"
    select = staticmethod(goal_batch_selections)


DEFAULT_STRATEGIES: tuple[Strategy, ...] = (ToolCallSummarization(), ThresholdSummarization(), GoalBatchCompaction())
