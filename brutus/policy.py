"""The context policy: when a session prunes and compacts (seeds 000, 002, 004), as a value and a plan.

The one home of these decisions: the live loop (``brutus.live``) and ``replay`` call the same
``plan_request``, ``over_threshold`` and ``ContextPolicy.compaction_config``. Rules, checked before each
request in this order:

1. A reactive compaction asked for since the last request (the provider said the prompt is too long, or a
   ``max_tokens`` stop cut a tool call short) runs with trigger ``overflow``.
2. A pending compaction marker (a compaction that crashed or was cancelled) is processed: compact now.
3. Over the threshold, ``compact_at`` of the usable context (``brutus.limits.usable_tokens``, as
   ``is_overflow`` counts it), the session compacts; ``"after-turn"`` and ``"cold-cache"`` prune first and
   compact only when that was not enough (``PruneMode.first``), ``"on-compaction"`` prunes right before the
   summary (seed 004's ``processCompaction`` order) and ``"off"`` never prunes, in compaction either.
4. Below it, ``"after-turn"`` prunes once a turn has ended (seed 004's phase 3, OpenCode's classic) and
   ``"cold-cache"`` once the last request is older than the cache TTL (nothing cached is lost).

Never a loop: a compaction that stalls (``CompactionStalled``), or leaves the context over the threshold,
blocks automatic compaction until the next user turn; a view too small for any summary to shrink it is not
compacted at all (``ConversationState.too_small``). The request is sent either way.

A new prune mode is one entry of ``PRUNE_MODES`` (``brutus replay --policy`` lists them in
``cli.replay_commands.POLICIES``, so that ``--help`` loads no pydantic; a test keeps the two equal). A new
setting is a field of ``ContextPolicy``, a new step before a request a branch of ``plan_request``.

Elsewhere, on purpose: the mechanics of one compaction this policy parameterises (the tail split in
``brutus.split``, the stall rule in ``brutus.compaction.plan``); the tiers (``brutus.tiers.strategies``:
ADR-0041's rewrites by absolute token counts and message ages of the tier view, run on request, thresholds
in ``TierConfig``); what a replay simulates (``replay_limits``, ``replay_config``); and the seeds' budgets
for an agent with its own loop (``TokenBudget``, ``cagent_should_compact``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .limits import usable_tokens
from .models import CompactionConfig, ModelLimits

__all__ = [
    "CACHE_TTL_MS", "PRUNE_MODES", "ContextPolicy", "Plan", "PruneMode", "over_threshold", "plan_request", "threshold"
]

CACHE_TTL_MS = {"5m": 5 * 60_000, "1h": 60 * 60_000}


@dataclass(frozen=True)
class PruneMode:
    """One ``prune`` setting: prune inside a compaction (``in_compaction``), prune before compacting over the
    threshold (``first``), and below it ``below(policy, turn_ended, idle_ms)``: prune now?"""

    in_compaction: bool = True
    first: bool = False
    below: Callable[[ContextPolicy, bool, int | None], bool] = lambda policy, turn_ended, idle_ms: False


PRUNE_MODES: dict[str, PruneMode] = {
    "on-compaction": PruneMode(),
    "after-turn": PruneMode(first=True, below=lambda policy, turn_ended, idle_ms: turn_ended),
    "off": PruneMode(in_compaction=False),
    "cold-cache": PruneMode(
        first=True, below=lambda policy, turn_ended, idle: idle is not None and idle > CACHE_TTL_MS[policy.cache_ttl]
    ),
}


class ContextPolicy(BaseModel):
    """When to prune and compact, what to keep, and how to cache (see the module rules).

    ``prune``: a key of ``PRUNE_MODES``. ``compact_at``: share of the usable context above which the session is
    relieved. ``tail_tokens``: recent turns kept verbatim after a compaction. ``cache_ttl``: the TTL of the
    cache breakpoints brutus places. ``thinking_mismatch``: strip thinking blocks whose prefix changed, or send
    them for the API to drop. ``prune_protect`` / ``prune_minimum``: seed 004's thresholds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prune: str = "on-compaction"
    compact_at: float = Field(default=0.80, gt=0, le=1)
    tail_tokens: int = Field(default=0, ge=0)
    cache_ttl: Literal["5m", "1h"] = "5m"
    thinking_mismatch: Literal["strip", "drop_block"] = "strip"
    prune_protect: int = Field(default=40_000, ge=0)
    prune_minimum: int = Field(default=20_000, ge=0)

    @field_validator("prune")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in PRUNE_MODES:
            raise ValueError(f"prune must be one of {', '.join(map(repr, PRUNE_MODES))}, not {value!r}")
        return value

    @property
    def mode(self) -> PruneMode:
        return PRUNE_MODES[self.prune]

    def compaction_config(self, base: CompactionConfig | None = None) -> CompactionConfig:
        """The ``CompactionConfig`` prune and compact run with under this policy: ``base`` (default: the
        policy's own prune thresholds) with the policy's prune switch and tail."""
        fields = {"prune": self.mode.in_compaction, "tail_tokens": self.tail_tokens}
        if base is None:
            return CompactionConfig(prune_protect=self.prune_protect, prune_minimum=self.prune_minimum, **fields)
        return base.model_copy(update=fields)


def threshold(limits: ModelLimits, policy: ContextPolicy) -> int:
    """The context size above which the session is relieved (0: never)."""
    return int(usable_tokens(limits) * policy.compact_at)


def over_threshold(tokens: int, limits: ModelLimits, policy: ContextPolicy) -> bool:
    limit = threshold(limits, policy)
    return bool(limit) and tokens > limit


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
    mode = policy.mode
    if over_threshold(tokens, limits, policy):
        return Plan(mode.first, None if blocked else "auto", mode.first)
    return Plan(mode.below(policy, turn_ended, idle_ms), None, False)
