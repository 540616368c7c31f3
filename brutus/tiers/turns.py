"""Turns in a tier view: what GoalBatchCompaction batches, and never splits (ADR-0041).

Rules:

- A *turn* starts at a user message that is not a tool-results carrier (``is_split_boundary``) and runs up
  to the next such user message or ``[GOAL BATCH]`` block. User messages that follow each other belong to one
  turn (a message sent while the agent was busy, then its answer): the ADR reads the first of them as an
  incomplete turn that would never close, which would leave it in the context for good.
- A ``[GOAL BATCH]`` block is a unit of its own (``batch``), standing for the turns it compacted. It is never
  batched again: a goal batch is made of turns, and a turn is a user message with its ``[SUMMARIZED]``
  blocks (ADR-0041); what is older than the goal batches is the prefix compaction's (seed 004). Messages
  before the first user message (a tail, an assistant-first history) make a ``loose`` unit: never batched.
- A turn is *complete* when it holds at least one ``[SUMMARIZED]`` block (a ``tool_call`` or ``threshold``
  summary, or an imported message whose text starts with the tag); an incomplete turn may still be in
  progress and is never eligible.
- A unit's *age* is the number of view messages after its last one; it is *old* when that is at least
  ``min_turns_old_threshold``. The last unit of a view is never old: nothing has closed it yet.
- A turn is *eligible* for a goal batch when it is complete, old and holds no barrier; nothing else is.
- A unit that holds a barrier (a compaction message, a prefix summary, a kept tail's start) is never
  eligible: those belong to the prefix compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..models import MessageWithParts
from ..split import is_split_boundary
from ..summarizers.prompts import GOAL_BATCH_TAG, SUMMARIZED_TAG, message_text
from .config import TierConfig
from .metadata import tier_metadata
from .view import barrier_ids, is_barrier

__all__ = [
    "Unit",
    "UnitKind",
    "is_goal_batch_block",
    "is_summarized_block",
    "is_tier_block",
    "turn_units",
]

UnitKind = Literal["turn", "batch", "loose"]


@dataclass(frozen=True, slots=True)
class Unit:
    """A run of view messages ``view[start:end + 1]``, and what GoalBatchCompaction needs to know of it."""

    kind: UnitKind
    start: int
    end: int
    complete: bool  # a turn holding a [SUMMARIZED] block, or a goal batch (complete, never eligible)
    barrier: bool
    turn_count: int  # the user turns it stands for
    age: int  # view messages after it

    def eligible(self, config: TierConfig, *, last: bool) -> bool:
        """A turn that is complete, old enough, holds no barrier and is not the view's last unit."""
        old = self.age >= config.min_turns_old_threshold
        return self.kind == "turn" and self.complete and not self.barrier and old and not last


def _tagged(message: MessageWithParts, tag: str) -> bool:
    return message.info.role == "assistant" and message_text(message).startswith(tag)


def is_goal_batch_block(message: MessageWithParts) -> bool:
    """A ``[GOAL BATCH]`` message: a ``goal_batch`` tier summary, or an assistant text with the tag."""
    metadata = tier_metadata(message)
    if metadata is not None:
        return metadata.summary_type == "goal_batch"
    return _tagged(message, GOAL_BATCH_TAG)


def is_summarized_block(message: MessageWithParts) -> bool:
    """A ``[SUMMARIZED]`` message: a ``tool_call`` or ``threshold`` tier summary, or an assistant text with
    the tag."""
    metadata = tier_metadata(message)
    if metadata is not None:
        return metadata.summary_type != "goal_batch"
    return _tagged(message, SUMMARIZED_TAG)


def is_tier_block(message: MessageWithParts) -> bool:
    """Either kind of tier block: nothing a strategy summarizes again as raw work."""
    return is_summarized_block(message) or is_goal_batch_block(message)


def _batch_turns(message: MessageWithParts) -> int:
    metadata = tier_metadata(message)
    return metadata.turn_count if metadata is not None else 1


def turn_units(view: Sequence[MessageWithParts]) -> list[Unit]:
    """The view cut into turns, goal batches and loose runs, in order, covering every message once."""
    tails = barrier_ids(view)
    units: list[Unit] = []
    index, size = 0, len(view)
    while index < size:
        start = index
        if is_goal_batch_block(view[index]):
            units.append(Unit("batch", index, index, True, False, _batch_turns(view[index]), size - 1 - index))
            index += 1
            continue
        kind: UnitKind = "turn" if is_split_boundary(view[index]) else "loose"
        while index < size and is_split_boundary(view[index]):  # user messages in a row: one turn
            index += 1
        while index < size and not is_split_boundary(view[index]) and not is_goal_batch_block(view[index]):
            index += 1
        end = index - 1
        members = view[start : end + 1]
        units.append(
            Unit(
                kind=kind,
                start=start,
                end=end,
                complete=kind == "turn" and any(is_summarized_block(m) for m in members),
                barrier=any(is_barrier(m, tails) for m in members),
                turn_count=1 if kind == "turn" else 0,
                age=size - 1 - end,
            )
        )
    return units
