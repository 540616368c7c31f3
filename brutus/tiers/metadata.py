"""What a tier summary message carries in ``Message.metadata``, validated when read.

Rules:

- A *tier summary* is an assistant message whose metadata has ``summarized: true`` and a ``summary_type`` of
  ``tool_call``, ``threshold`` or ``goal_batch``; its one text part starts with ``[SUMMARIZED]`` (the first
  two) or ``[GOAL BATCH]``.
- ``covered_tokens`` is the estimate of the tier view range it replaced (``view_tokens``), to compare with the
  summary's own estimate; a goal batch is never larger (``brutus.tiers.goal_batch``).
- ``covers`` names the range it stands for by the ids and seqs of its first and last *original* message
  (never another summary): a block that covers earlier summaries covers what they covered.
- ``turn_count`` is how many user turns the range touches (a goal batch: the turns it compacted).
- ``usage`` keeps the summarizer's reported usage here and not in the message's token columns, which
  ``context_size`` reads as the size of the context the model last saw.
- Metadata that does not validate makes no tier summary: ``tier_metadata`` returns None.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..models import MessageWithParts, TokenCounts
from ..summarizers.prompts import GOAL_BATCH_TAG, SUMMARIZED_TAG

__all__ = [
    "TIER_KINDS",
    "TierCovers",
    "TierKind",
    "TierMetadata",
    "claims_tier_summary",
    "tier_metadata",
    "tier_text",
]

TierKind = Literal["tool_call", "threshold", "goal_batch"]
TIER_KINDS: tuple[TierKind, ...] = ("tool_call", "threshold", "goal_batch")


class TierCovers(BaseModel):
    """The original messages a tier summary stands for: ``from_id`` … ``to_id``, both included."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    from_id: str
    to_id: str
    from_seq: int = 0
    to_seq: int = 0


class TierMetadata(BaseModel):
    """The metadata of a tier summary message (extra keys are kept by the store and ignored here)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    summarized: Literal[True] = True
    summary_type: TierKind
    turn_count: int = 0
    covers: TierCovers
    covered_messages: int = 0
    covered_tokens: int = 0
    usage: TokenCounts | None = None
    model: str | None = None
    fallback: str | None = None

    def dump(self) -> dict[str, Any]:
        """The JSON object stored in ``Message.metadata``."""
        return self.model_dump(mode="json", exclude_none=True)


def claims_tier_summary(message: MessageWithParts) -> bool:
    """Whether the message says it is a tier summary (its metadata names a tier), valid or not."""
    metadata = message.info.metadata
    return (
        message.info.role == "assistant"
        and isinstance(metadata, dict)
        and metadata.get("summary_type") in TIER_KINDS
    )


def tier_metadata(message: MessageWithParts) -> TierMetadata | None:
    """The validated tier metadata of a message, or None when it is not (or not validly) a tier summary."""
    if not claims_tier_summary(message):
        return None
    try:
        return TierMetadata.model_validate(message.info.metadata)
    except ValidationError:
        return None


def tier_text(kind: TierKind, text: str) -> str:
    """The text of a tier summary of ``kind``: ``text`` stripped, starting with its tag."""
    tag = GOAL_BATCH_TAG if kind == "goal_batch" else SUMMARIZED_TAG
    text = text.strip()
    return text if text.startswith(tag) else f"{tag}\n{text}"
