"""The tiers on a ``SessionStore``: ``run_tiers`` writes the summaries, ``store_view`` reads what the model sees.

Rules:

- ``run_tiers`` reads the filtered history (``store.filter_compacted``), runs the ``StrategyManager`` over
  it, and writes each summary as one assistant message with one text part, in its own unit of work
  (``store.batch()``): a failure part way leaves every summary written before it whole, and none half
  written. Summarizer calls happen outside any transaction. It reads and writes through the store's public
  methods only (``filter_compacted``, ``batch``, ``append_message``, ``append_part``).
- It holds the session's compaction lock for the run (``CompactionInProgress`` if a compaction or another
  tier run holds it): tier summaries and the prefix compaction both decide from the view, and two runs at
  once would summarize the same turns twice.
- ``store_view`` is ``tier_view(store.filter_compacted(session_id))``: the history back to the last
  boundary with every covered range replaced by its summary. It is what to render for the model once
  tiers run; ``filter_compacted`` itself is unchanged and still returns the originals and the summaries
  side by side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..models import MessageWithParts, TextPart
from .config import TierConfig
from .manager import NewSummary, StrategyManager
from .report import TierRunReport
from .strategies import DEFAULT_STRATEGIES, Strategy
from .view import tier_view

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..store import SessionStore

__all__ = ["run_tiers", "store_view"]


def store_view(store: SessionStore, session_id: str) -> list[MessageWithParts]:
    """What the model sees of a session once tiers run: ``tier_view`` of the filtered history."""
    return tier_view(store.filter_compacted(session_id))


def run_tiers(
    store: SessionStore,
    session_id: str,
    summarizer: Any = None,
    config: TierConfig | None = None,
    *,
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
) -> TierRunReport:
    """Run ToolCallSummarization, ThresholdSummarization and GoalBatchCompaction once over a session,
    writing their summaries; the summarizer defaults as ``store.compact``'s does."""
    from ..compaction.locks import compaction_lock
    from ..store import translate_errors
    from ..summarizers.default import default_summarizer

    summarizer = summarizer or default_summarizer()
    manager = StrategyManager(config, strategies)

    def append(new: NewSummary) -> MessageWithParts:
        with store.batch():
            message = store.append_message(session_id, "assistant", **new.message_fields(), completed_at=store.clock())
            part = store.append_part(message.id, TextPart(text=new.text))
        return MessageWithParts(info=message, parts=[part])

    with translate_errors(), compaction_lock(store.engine, session_id):
        history = store.filter_compacted(session_id)
        return manager.run(history, summarizer, append, session_id=session_id)
