"""brutus: a compaction-aware persistent session store for long-running coding agents.

Public names are imported lazily on first use, so ``import brutus`` (and ``brutus --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentPart": "brutus.models",
    "AsyncConversation": "brutus.live",
    "AsyncSessionStore": "brutus.async_store",
    "BrutusError": "brutus.errors",
    "CacheTokens": "brutus.models",
    "CompactionConfig": "brutus.models",
    "CompactionError": "brutus.errors",
    "CompactionInProgress": "brutus.errors",
    "CompactionPart": "brutus.models",
    "CompactionRecord": "brutus.models",
    "CompactionResult": "brutus.models",
    "CompactionStalled": "brutus.errors",
    "ContextPolicy": "brutus.live",
    "Conversation": "brutus.live",
    "DatabaseBusy": "brutus.errors",
    "DatabaseError": "brutus.errors",
    "EstimateCounter": "brutus.tokens",
    "FilePart": "brutus.models",
    "GoalBatchCompaction": "brutus.tiers",
    "Hooks": "brutus.compaction.hooks",
    "ImportFormatError": "brutus.errors",
    "InvalidInput": "brutus.errors",
    "InvalidTransition": "brutus.errors",
    "Message": "brutus.models",
    "MissingDependency": "brutus.errors",
    "MessageWithParts": "brutus.models",
    "ModelLimits": "brutus.models",
    "NoDatabase": "brutus.errors",
    "NotFound": "brutus.errors",
    "NothingToCompact": "brutus.errors",
    "Part": "brutus.models",
    "PatchPart": "brutus.models",
    "PruneResult": "brutus.models",
    "ReasoningPart": "brutus.models",
    "RetryPart": "brutus.models",
    "SchemaOutOfDate": "brutus.errors",
    "SearchHit": "brutus.search",
    "Session": "brutus.models",
    "SessionStore": "brutus.store",
    "SnapshotPart": "brutus.models",
    "StepFinishPart": "brutus.models",
    "StepStartPart": "brutus.models",
    "StrategyManager": "brutus.tiers",
    "StrategyReport": "brutus.tiers",
    "SubtaskPart": "brutus.models",
    "SummarizerError": "brutus.errors",
    "TextPart": "brutus.models",
    "ThresholdSummarization": "brutus.tiers",
    "TierConfig": "brutus.tiers",
    "TierRunReport": "brutus.tiers",
    "TiktokenCounter": "brutus.tokens",
    "TokenBudget": "brutus.limits",
    "TokenCounter": "brutus.tokens",
    "TokenCounts": "brutus.models",
    "ToolCallSummarization": "brutus.tiers",
    "ToolPart": "brutus.models",
    "ToolState": "brutus.models",
    "apply_tiers": "brutus.tiers",
    "cagent_should_compact": "brutus.limits",
    "context_size": "brutus.estimates",
    "estimate_message_tokens": "brutus.estimates",
    "estimate_tokens": "brutus.tokens",
    "export_opencode": "brutus.importers.export",
    "filter_compacted": "brutus.history",
    "has_conversation_messages": "brutus.estimates",
    "import_file": "brutus.importers",
    "is_overflow": "brutus.limits",
    "make_engine": "brutus.db.engine",
    "model_limits": "brutus.limits",
    "prune": "brutus.pruning",
    "run_tiers": "brutus.tiers",
    "split_point": "brutus.split",
    "store_view": "brutus.tiers",
    "tier_view": "brutus.tiers",
    "to_anthropic": "brutus.render",
    "validate_anthropic": "brutus.render",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name is imported on first use
    from .async_store import AsyncSessionStore
    from .compaction.hooks import Hooks
    from .db.engine import make_engine
    from .errors import (
        BrutusError,
        CompactionError,
        CompactionInProgress,
        CompactionStalled,
        DatabaseBusy,
        DatabaseError,
        ImportFormatError,
        InvalidInput,
        InvalidTransition,
        MissingDependency,
        NoDatabase,
        NotFound,
        NothingToCompact,
        SchemaOutOfDate,
        SummarizerError,
    )
    from .estimates import context_size, estimate_message_tokens, has_conversation_messages
    from .history import filter_compacted
    from .importers import import_file
    from .importers.export import export_opencode
    from .limits import TokenBudget, cagent_should_compact, is_overflow, model_limits
    from .live import AsyncConversation, ContextPolicy, Conversation
    from .models import (
        AgentPart,
        CacheTokens,
        CompactionConfig,
        CompactionPart,
        CompactionRecord,
        CompactionResult,
        FilePart,
        Message,
        MessageWithParts,
        ModelLimits,
        Part,
        PatchPart,
        PruneResult,
        ReasoningPart,
        RetryPart,
        Session,
        SnapshotPart,
        StepFinishPart,
        StepStartPart,
        SubtaskPart,
        TextPart,
        TokenCounts,
        ToolPart,
        ToolState,
    )
    from .pruning import prune
    from .render import to_anthropic, validate_anthropic
    from .search import SearchHit
    from .split import split_point
    from .store import SessionStore
    from .tiers import (
        GoalBatchCompaction,
        StrategyManager,
        StrategyReport,
        ThresholdSummarization,
        TierConfig,
        TierRunReport,
        ToolCallSummarization,
        apply_tiers,
        run_tiers,
        store_view,
        tier_view,
    )
    from .tokens import EstimateCounter, TiktokenCounter, TokenCounter, estimate_tokens

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'brutus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
