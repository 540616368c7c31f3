"""brutus: a compaction-aware persistent session store for long-running coding agents.

Public names are imported lazily on first use, so ``import brutus`` (and ``brutus --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentPart": "brutus.models",
    "BrutusError": "brutus.errors",
    "CacheTokens": "brutus.models",
    "CompactionConfig": "brutus.models",
    "CompactionError": "brutus.errors",
    "CompactionInProgress": "brutus.errors",
    "CompactionPart": "brutus.models",
    "CompactionStalled": "brutus.errors",
    "DatabaseBusy": "brutus.errors",
    "DatabaseError": "brutus.errors",
    "EstimateCounter": "brutus.tokens",
    "FilePart": "brutus.models",
    "InvalidInput": "brutus.errors",
    "InvalidTransition": "brutus.errors",
    "Message": "brutus.models",
    "MessageWithParts": "brutus.models",
    "ModelLimits": "brutus.models",
    "NotFound": "brutus.errors",
    "Part": "brutus.models",
    "PatchPart": "brutus.models",
    "PruneResult": "brutus.models",
    "ReasoningPart": "brutus.models",
    "RetryPart": "brutus.models",
    "SchemaOutOfDate": "brutus.errors",
    "Session": "brutus.models",
    "SessionStore": "brutus.store",
    "SnapshotPart": "brutus.models",
    "StepFinishPart": "brutus.models",
    "StepStartPart": "brutus.models",
    "SubtaskPart": "brutus.models",
    "TextPart": "brutus.models",
    "TiktokenCounter": "brutus.tokens",
    "TokenCounter": "brutus.tokens",
    "TokenCounts": "brutus.models",
    "ToolPart": "brutus.models",
    "ToolState": "brutus.models",
    "estimate_tokens": "brutus.tokens",
}

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
