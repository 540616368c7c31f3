"""brutus: a compaction-aware persistent session store for long-running coding agents.

The floors, each importing only those below it (README, "How a call runs"): rules without I/O (``models``,
``errors``, ``tokens``, ``limits``, ``policy``, ``pruning``, ``history``, ``render``, ``blocks``, ``flows``);
the database layer (``brutus.db``: tables, statements, operations); the work built on it (``compaction``,
``tiers``, ``live``, ``summarizers``); the calls written once (``calls``) and their two runners (``store``,
``async_store``); what is built on a store (``importers``, ``integrations``, ``replay``); the CLI.

Public names are imported lazily on first use, so ``import brutus`` (and ``brutus --help``) stays fast. They
are listed once, as the imports under ``TYPE_CHECKING`` below (what type checkers and IDEs read); at run time
``_exports`` reads that block to know which module holds each name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
        Unavailable,
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



def _exports() -> dict[str, str]:
    """Each public name and the module it comes from, read from the ``TYPE_CHECKING`` block of this file."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.name: f"{__name__}.{node.module}"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


_EXPORTS = _exports()
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
