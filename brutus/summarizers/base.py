"""What a summarizer is asked and what it answers, and the two protocols a summarizer implements.

A ``SummaryRequest`` carries the history to summarize (already filtered and, for a prefix compaction, cut at
the compaction marker), the previous summary for a rolling summary, the user's custom instructions, the
output budget and the kind of summary: ``compaction`` (seed 004's summary agent) or one of the three tiers
of ADR-0041 (``tool_call`` and ``threshold`` give a ``[SUMMARIZED]`` block, ``goal_batch`` a ``[GOAL BATCH]``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..models import MessageWithParts, TokenCounts

__all__ = [
    "SUMMARY_KINDS",
    "AsyncSummarizer",
    "Summarizer",
    "Summary",
    "SummaryKind",
    "SummaryRequest",
]

SummaryKind = Literal["compaction", "tool_call", "threshold", "goal_batch"]
SUMMARY_KINDS: tuple[SummaryKind, ...] = ("compaction", "tool_call", "threshold", "goal_batch")


class SummaryRequest(BaseModel):
    """The input of one summarizer call. Summarizers and ``shrink_request`` never mutate it."""

    model_config = ConfigDict(extra="forbid")

    history: list[MessageWithParts]
    previous_summary: str | None = None
    instructions: str | None = None
    max_tokens: int = Field(default=4096, ge=1)
    kind: SummaryKind = "compaction"


class Summary(BaseModel):
    """A summarizer's answer: the text, the model that wrote it, its usage and cost, and why it stopped."""

    model_config = ConfigDict(extra="forbid")

    text: str
    model: str
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    cost: float = 0.0
    stop_reason: str | None = None
    metadata: dict[str, Any] | None = None  # kept on the summary message (a server compaction's signed block)


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns a ``SummaryRequest`` into a ``Summary`` (or raises ``SummarizerError``)."""

    def summarize(self, request: SummaryRequest) -> Summary: ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """The awaitable twin of ``Summarizer``."""

    async def asummarize(self, request: SummaryRequest) -> Summary: ...
