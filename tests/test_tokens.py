"""Token estimates (seed 004) and the offline cl100k_base counter."""

from __future__ import annotations

import math

import pytest

from brutus import EstimateCounter, TiktokenCounter, TokenCounter, estimate_tokens
from brutus.tokens import estimate_json_tokens


@pytest.mark.parametrize(
    "text, expected",
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 100, 25), (None, 0)],
)
def test_seed_estimates(text, expected) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_counts_utf8_bytes_not_characters() -> None:
    assert estimate_tokens("漢字漢字") == 3  # 12 bytes
    assert estimate_tokens("é") == 1  # 2 bytes
    assert estimate_tokens("🤖🤖") == 2  # 8 bytes
    assert estimate_tokens("\ud800") == 1  # a lone surrogate counts as its 3 surrogatepass bytes
    for text in ["héllo wörld", "a" * 4097, "日本語テキスト" * 31]:
        assert estimate_tokens(text) == math.ceil(len(text.encode("utf-8")) / 4)


def test_json_estimate() -> None:
    assert estimate_json_tokens(None) == 0
    assert estimate_json_tokens({}) == 0
    assert estimate_json_tokens({"p": 1}) == 2  # {"p":1}


def test_tiktoken_counter_works_offline() -> None:
    counter = TiktokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|> is plain text here") > 0
    assert counter.count("nul \x00 and \ud800") > 0


def test_estimate_counter_matches_function() -> None:
    counter = EstimateCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count("abcde") == 2
