"""How full a model's context may get: model limits, overflow, budgets and thresholds.

Rules:

- ``is_overflow`` (seed 004, plus cache writes): count = input + cache.read + output + cache.write
  (Anthropic's ``input_tokens`` excludes cache writes, so they are added; deviation from the seed);
  ``output_ceiling`` = min(limits.output or 32_000, 32_000); ``usable_tokens`` = limits.input or context −
  ceiling; overflow when count > usable. ``context == 0`` means unlimited: never an overflow. The context
  policy (``brutus.policy``) compacts at its share of the same ``usable_tokens``.
- ``TokenBudget`` (seeds 000, 002): utilization = used / context; ``should_compact`` when it is above 0.80,
  ``must_compact`` above 0.95 (both configurable); an unlimited context (0) never asks for compaction.
  These and ``cagent_should_compact`` are for an agent with its own loop; brutus's own is ``brutus.policy``.
- ``cagent_should_compact(input, output, added, limit)`` (seed 003, cagent): input + output + added above
  90 % of the limit; a non-positive limit is unlimited.
- ``model_limits`` looks a model up in ``MODEL_LIMITS`` after normalising provider prefixes and suffixes
  (``anthropic/…``, Bedrock ``us.anthropic.…-v1:0``, Vertex ``…@date``), then by its longest known prefix; an
  unknown model gets ``DEFAULT_MODEL_LIMITS`` (200K, seed 000). The ``context-1m-2025-08-07`` beta lifts the
  context of Claude Sonnet 4.x models (only those) to 1M.

What a history occupies is estimated in ``brutus.estimates``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidInput
from .models import ModelLimits, TokenCounts

__all__ = [
    "CONTEXT_1M_BETA",
    "DEFAULT_MODEL_LIMITS",
    "MODEL_LIMITS",
    "OUTPUT_TOKEN_MAX",
    "TokenBudget",
    "cagent_should_compact",
    "is_overflow",
    "model_limits",
    "output_ceiling",
    "usable_tokens",
]

OUTPUT_TOKEN_MAX = 32_000
CONTEXT_1M_BETA = "context-1m-2025-08-07"


def output_ceiling(limits: ModelLimits) -> int:
    """The output a call may reserve: ``min(limits.output or 32_000, 32_000)``."""
    return min(limits.output or OUTPUT_TOKEN_MAX, OUTPUT_TOKEN_MAX)


def usable_tokens(limits: ModelLimits) -> int:
    """What the prompt may hold: ``limits.input``, else the context less the output ceiling (0: unlimited)."""
    if not limits.context:
        return 0
    return limits.input or limits.context - output_ceiling(limits)


def is_overflow(tokens: TokenCounts, limits: ModelLimits) -> bool:
    """Whether a call that used ``tokens`` left no room for the next one under ``limits`` (seed 004)."""
    if limits.context == 0:
        return False
    count = tokens.input + tokens.cache.read + tokens.output + tokens.cache.write
    return count > usable_tokens(limits)


def _above(used: int, limit: int, threshold: float) -> bool:
    return limit > 0 and used / limit > threshold


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """How much of a context window is used; ``used_tokens`` is all the next call occupies (system,
    messages, reserved output)."""

    context_limit: int
    used_tokens: int
    compact_threshold: float = 0.80
    critical_threshold: float = 0.95

    def __post_init__(self) -> None:
        if self.context_limit < 0 or self.used_tokens < 0:
            raise InvalidInput("a token budget needs a non-negative context limit and used token count")
        if not 0 < self.compact_threshold <= self.critical_threshold <= 1:
            raise InvalidInput(
                f"thresholds must satisfy 0 < compact ({self.compact_threshold}) <= critical "
                f"({self.critical_threshold}) <= 1"
            )

    @classmethod
    def for_model(cls, model_id: str, used_tokens: int, *, betas: Iterable[str] = ()) -> TokenBudget:
        """A budget against the context of ``model_limits(model_id, betas)``."""
        return cls(model_limits(model_id, betas).context, used_tokens)

    @property
    def utilization(self) -> float:
        """used / context; 0.0 for an unlimited context."""
        return self.used_tokens / self.context_limit if self.context_limit else 0.0

    @property
    def should_compact(self) -> bool:
        return _above(self.used_tokens, self.context_limit, self.compact_threshold)

    @property
    def must_compact(self) -> bool:
        return _above(self.used_tokens, self.context_limit, self.critical_threshold)


def cagent_should_compact(input: int, output: int, added: int, limit: int, threshold: float = 0.9) -> bool:
    """cagent's rule: input + output + added above ``threshold`` of ``limit``; a limit <= 0 is unlimited."""
    return _above(input + output + added, limit, threshold)


# -- model limits ----------------------------------------------------------------------------------------

_CLAUDE_4 = ModelLimits(context=200_000, output=64_000)
_CLAUDE_OPUS_4 = ModelLimits(context=200_000, output=32_000)
_GPT_5 = ModelLimits(context=400_000, input=272_000, output=128_000)

MODEL_LIMITS: dict[str, ModelLimits] = {
    "claude-opus-4-5": _CLAUDE_4,
    "claude-opus-4-5-20251101": _CLAUDE_4,
    "claude-opus-4-1": _CLAUDE_OPUS_4,
    "claude-opus-4-1-20250805": _CLAUDE_OPUS_4,
    "claude-opus-4": _CLAUDE_OPUS_4,
    "claude-opus-4-0": _CLAUDE_OPUS_4,
    "claude-opus-4-20250514": _CLAUDE_OPUS_4,
    "claude-sonnet-4-5": _CLAUDE_4,
    "claude-sonnet-4-5-20250929": _CLAUDE_4,
    "claude-sonnet-4": _CLAUDE_4,
    "claude-sonnet-4-0": _CLAUDE_4,
    "claude-sonnet-4-20250514": _CLAUDE_4,
    "claude-haiku-4-5": _CLAUDE_4,
    "claude-haiku-4-5-20251001": _CLAUDE_4,
    "claude-3-7-sonnet": ModelLimits(context=200_000, output=64_000),
    "claude-3-5-sonnet": ModelLimits(context=200_000, output=8_192),
    "claude-3-5-haiku": ModelLimits(context=200_000, output=8_192),
    "gpt-4o": ModelLimits(context=128_000, output=16_384),
    "gpt-4o-mini": ModelLimits(context=128_000, output=16_384),
    "gpt-4.1": ModelLimits(context=1_047_576, output=32_768),
    "gpt-5": _GPT_5,
    "gpt-5-mini": _GPT_5,
    "gpt-5-codex": _GPT_5,
    "o3": ModelLimits(context=200_000, output=100_000),
    "o4-mini": ModelLimits(context=200_000, output=100_000),
}
DEFAULT_MODEL_LIMITS = ModelLimits(context=200_000, output=OUTPUT_TOKEN_MAX)
_CONTEXT_1M = 1_000_000
_BEDROCK = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")


def _table_key(model_id: str) -> str | None:
    name = model_id.strip().lower().rsplit("/", 1)[-1].replace("@", "-")
    name = _VERSION.sub("", _BEDROCK.sub("", name))
    if name in MODEL_LIMITS:
        return name
    prefixes = [key for key in MODEL_LIMITS if name.startswith(key) and name[len(key)] in "-.:"]
    return max(prefixes, key=len) if prefixes else None


def model_limits(model_id: str, betas: Iterable[str] = ()) -> ModelLimits:
    """The limits of ``model_id`` (``DEFAULT_MODEL_LIMITS`` when unknown); the 1M beta applies to Sonnet 4.x."""
    key = _table_key(model_id)
    limits = MODEL_LIMITS[key] if key else DEFAULT_MODEL_LIMITS
    if key and key.startswith("claude-sonnet-4") and CONTEXT_1M_BETA in tuple(betas):
        return limits.model_copy(update={"context": _CONTEXT_1M})
    return limits.model_copy()  # the table's models stay untouched whatever the caller does
