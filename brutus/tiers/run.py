"""The tiers on a store: ``tier_run`` is the work of ``store.run_tiers``; ``store_view`` reads what the model sees.

Rules:

- The run reads the filtered history, runs the ``StrategyManager``'s flow over it, and writes each summary as
  one assistant message with one text part, in a transaction of its own: a failure part way leaves every
  summary written before it whole, and none half written. Summarizer calls happen outside any transaction;
  it is refused inside ``store.batch()`` (each summary commits on its own).
- It holds the session's compaction lock for the run (``CompactionInProgress`` if a compaction or another
  tier run holds it): tier summaries and the prefix compaction both decide from the view, and two runs at
  once would summarize the same turns twice.
- ``store_view`` is ``tier_view(store.filter_compacted(session_id))``: the history back to the last
  boundary with every covered range replaced by its summary. It is what to render for the model once
  tiers run; ``filter_compacted`` itself is unchanged and still returns the originals and the summaries
  side by side.

Nothing here imports a store: both stores run the same work (``brutus.flows``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..db import ops
from ..db.history_ops import load_messages
from ..db.statements import Op
from ..flows import Locked, Tx, unbatched
from ..models import MessageWithParts, TextPart
from .config import TierConfig
from .manager import NewSummary, StrategyManager, TierFlow
from .strategies import DEFAULT_STRATEGIES, Strategy
from .view import tier_view

__all__ = ["run_tiers", "store_view", "tier_run"]


def store_view(store: Any, session_id: str) -> list[MessageWithParts]:
    """What the model sees of a session once tiers run: ``tier_view`` of the filtered history (a
    ``SessionStore``; on an ``AsyncSessionStore``, ``tier_view(await store.filter_compacted(session_id))``)."""
    return tier_view(store.filter_compacted(session_id))


def run_tiers(
    store: Any,
    session_id: str,
    summarizer: Any = None,
    config: TierConfig | None = None,
    *,
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
) -> Any:
    """Run ToolCallSummarization, ThresholdSummarization and GoalBatchCompaction once over a session,
    writing their summaries; the summarizer defaults as ``store.compact``'s does. ``store.run_tiers`` with a
    choice of strategies (awaitable on an ``AsyncSessionStore``)."""
    return store.run(tier_run(session_id, summarizer, config, clock=store.clock, strategies=strategies))


def tier_run(
    session_id: str,
    summarizer: Any,
    config: TierConfig | None,
    *,
    clock: Callable[[], int],
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
) -> TierFlow:
    """The work of a tier run on a store (module rules)."""
    from ..summarizers.default import default_summarizer

    session_id = ops.check_id("session", session_id)
    flow = _locked_run(session_id, StrategyManager(config, strategies), summarizer or default_summarizer(), clock)
    return unbatched("run_tiers cannot run inside store.batch(): each summary commits on its own", Locked(session_id, flow))


def _locked_run(session_id: str, manager: StrategyManager, summarizer: Any, clock: Callable[[], int]) -> TierFlow:
    history = yield Tx(load_messages(session_id, filtered=True), write=False)

    def write(new: NewSummary) -> Tx:
        return Tx(_append_summary(session_id, new, completed_at=clock(), clock=clock))

    return (yield from manager.flow(history, session_id=session_id, summarizer=summarizer, write=write))


def _append_summary(session_id: str, new: NewSummary, *, completed_at: int, clock: Callable[[], int]) -> Op:
    """A summary message and its text part, in one transaction."""
    fields = {**new.message_fields(), "completed_at": completed_at}
    message = yield from ops.append_message(session_id, "assistant", fields, now=clock())
    part = yield from ops.append_part(message.id, TextPart(text=new.text), now=clock())
    return MessageWithParts(info=message, parts=[part])
