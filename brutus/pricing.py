"""What a Claude call costs: Anthropic's published list prices, in US dollars per million tokens, as data.

Rules:

- A cache write costs 1.25× the input price with the 5-minute TTL and 2× with the 1-hour TTL; a cache read
  costs 0.1× (Anthropic's prompt-caching pricing). Output, thinking included, is billed at the output price.
- ``usage_cost(model, usage)`` prices one response's ``usage`` as the API reports it: the cache writes split
  by TTL when ``usage.cache_creation`` gives the split (else all 5-minute), and summed over
  ``usage.iterations`` when present (a compaction iteration is billed but not in the top-level counts; an
  iteration may name its own model).
- An unknown model costs 0.0, never an error. The long-context surcharge (Sonnet above 200K input tokens) is
  not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .models import TokenCounts

__all__ = ["PRICES", "Price", "cost_of", "price_of", "usage_cost"]


class Price(NamedTuple):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float  # 5-minute TTL
    cache_read: float
    cache_write_1h: float


def _price(input: float, output: float) -> Price:
    return Price(input, output, input * 1.25, input * 0.1, input * 2.0)


PRICES: dict[str, Price] = {
    "haiku-4": _price(1.0, 5.0),  # Haiku 4.5
    "sonnet-4": _price(3.0, 15.0),  # Sonnet 4, 4.5 and later 4.x
    "opus-4": _price(15.0, 75.0),  # Opus 4 and 4.1
    "opus-4.5+": _price(5.0, 25.0),  # Opus 4.5 and later 4.x
}

# claude-haiku-4-5, claude-sonnet-4-5-20250929, claude-opus-4-1@20250805, anthropic.claude-opus-4-20250514-v1:0
_MODEL = re.compile(r"claude-(haiku|sonnet|opus)-4(?:-(\d{1,2}))?(?=$|[-@:.])")


def price_of(model: str) -> Price | None:
    """The price of a Claude 4.x model id (dated, aliased or Bedrock/Vertex-style), None when unknown."""
    match = _MODEL.search(model.lower())
    if match is None:
        return None
    family, minor = match.group(1), int(match.group(2) or 0)
    if family == "opus":
        return PRICES["opus-4.5+" if minor >= 5 else "opus-4"]
    return PRICES[f"{family}-4"]


def cost_of(model: str, tokens: TokenCounts, *, write_1h: int = 0) -> float:
    """The cost of one call's usage; ``write_1h`` of its cache writes were 1-hour ones (reasoning is output)."""
    price = price_of(model)
    if price is None:
        return 0.0
    write_5m = max(0, tokens.cache.write - write_1h)
    total = (
        tokens.input * price.input
        + (tokens.output + tokens.reasoning) * price.output
        + write_5m * price.cache_write
        + min(write_1h, tokens.cache.write) * price.cache_write_1h
        + tokens.cache.read * price.cache_read
    )
    return total / 1_000_000


def _one(model: str, usage: Mapping[str, Any]) -> float:
    tokens = TokenCounts.model_validate(
        {
            "input": int(usage.get("input_tokens") or 0),
            "output": int(usage.get("output_tokens") or 0),
            "cache": {
                "read": int(usage.get("cache_read_input_tokens") or 0),
                "write": int(usage.get("cache_creation_input_tokens") or 0),
            },
        }
    )
    split = usage.get("cache_creation")
    write_1h = int(split.get("ephemeral_1h_input_tokens") or 0) if isinstance(split, Mapping) else 0
    return cost_of(model, tokens, write_1h=write_1h)


def usage_cost(model: str | None, usage: Mapping[str, Any]) -> float:
    """The cost of a response's ``usage`` dict (see the module rules)."""
    if not model:
        return 0.0
    iterations = usage.get("iterations")
    if isinstance(iterations, list) and iterations:
        return sum(_one(str(it.get("model") or model), it) for it in iterations if isinstance(it, Mapping))
    return _one(model, usage)
