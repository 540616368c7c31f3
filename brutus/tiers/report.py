"""What one run of the tiers did: per strategy, the summaries written, the turns they took and tokens saved.

Token figures are ``view_tokens`` of the tier view (estimates of what would be sent): ``tokens_before`` when
the strategy started, ``tokens_after`` once its summaries were written. A strategy that writes a block for a
small run can make the view a little larger (``tokens_saved`` below zero): the ADR accepts that for
``[SUMMARIZED]`` blocks because they are what makes a turn eligible for a goal batch. A ``[GOAL BATCH]`` never
does: it is never larger than the view it replaces (``brutus.tiers.goal_batch``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .metadata import TierKind

__all__ = ["StrategyReport", "TierRunReport"]


class StrategyReport(BaseModel):
    """One strategy in one run."""

    model_config = ConfigDict(extra="forbid")

    kind: TierKind
    ran: bool = False  # should_run said yes
    summaries: int = 0
    turns: int = 0  # user turns touched (a goal batch: the turns it compacted)
    messages: int = 0  # original messages its summaries cover
    tokens_before: int = 0
    tokens_after: int = 0
    fallbacks: int = 0  # summaries written by a fallback because the summarizer failed
    summary_ids: list[str] = Field(default_factory=list)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


class TierRunReport(BaseModel):
    """One run of the strategy manager over a session (or an in-memory history)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = None
    strategies: list[StrategyReport] = Field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def summaries(self) -> int:
        return sum(report.summaries for report in self.strategies)

    @property
    def turns_compacted(self) -> int:
        """User turns folded into ``[GOAL BATCH]`` blocks by this run."""
        return sum(report.turns for report in self.strategies if report.kind == "goal_batch")

    def strategy(self, kind: TierKind) -> StrategyReport | None:
        return next((report for report in self.strategies if report.kind == kind), None)
