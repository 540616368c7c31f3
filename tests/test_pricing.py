"""``brutus.pricing``: hand-computed costs of real-shaped usage (cache writes by TTL, iterations, unknown models)."""

from __future__ import annotations

import pytest

from brutus.models import CacheTokens, TokenCounts
from brutus.pricing import cost_of, price_of, usage_cost


@pytest.mark.parametrize(
    "model, family",
    [("claude-opus-4-6", (5.0, 25.0)), ("claude-opus-4-1-20250805", (15.0, 75.0)), ("claude-sonnet-4-5", (3.0, 15.0)),
     ("us.anthropic.claude-haiku-4-5-20251001-v1:0", (1.0, 5.0))],
)
def test_prices_by_model(model: str, family: tuple[float, float]) -> None:
    price = price_of(model)
    assert price is not None and (price.input, price.output) == family
    assert (price.cache_write, price.cache_write_1h, price.cache_read) == pytest.approx((family[0] * 1.25, family[0] * 2, family[0] * 0.1))


def test_a_call_by_hand() -> None:
    # Sonnet: 2,000 input at $3, 500 output at $15, 10,000 cache reads at $0.30, 4,000 writes of which 1,000 for 1 hour
    tokens = TokenCounts(input=2_000, output=500, cache=CacheTokens(read=10_000, write=4_000))
    expected = (2_000 * 3 + 500 * 15 + 10_000 * 0.3 + 3_000 * 3.75 + 1_000 * 6) / 1e6
    assert cost_of("claude-sonnet-4-5", tokens, write_1h=1_000) == pytest.approx(expected)
    usage = {"input_tokens": 2_000, "output_tokens": 500, "cache_read_input_tokens": 10_000, "cache_creation_input_tokens": 4_000,
             "cache_creation": {"ephemeral_5m_input_tokens": 3_000, "ephemeral_1h_input_tokens": 1_000}}
    assert usage_cost("claude-sonnet-4-5", usage) == pytest.approx(expected)


def test_iterations_are_summed_each_at_its_model() -> None:
    usage = {
        "input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
        "iterations": [
            {"type": "compaction", "input_tokens": 20_000, "output_tokens": 1_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            {"type": "message", "model": "claude-haiku-4-5", "input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        ],
    }
    expected = (20_000 * 5 + 1_000 * 25) / 1e6 + (100 * 1 + 50 * 5) / 1e6
    assert usage_cost("claude-opus-4-6", usage) == pytest.approx(expected)


def test_unknown_models_cost_nothing() -> None:
    assert usage_cost("gpt-5", {"input_tokens": 10, "output_tokens": 10}) == 0.0
    assert usage_cost(None, {"input_tokens": 10}) == 0.0
