"""The summarizer prompts (seed 004, seed 002, ADR-0041), the price table, default_summarizer and the
package surface."""

from __future__ import annotations

import pydantic
import pytest

import brutus.summarizers as summarizers
from brutus.models import CacheTokens, TokenCounts
from brutus.summarizers import (
    COMPACTION_SYSTEM_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    EPISODIC_SYSTEM_PROMPT,
    GOAL_BATCH_SECTIONS,
    AnthropicSummarizer,
    ExtractiveSummarizer,
    SummaryRequest,
    cost_of,
    default_summarizer,
    price_of,
    summary_prompt,
    system_prompt,
)
from brutus.summarizers.prompts import (
    GOAL_BATCH_PROMPT,
    THRESHOLD_PROMPT,
    TOOL_CALL_PROMPT,
    goal_batch_transcript,
)
from history_builders import assistant, text, tool, user


def test_package_all_is_sorted_and_resolves() -> None:
    assert summarizers.__all__ == sorted(summarizers.__all__)
    for name in summarizers.__all__:
        assert getattr(summarizers, name) is not None


# -- seed texts ------------------------------------------------------------------------------------------------


def test_seed_004_prompts_verbatim() -> None:
    assert COMPACTION_SYSTEM_PROMPT.startswith("Provide a detailed but concise summary of the conversation.\n\nCapture:\n")
    assert "- Modified files and technical decisions with rationale\n" in COMPACTION_SYSTEM_PROMPT
    assert COMPACTION_SYSTEM_PROMPT.endswith("concise enough to be quickly understood.")
    assert DEFAULT_SUMMARY_PROMPT.startswith("Provide a detailed prompt for continuing our conversation above.\n")
    assert DEFAULT_SUMMARY_PROMPT.endswith("access to our conversation.")


def test_adr_0041_prompts() -> None:
    assert EPISODIC_SYSTEM_PROMPT.startswith("You are writing episodic memory for an AI coding agent.")
    assert [name for name, _ in GOAL_BATCH_SECTIONS] == [
        "Goal Arc", "Human Direction", "What Was Achieved", "Dead Ends", "Lasting Constraints", "Key Artifacts"]
    for name, _ in GOAL_BATCH_SECTIONS:
        assert f"\n## {name}\n[" in GOAL_BATCH_PROMPT
    assert "[GOAL BATCH]\n\n## Goal Arc" in GOAL_BATCH_PROMPT
    assert "MUST USE: first-person throughout" in GOAL_BATCH_PROMPT
    for prompt in (TOOL_CALL_PROMPT, THRESHOLD_PROMPT):
        assert "Start with the\nline [SUMMARIZED]" in prompt and "never 'the agent'" in prompt
    assert system_prompt("compaction") == COMPACTION_SYSTEM_PROMPT
    assert {system_prompt(k) for k in ("tool_call", "threshold", "goal_batch")} == {EPISODIC_SYSTEM_PROMPT}


def test_summary_prompt_orders_previous_summary_prompt_and_instructions() -> None:
    history = [user("u1", text("hi"))]
    r = SummaryRequest(history=history, previous_summary=" Before. ", instructions="  Keep names.  ")
    assert summary_prompt(r) == ("The conversation continues from this earlier summary:\n<previous_summary>\nBefore.\n"
                                 "</previous_summary>\n\n" + DEFAULT_SUMMARY_PROMPT + "\n\nAdditional instructions: Keep names.")
    assert summary_prompt(SummaryRequest(history=history, kind="threshold", instructions="x")) == (
        THRESHOLD_PROMPT + "\n\nAdditional instructions: x")
    assert summary_prompt(SummaryRequest(history=history, instructions="  ")) == DEFAULT_SUMMARY_PROMPT
    goal = SummaryRequest(history=history, kind="goal_batch")
    assert summary_prompt(goal) == GOAL_BATCH_PROMPT + "\n\nTurns to compact:\n\n--- Turn 1 ---\n[user]: hi"
    assert summary_prompt(goal, transcript=False) == GOAL_BATCH_PROMPT


def test_goal_batch_transcript_of_raw_messages() -> None:
    history = [
        assistant("a0", text("Picking up where I left off.")),
        user("u1", text("Run the tests.")),
        assistant("a1", tool("t1", name="bash", input={"command": "pytest"}, output="2 failed\n" + "x" * 2_000),
                  tool("t2", name="bash", input={"command": "ls"}, status="error", error="denied"), parent="u1"),
    ]
    assert goal_batch_transcript(history) == (
        "--- Turn 1 ---\n[assistant]: Picking up where I left off.\n\n"
        "--- Turn 2 ---\n[user]: Run the tests.\n"
        '[tool bash]: {"command": "pytest"}\n'
        f"[result]: 2 failed\n{'x' * 991} [… 1009 more characters]\n"
        '[tool bash]: {"command": "ls"}\n'
        "[error]: denied"
    )


def test_request_validation() -> None:
    with pytest.raises(pydantic.ValidationError):
        SummaryRequest(history=[], kind="everything")
    with pytest.raises(pydantic.ValidationError):
        SummaryRequest(history=[], max_tokens=0)
    with pytest.raises(pydantic.ValidationError):
        SummaryRequest(history=[], surprise=1)


# -- prices ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "per_million"), [
    ("claude-haiku-4-5", (1.0, 5.0)),
    ("claude-haiku-4-5-20251001", (1.0, 5.0)),
    ("claude-sonnet-4-20250514", (3.0, 15.0)),
    ("claude-sonnet-4-6", (3.0, 15.0)),
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", (3.0, 15.0)),
    ("claude-opus-4-20250514", (15.0, 75.0)),
    ("claude-opus-4-1@20250805", (15.0, 75.0)),
    ("claude-opus-4-5-20251101", (5.0, 25.0)),
    ("claude-opus-4-7", (5.0, 25.0)),
])
def test_price_table(model: str, per_million: tuple[float, float]) -> None:
    price = price_of(model)
    assert price is not None
    assert (price.input, price.output) == per_million
    assert price.cache_write == pytest.approx(per_million[0] * 1.25)
    assert price.cache_read == pytest.approx(per_million[0] * 0.1)


def test_cost() -> None:
    tokens = TokenCounts(input=1_000_000, output=100_000, reasoning=100_000, cache=CacheTokens(read=1_000_000, write=1_000_000))
    assert cost_of("claude-sonnet-4-5", tokens) == pytest.approx(3.0 + 3.0 + 3.75 + 0.3)
    assert price_of("gpt-4o") is None and price_of("claude-3-5-haiku-20241022") is None
    assert cost_of("gpt-4o", tokens) == 0.0


# -- default ------------------------------------------------------------------------------------------------


def test_default_summarizer_follows_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(default_summarizer({"ANTHROPIC_API_KEY": "sk"}), AnthropicSummarizer)
    assert isinstance(default_summarizer({"ANTHROPIC_API_KEY": ""}), ExtractiveSummarizer)
    assert isinstance(default_summarizer({}), ExtractiveSummarizer)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert isinstance(default_summarizer(), ExtractiveSummarizer)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk")
    chosen = default_summarizer()
    assert isinstance(chosen, AnthropicSummarizer) and chosen.model == "claude-haiku-4-5" and chosen.max_tokens == 4096
