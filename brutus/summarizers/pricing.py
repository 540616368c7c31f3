"""What a summarizer call cost: Anthropic's list prices for the Claude 4.x models, in US dollars.

Prices are per million tokens. A cache write is billed at 1.25× the input price (5-minute cache) and a
cache read at 0.1×. The long-context surcharge (Sonnet above 200K input tokens) is not modelled: a summary
request that large is shrunk first. An unknown model costs 0.0, never an error.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..models import TokenCounts

__all__ = ["PRICES", "Price", "cost_of", "price_of"]


class Price(NamedTuple):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


def _price(input: float, output: float) -> Price:
    return Price(input, output, input * 1.25, input * 0.1)


PRICES: dict[str, Price] = {
    "haiku-4": _price(1.0, 5.0),
    "sonnet-4": _price(3.0, 15.0),
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


def cost_of(model: str, tokens: TokenCounts) -> float:
    """The cost in US dollars of one call's usage (reasoning is billed as output)."""
    price = price_of(model)
    if price is None:
        return 0.0
    total = (
        tokens.input * price.input
        + (tokens.output + tokens.reasoning) * price.output
        + tokens.cache.write * price.cache_write
        + tokens.cache.read * price.cache_read
    )
    return total / 1_000_000
