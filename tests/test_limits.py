"""Overflow, budgets, model limits and message estimates (seeds 004, 000, 002, 003)."""

from __future__ import annotations

import pytest
from corpus_helpers import load_export, opencode_files
from history_builders import assistant, compaction, summary, text, tool, usage, user

from brutus.errors import InvalidInput
from brutus.history import filter_compacted
from brutus.models import (
    AgentPart,
    FilePart,
    ModelLimits,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TokenCounts,
)
from brutus.estimates import MESSAGE_OVERHEAD_TOKENS, context_size, estimate_message_tokens, estimate_part_tokens, has_conversation_messages
from brutus.limits import CONTEXT_1M_BETA, DEFAULT_MODEL_LIMITS, MODEL_LIMITS, OUTPUT_TOKEN_MAX, TokenBudget, cagent_should_compact, is_overflow, model_limits
from brutus.tokens import estimate_tokens

# -- is_overflow ----------------------------------------------------------------------------------------


def test_seed_is_overflow():
    limits = ModelLimits(context=128_000, output=8_000)
    assert not is_overflow(TokenCounts(input=50_000, output=5_000), limits)
    assert is_overflow(TokenCounts(input=120_000, output=10_000), limits)


def test_usable_is_context_minus_the_output_ceiling():
    limits = ModelLimits(context=128_000, output=8_000)  # usable 120,000
    assert not is_overflow(TokenCounts(input=120_000), limits)
    assert is_overflow(TokenCounts(input=120_001), limits)


@pytest.mark.parametrize("output", [0, 32_000, 64_000, 128_000])
def test_the_output_ceiling_is_capped_at_32000(output):
    limits = ModelLimits(context=200_000, output=output)  # usable 168,000 in every case
    assert OUTPUT_TOKEN_MAX == 32_000
    assert not is_overflow(TokenCounts(input=168_000), limits)
    assert is_overflow(TokenCounts(input=168_001), limits)


def test_an_input_limit_replaces_context_minus_ceiling():
    limits = ModelLimits(context=400_000, input=272_000, output=128_000)
    assert not is_overflow(TokenCounts(input=272_000), limits)
    assert is_overflow(TokenCounts(input=272_001), limits)


def test_count_is_input_cache_read_output_and_cache_write_not_reasoning():
    limits = ModelLimits(context=200_000, output=64_000)  # usable 168,000
    assert not is_overflow(usage(input=100_000, read=50_000, output=10_000, write=8_000, reasoning=10**9), limits)
    assert is_overflow(usage(input=100_000, read=50_000, output=10_000, write=8_001), limits)
    assert is_overflow(usage(write=168_001), limits)  # cache writes alone (the stated deviation from the seed)
    assert is_overflow(usage(read=168_001), limits)
    assert is_overflow(usage(output=168_001), limits)


def test_context_zero_is_unlimited():
    assert not is_overflow(usage(input=10**12, output=10**12), ModelLimits(context=0))
    assert not is_overflow(usage(input=10**12), ModelLimits(context=0, input=5))


# -- budgets ----------------------------------------------------------------------------------------------


def test_token_budget_utilization_and_thresholds():
    assert TokenBudget(200_000, 50_000).utilization == 0.25
    assert not TokenBudget(200_000, 160_000).should_compact  # exactly 80 %: not above
    assert TokenBudget(200_000, 160_001).should_compact
    assert not TokenBudget(200_000, 190_000).must_compact  # exactly 95 %
    assert TokenBudget(200_000, 190_001).must_compact
    assert TokenBudget(200_000, 170_000).should_compact and not TokenBudget(200_000, 170_000).must_compact
    assert TokenBudget(200_000, 250_000).utilization == 1.25


def test_token_budget_thresholds_are_configurable():
    budget = TokenBudget(100_000, 60_001, compact_threshold=0.6, critical_threshold=0.7)
    assert budget.should_compact and not budget.must_compact
    assert TokenBudget(100_000, 70_001, compact_threshold=0.6, critical_threshold=0.7).must_compact


def test_an_unlimited_budget_never_compacts():
    budget = TokenBudget(0, 10**9)
    assert (budget.utilization, budget.should_compact, budget.must_compact) == (0.0, False, False)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compact_threshold": 0},
        {"compact_threshold": 0.9, "critical_threshold": 0.8},
        {"critical_threshold": 1.5},
        {"context_limit": -1},
        {"used_tokens": -1},
    ],
)
def test_token_budget_rejects_nonsense(kwargs):
    with pytest.raises(InvalidInput):
        TokenBudget(**{"context_limit": 1000, "used_tokens": 10, **kwargs})


def test_token_budget_for_a_model():
    assert TokenBudget.for_model("claude-sonnet-4-5", 100_000) == TokenBudget(200_000, 100_000)
    assert TokenBudget.for_model("claude-sonnet-4-5", 100_000, betas=[CONTEXT_1M_BETA]).utilization == 0.1


def test_cagent_should_compact_at_90_percent():
    assert not cagent_should_compact(90_000, 0, 0, 100_000)
    assert cagent_should_compact(90_001, 0, 0, 100_000)
    assert not cagent_should_compact(30_000, 30_000, 30_000, 100_000)
    assert cagent_should_compact(30_000, 30_000, 30_001, 100_000)
    assert cagent_should_compact(0, 90_001, 0, 100_000) and cagent_should_compact(0, 0, 90_001, 100_000)


def test_cagent_should_compact_non_positive_limit_is_unlimited_and_threshold_configurable():
    assert not cagent_should_compact(10**9, 10**9, 10**9, 0)
    assert not cagent_should_compact(10**9, 0, 0, -5)
    assert cagent_should_compact(50_001, 0, 0, 100_000, threshold=0.5)
    assert not cagent_should_compact(50_000, 0, 0, 100_000, threshold=0.5)


# -- model limits -------------------------------------------------------------------------------------------


def test_claude_4_models_have_200k_context():
    claude_4 = [key for key in MODEL_LIMITS if key.startswith(("claude-opus-4", "claude-sonnet-4", "claude-haiku-4"))]
    assert len(claude_4) == 14
    assert {MODEL_LIMITS[key].context for key in claude_4} == {200_000}


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("claude-sonnet-4-5", ModelLimits(context=200_000, output=64_000)),
        ("claude-sonnet-4-5-20250929", ModelLimits(context=200_000, output=64_000)),
        ("anthropic/claude-sonnet-4-5", ModelLimits(context=200_000, output=64_000)),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", ModelLimits(context=200_000, output=64_000)),
        ("claude-sonnet-4-5@20250929", ModelLimits(context=200_000, output=64_000)),
        ("Claude-Haiku-4-5", ModelLimits(context=200_000, output=64_000)),
        ("claude-haiku-4-5-20251001", ModelLimits(context=200_000, output=64_000)),
        ("claude-opus-4-5-20250514", ModelLimits(context=200_000, output=64_000)),  # seed 002's spelling
        ("claude-opus-4-1-20250805", ModelLimits(context=200_000, output=32_000)),
        ("claude-opus-4-20250514", ModelLimits(context=200_000, output=32_000)),
        ("claude-3-5-haiku-20241022", ModelLimits(context=200_000, output=8_192)),
        ("gpt-4o-mini-2024-07-18", ModelLimits(context=128_000, output=16_384)),
        ("openai/gpt-5.3-codex", ModelLimits(context=400_000, input=272_000, output=128_000)),
        ("o4-mini", ModelLimits(context=200_000, output=100_000)),
        ("some-local-model", ModelLimits(context=200_000, output=32_000)),
        ("claude", ModelLimits(context=200_000, output=32_000)),
    ],
)
def test_model_limits_lookup(model_id, expected):
    assert model_limits(model_id) == expected


def test_unknown_models_get_the_seed_default():
    assert DEFAULT_MODEL_LIMITS == ModelLimits(context=200_000, output=32_000)
    assert model_limits("mystery") == DEFAULT_MODEL_LIMITS


@pytest.mark.parametrize(
    ("model_id", "context"),
    [
        ("claude-sonnet-4-5-20250929", 1_000_000),
        ("claude-sonnet-4-20250514", 1_000_000),
        ("anthropic/claude-sonnet-4-5", 1_000_000),
        ("claude-opus-4-5", 200_000),
        ("claude-haiku-4-5", 200_000),
        ("claude-3-7-sonnet-20250219", 200_000),
        ("gpt-5", 400_000),
        ("unknown-sonnet", 200_000),
    ],
)
def test_the_1m_beta_applies_to_sonnet_4_only(model_id, context):
    assert model_limits(model_id, betas=("other-beta", CONTEXT_1M_BETA)).context == context
    assert model_limits(model_id).context == (400_000 if model_id == "gpt-5" else 200_000)


def test_model_limits_returns_a_copy():
    limits = model_limits("claude-sonnet-4-5")
    limits.context = 1
    assert MODEL_LIMITS["claude-sonnet-4-5"].context == 200_000
    assert model_limits("claude-sonnet-4-5").context == 200_000


# -- estimates ------------------------------------------------------------------------------------------------


def test_estimate_message_tokens_counts_what_may_be_sent():
    message = assistant(
        "a1",
        StepStartPart(snapshot="abc"),
        text("abcd" * 10),  # 10
        text("z" * 400, ignored=True),  # 0: never sent
        text("s" * 8, synthetic=True),  # 2
        ReasoningPart(text="r" * 8),  # 2 (conservative: other providers get it back)
        tool("t1", input={"command": "ls -la"}, output="o" * 40),  # bash 1 + input 5 + output 10
        StepFinishPart(reason="tool-calls", tokens=usage(input=10**6)),
        SnapshotPart(snapshot="s" * 100),
        PatchPart(hash="h" * 100, files=["a" * 100]),
        AgentPart(name="a" * 100),
        RetryPart(attempt=1, error="e" * 100),
    )
    assert MESSAGE_OVERHEAD_TOKENS == 4
    assert estimate_message_tokens(message) == 4 + 10 + 2 + 2 + 16


def test_tool_results_count_as_rendered():
    cleared = tool("t", output="x" * 4000, compacted=5)
    assert estimate_part_tokens(cleared) == 1 + 9  # "[Old tool result content cleared]"
    assert estimate_part_tokens(tool("t", status="pending")) == 1 + 8  # "[Tool execution was interrupted]"
    assert estimate_part_tokens(tool("t", status="running", input={"command": "ls -la"})) == 1 + 5 + 8
    assert estimate_part_tokens(tool("t", status="error", error="permission denied")) == 1 + 5
    assert estimate_part_tokens(tool("t", status="error", error="")) == 1 + 6  # "[Tool execution failed]"
    assert estimate_part_tokens(tool("t", output="")) == 1 + 3  # "(no output)"
    assert estimate_part_tokens(tool("t", name="webfetch", output="x" * 4)) == 2 + 1


def test_user_parts_count_as_rendered():
    assert estimate_part_tokens(FilePart(mime="text/x-python", filename="a.py", url="file:///a.py")) == 7
    subtask = SubtaskPart(prompt="look for pytest files", description="find tests", agent="explore")
    assert estimate_part_tokens(subtask) == 13  # "[subtask explore: find tests]\nlook for pytest files"
    assert estimate_message_tokens(compaction("c1")) == 4 + 6  # "What did we do so far?"
    assert estimate_message_tokens(user("u")) == 4


def test_estimates_are_utf8_bytes():
    assert estimate_message_tokens(user("u", text("日本語"))) == 4 + 3  # 9 bytes


def test_has_conversation_messages():
    assert not has_conversation_messages([])
    assert not has_conversation_messages([compaction("c1")])
    assert not has_conversation_messages([user("u", text("  \n", synthetic=True)), assistant("a", StepStartPart())])
    assert not has_conversation_messages([user("u", text("hidden", ignored=True))])
    assert not has_conversation_messages([assistant("a", ReasoningPart(text="thinking"))])
    assert has_conversation_messages([compaction("c1"), user("u", text("hi"))])
    assert has_conversation_messages([assistant("a", tool("t", status="pending"))])
    assert has_conversation_messages([user("u", FilePart(mime="image/png", url="data:x"))])
    assert has_conversation_messages([user("u", SubtaskPart(prompt="p", description="d", agent="a"))])
    assert has_conversation_messages(iter([user("u", text("hi"))]))


# -- context size -----------------------------------------------------------------------------------------------


def test_context_size_without_reported_usage_is_the_sum_of_estimates():
    history = [user("u1", text("abcd" * 25)), assistant("a1", text("abcd" * 5), parent="u1", finish=None)]
    assert context_size(history) == (4 + 25) + (4 + 5)
    assert context_size([]) == 0


def test_context_size_is_the_last_usage_plus_what_came_after():
    history = [
        user("u1", text("abcd" * 1000)),
        assistant(
            "a1",
            text("let me look"),
            tool("t1", input={"command": "ls -la"}, output="o" * 400),  # the result arrived after the call: 100
            tool("t2", status="error", error="permission denied"),  # 5
            parent="u1",
            tokens=usage(input=1_000, output=200, read=300, write=50, reasoning=7_000),
        ),
        user("u2", text("abcd")),  # 4 + 1
        assistant("a2", text("abcd" * 2), parent="u2", finish=None),  # in progress, no usage yet: 4 + 2
    ]
    assert context_size(history) == 1_550 + 100 + 5 + 5 + 6


def test_context_size_uses_the_last_assistant_with_usage():
    history = [
        user("u1", text("x")),
        assistant("a1", text("x"), parent="u1", tokens=usage(input=500)),
        user("u2", text("x")),
        assistant("a2", text("x"), parent="u2", tokens=usage(input=900, output=100)),
    ]
    assert context_size(history) == 1_000


def test_usage_before_a_summary_does_not_count():
    history = [
        compaction("c1"),  # 4 + 6
        summary("s1", "abcd" * 100, parent="c1", tokens=usage(input=150_000, output=100)),  # 4 + 100
        user("u2", text("abcd" * 3)),  # 4 + 3
    ]
    assert context_size(history) == 10 + 104 + 7
    older = [user("u0", text("x")), assistant("a0", text("x"), parent="u0", tokens=usage(input=150_000)), *history]
    # the full history: usage before the summary measured the replaced context; everything is estimated
    assert context_size(older) == (4 + 1) + (4 + 1) + 121


def test_usage_after_a_summary_counts():
    history = [
        compaction("c1"),
        summary("s1", "abcd" * 100, parent="c1", tokens=usage(input=150_000)),
        user("u2", text("abcd" * 3)),
        assistant("a2", text("ok"), parent="u2", tokens=usage(input=2_000, output=10)),
        user("u3", text("abcd")),
    ]
    assert context_size(history) == 2_010 + 5


def test_context_size_on_the_corpus():
    by_slug = {path.name.split("__")[1]: path for path in opencode_files()}
    history = load_export(by_slug["nimble-pixel"])
    # the session ends with an aborted, empty assistant message (no usage): the anchor is the one before it
    assert (history[-1].info.error["name"], history[-1].info.tokens) == ("MessageAbortedError", TokenCounts())
    anchor = history[-2]
    assert (anchor.info.tokens.input, anchor.info.tokens.output, anchor.info.tokens.cache.read) == (18_430, 66, 0)
    (call,) = [part for part in anchor.parts if part.type == "tool"]
    result = estimate_tokens(call.state.output)
    assert result == 1_489
    assert context_size(history) == 18_496 + result + MESSAGE_OVERHEAD_TOKENS == 19_989
    # after the real compaction, only the summary and its request remain: estimated
    sailor = filter_compacted(load_export(by_slug["curious-sailor"]))
    assert context_size(sailor) == sum(estimate_message_tokens(m) for m in sailor) == 1_043
