"""``TierConfig``: the settings of the three tiers (ADR-0041 defaults where the ADR gives them).

Rules:

- Ages and windows count *messages of the tier view* (``tier_view``: each summary stands for its range as one
  message), as the ADR's strategies count messages of the context they rewrite.
- ToolCallSummarization leaves the newest ``tool_call_recent_messages`` alone and only writes a block for a run
  of tool calls holding at least ``tool_call_min_tokens`` (a smaller run would not shrink by much).
- ThresholdSummarization fires when the view's estimate is above ``threshold_tokens`` and leaves the newest
  ``threshold_recent_messages`` alone.
- GoalBatchCompaction (the ADR's table): turns at least ``min_turns_old_threshold`` messages old, fired when
  ``min_turns_to_compact`` of them sit side by side, at most ``max_turns_per_batch`` per batch (so each batch
  holds between the two), and at most ``max_batches_per_run`` summarizer calls per run (the ADR's "one LLM
  call per compaction run").
- Summaries are asked for within ``summary_max_tokens`` (``[SUMMARIZED]``) or ``goal_batch_max_tokens``
  (``[GOAL BATCH]``, and never more than the view it replaces); a request larger than ``summarizer_context``
  is shrunk before it is sent.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InvalidInput

__all__ = ["TierConfig"]


class TierConfig(BaseModel):
    """Settings of the tiered compaction; every count is validated up front."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_call_recent_messages: int = Field(default=20, ge=0)
    tool_call_min_tokens: int = Field(default=2_000, ge=0)
    threshold_tokens: int = Field(default=50_000, ge=0)
    threshold_recent_messages: int = Field(default=20, ge=0)
    min_turns_old_threshold: int = Field(default=20, ge=0)
    min_turns_to_compact: int = Field(default=3, ge=1)
    max_turns_per_batch: int = Field(default=6, ge=1)
    max_batches_per_run: int = Field(default=1, ge=1)
    summary_max_tokens: int = Field(default=1_024, ge=1)
    goal_batch_max_tokens: int = Field(default=2_048, ge=1)
    summarizer_context: int = Field(default=200_000, ge=0)

    @model_validator(mode="after")
    def _batch_bounds(self) -> TierConfig:
        if self.max_turns_per_batch < self.min_turns_to_compact:
            raise InvalidInput(
                f"max_turns_per_batch ({self.max_turns_per_batch}) must be at least min_turns_to_compact "
                f"({self.min_turns_to_compact}), or no batch could ever be made"
            )
        return self
