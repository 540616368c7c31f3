"""The context policy: when a live session prunes and compacts (seeds 000, 002, 004), as a value and a plan.

Rules, checked before each request and applied in this order:

1. A pending compaction marker (a compaction that crashed or was cancelled) is processed: compact now.
2. A reactive compaction asked for since the last request (the provider said the prompt is too long, or a
   ``max_tokens`` stop cut a tool call short) runs with trigger ``overflow``.
3. Over the threshold, ``compact_at`` of the usable context (context less the output ceiling, as
   ``is_overflow`` counts it), the session is relieved: with ``prune="on-compaction"`` (seed 004's
   ``processCompaction`` order: prune right before the summary, when the prefix changes anyway) and
   ``"off"`` it compacts; with ``"after-turn"`` and ``"cold-cache"`` it prunes first and compacts only when
   that was not enough.
4. Below it, ``"after-turn"`` prunes once a turn has ended (seed 004's phase 3, OpenCode's classic) and
   ``"cold-cache"`` prunes once the last request is older than the cache TTL (nothing cached is lost).
   ``"on-compaction"`` and ``"off"`` leave the prefix alone. ``"off"`` never prunes, in compaction either.

Never a loop: a compaction that stalls (``CompactionStalled``), or leaves the context over the threshold,
blocks automatic compaction until the next user turn; a view too small for any summary to shrink it is not
compacted at all (``ConversationState.too_small``). The request is sent either way.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from ..models import CompactionConfig, ModelLimits
from ..limits import OUTPUT_TOKEN_MAX

__all__ = ["CACHE_TTL_MS", "ContextPolicy", "Plan", "PruneMode", "plan_request", "threshold", "usable_tokens"]

PruneMode = Literal["on-compaction", "after-turn", "off", "cold-cache"]
CACHE_TTL_MS = {"5m": 5 * 60_000, "1h": 60 * 60_000}


class ContextPolicy(BaseModel):
    """When to prune and compact, what to keep, and how to cache (see the module rules).

    ``compact_at``: share of the usable context above which the session is relieved. ``tail_tokens``: recent
    turns kept verbatim after a compaction. ``cache_ttl``: the TTL of the cache breakpoints brutus places.
    ``thinking_mismatch``: strip thinking blocks whose prefix changed, or send them for the API to drop.
    ``prune_protect`` / ``prune_minimum``: seed 004's thresholds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prune: PruneMode = "on-compaction"
    compact_at: float = Field(default=0.80, gt=0, le=1)
    tail_tokens: int = Field(default=0, ge=0)
    cache_ttl: Literal["5m", "1h"] = "5m"
    thinking_mismatch: Literal["strip", "drop_block"] = "strip"
    prune_protect: int = Field(default=40_000, ge=0)
    prune_minimum: int = Field(default=20_000, ge=0)

    def compaction_config(self, **overrides: int) -> CompactionConfig:
        """The ``CompactionConfig`` the store's prune and compact run with under this policy."""
        fields = dict(
            prune=self.prune != "off",
            prune_protect=self.prune_protect,
            prune_minimum=self.prune_minimum,
            tail_tokens=self.tail_tokens,
        )
        fields.update(overrides)
        return CompactionConfig(**fields)


def usable_tokens(limits: ModelLimits) -> int:
    """What the prompt may hold: ``limits.input``, else the context less the output ceiling (0: unlimited)."""
    if not limits.context:
        return 0
    return limits.input or limits.context - min(limits.output or OUTPUT_TOKEN_MAX, OUTPUT_TOKEN_MAX)


def threshold(limits: ModelLimits, policy: ContextPolicy) -> int:
    """The context size above which the session is relieved (0: never)."""
    return int(usable_tokens(limits) * policy.compact_at)


class Plan(NamedTuple):
    """What to do before a request: compact (with which trigger) and / or prune first."""

    prune: bool
    compact: Literal["auto", "overflow"] | None
    compact_if_still_over: bool  # prune first, then compact only when the context is still over the threshold


def plan_request(
    policy: ContextPolicy,
    *,
    tokens: int,
    limits: ModelLimits,
    pending: bool = False,
    overflow: bool = False,
    blocked: bool = False,
    turn_ended: bool = False,
    idle_ms: int | None = None,
) -> Plan:
    """The plan for the next request (see the module rules). ``blocked``: automatic compaction is off until
    the next user turn; ``idle_ms``: time since the last request (None: none yet)."""
    if overflow:
        return Plan(False, "overflow", False)
    if pending:
        return Plan(False, "auto", False)
    limit = threshold(limits, policy)
    if limit and tokens > limit:
        if policy.prune in ("after-turn", "cold-cache"):
            return Plan(True, None if blocked else "auto", True)
        return Plan(False, None if blocked else "auto", False)
    if policy.prune == "after-turn" and turn_ended:
        return Plan(True, None, False)
    if policy.prune == "cold-cache" and idle_ms is not None and idle_ms > CACHE_TTL_MS[policy.cache_ttl]:
        return Plan(True, None, False)
    return Plan(False, None, False)
