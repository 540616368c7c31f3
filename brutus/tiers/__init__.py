"""Tiered compaction (ADR-0041, DESIGN §4 "Tiers"): tool-call summaries, threshold summaries, goal batches.

Three strategies, run in order by a ``StrategyManager``, write summary messages that each cover a range of
the session (``metadata``: summarized, summary_type, turn_count, covers, covered_tokens); the originals stay.
``tier_view`` puts each summary where its range was, newest covering summary first, so a ``[GOAL BATCH]``
stands for the ``[SUMMARIZED]`` blocks it took in. ``run_tiers`` runs them on a store, ``apply_tiers`` on a
history in memory, and ``store_view`` reads the view the model should see.

A ``[GOAL BATCH]`` covers 3 to 6 whole turns (``min_turns_to_compact`` … ``max_turns_per_batch``), keeps the
direction of each in its Human Direction section, is never larger than the view it replaces, and is never
batched again: there is no tier above it. What is older than the goal batches is the prefix compaction's
(``store.compact``, seed 004), which an agent runs at its context threshold.

Floor: the strategies and the view are rules; ``manager.tier_flow`` is the run as a flow and ``run.tier_run``
its work on a store (``store.run_tiers``); nothing here imports a store.

Modules: ``config`` (TierConfig), ``metadata`` (what a summary message carries), ``view`` (tier_view),
``turns`` (turn detection), ``strategies`` (the three, pure), ``goal_batch`` (what a goal batch must be),
``manager`` (the run), ``report``, ``run`` (the store).
"""

from __future__ import annotations

from .config import TierConfig
from .manager import StrategyManager, apply_tiers
from .metadata import TierMetadata, tier_metadata
from .report import StrategyReport, TierRunReport
from .run import run_tiers, store_view
from .strategies import DEFAULT_STRATEGIES, GoalBatchCompaction, Strategy, ThresholdSummarization, ToolCallSummarization
from .view import tier_view

# The public names: the strategies and their manager, the config, the reports, the runs and views, and the
# metadata a summary message carries. The rest (the flow's steps, selections, turn detection, the goal
# batch's checks) is imported from its module.
__all__ = [
    "DEFAULT_STRATEGIES",
    "GoalBatchCompaction",
    "Strategy",
    "StrategyManager",
    "StrategyReport",
    "ThresholdSummarization",
    "TierConfig",
    "TierMetadata",
    "TierRunReport",
    "ToolCallSummarization",
    "apply_tiers",
    "run_tiers",
    "store_view",
    "tier_metadata",
    "tier_view",
]
