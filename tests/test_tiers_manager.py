"""The StrategyManager: strategies in ADR order, each on the view the previous one left; what a summary
message holds; summarizer requests, fallbacks and logging (in memory, no database)."""

from __future__ import annotations

import logging

import pytest
from history_builders import assistant, text, tool, user

from brutus.errors import InvalidInput
from brutus.models import TokenCounts
from brutus.estimates import context_size
from brutus.render import anthropic_problems, to_anthropic
from brutus.summarizers import ExtractiveSummarizer, Summary
from brutus.tiers import GoalBatchCompaction, StrategyManager, TierConfig, ToolCallSummarization, apply_tiers, tier_metadata, tier_view
from brutus.tiers.view import view_tokens
from brutus.tiers.goal_batch import direction_coverage, goal_batch_budget

CLOCK = lambda: 1_800_000_000_000  # noqa: E731


def turns(count: int, *, tool_tokens: int = 600) -> list:
    """``count`` turns: a user direction, two tool steps and a closing reply."""
    history = []
    for n in range(count):
        u = f"u{n}"
        history += [
            user(u, text(f"step {n}: change src/mod{n}.py; never touch the API")),
            assistant(f"a{n}a", text("reading"), tool(f"r{n}", name="read", tokens=tool_tokens, input={"filePath": f"src/mod{n}.py"}), parent=u, finish="tool-calls"),
            assistant(f"a{n}b", text("testing"), tool(f"b{n}", name="bash", tokens=tool_tokens, input={"command": "pytest -q"}), parent=u, finish="tool-calls"),
            assistant(f"a{n}c", text(f"Done with step {n}."), parent=u),
        ]
    return history


SMALL = TierConfig(
    tool_call_recent_messages=4,
    tool_call_min_tokens=500,
    threshold_tokens=1_000,
    threshold_recent_messages=4,
    min_turns_old_threshold=4,
)


class Recording:
    """A summarizer that records its requests and answers untagged text (the manager adds the tag); a goal
    batch holds a Human Direction section, as ADR-0041 asks, unless ``answer`` says what to answer."""

    def __init__(self, fail: bool = False, answer: str | None = None, stop_reason: str | None = None) -> None:
        self.requests = []
        self.fail = fail
        self.answer = answer
        self.stop_reason = stop_reason

    def summarize(self, request):
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("provider down")
        text = f"{request.kind} of {len(request.history)} messages"
        if request.kind == "goal_batch":
            text = self.answer if self.answer is not None else f"## Human Direction\n- as asked\n\n## What Was Achieved\n- {text}"
        return Summary(text=text, model="recorder", tokens=TokenCounts(input=900, output=50), cost=0.25,
                       stop_reason=self.stop_reason if request.kind == "goal_batch" else None)


def test_the_three_strategies_run_in_order_each_on_the_view_the_last_one_left():
    history = turns(6)
    summarizer = Recording()
    result, report = apply_tiers(history, summarizer, SMALL, clock=CLOCK)
    assert [s.kind for s in report.strategies] == ["tool_call", "threshold", "goal_batch"]
    kinds = [r.kind for r in summarizer.requests]
    assert kinds == sorted(kinds, key=["tool_call", "threshold", "goal_batch"].index)
    assert set(kinds) == {"tool_call", "threshold", "goal_batch"}  # goal batch saw the blocks the first two wrote
    tool_call, threshold, goal = report.strategies
    assert (tool_call.summaries, threshold.summaries, goal.summaries) == (5, 5, 1)  # the live turn is left
    assert goal.turns == report.turns_compacted == 5
    assert report.tokens_before == tool_call.tokens_before and report.tokens_after == goal.tokens_after
    assert report.tokens_saved == report.tokens_before - view_tokens(tier_view(result)) > 0
    assert len(result) == len(history) + report.summaries and result[: len(history)] == history
    assert all(r.kind in ("tool_call", "threshold") for r in summarizer.requests if r.max_tokens == SMALL.summary_max_tokens)
    goal_block = next(m for m in result if (m.info.metadata or {}).get("summary_type") == "goal_batch")
    covered = tier_metadata(goal_block).covered_tokens
    # a goal batch is asked for within the span it replaces (it was asked for goal_batch_max_tokens before issue 24)
    (request,) = [r for r in summarizer.requests if r.kind == "goal_batch"]
    assert request.max_tokens == covered - 8 == goal_batch_budget(request.history, SMALL) < SMALL.goal_batch_max_tokens


def test_a_goal_batch_request_holds_whole_turns():
    summarizer = Recording()
    apply_tiers(turns(6), summarizer, SMALL, clock=CLOCK)
    (request,) = [r for r in summarizer.requests if r.kind == "goal_batch"]
    roles = [m.info.role for m in request.history]
    assert roles[0] == "user" and roles.count("user") == 5
    assert all(tier_metadata(m) is not None for m in request.history if m.info.role == "assistant")


def test_a_summary_message_carries_its_range_and_is_no_prefix_boundary():
    result, report = apply_tiers(turns(6), Recording(), SMALL, clock=CLOCK)
    goal = next(m for m in result if (m.info.metadata or {}).get("summary_type") == "goal_batch")
    metadata = goal.info.metadata
    assert metadata["summarized"] is True and metadata["turn_count"] == 5
    assert metadata["covers"] == {"from_id": "u0", "to_id": "a4c", "from_seq": 0, "to_seq": 0}
    assert metadata["covered_messages"] == 20 and metadata["model"] == "recorder"
    assert metadata["usage"]["input"] == 900  # the summarizer's usage, kept out of the token columns
    info = goal.info
    assert (info.role, info.summary, info.synthetic, info.finish, info.mode, info.agent) == (
        "assistant", False, True, "stop", "goal_batch", "compaction")
    assert info.tokens == TokenCounts() and info.cost == 0.25 and info.parent_id is None
    assert goal.parts[0].text == "[GOAL BATCH]\n## Human Direction\n- as asked\n\n## What Was Achieved\n- goal_batch of 15 messages"
    block = next(m for m in result if (m.info.metadata or {}).get("summary_type") == "tool_call")
    assert block.parts[0].text.startswith("[SUMMARIZED]\n") and block.info.parent_id == "u0"
    assert report.strategy("goal_batch").summary_ids == [goal.info.id]


def _goal_batch(result):
    (goal,) = [m for m in result if (m.info.metadata or {}).get("summary_type") == "goal_batch"]
    return goal


@pytest.mark.parametrize(
    "answer, stop_reason",
    [
        ("## Human Direction\n- as asked\n\n## What Was Achieved\n" + "- I did a great deal\n" * 400, None),  # larger
        ("## Human Direction\n- as asked", "max_tokens"),  # cut off
        ("## What Was Achieved\n- everything", None),  # no Human Direction
        ("## Human Direction\n\n## What Was Achieved\n- everything", None),  # an empty one
    ],
    ids=["larger-than-its-span", "cut-off", "no-human-direction", "empty-human-direction"],
)
def test_a_goal_batch_that_breaks_the_adr_is_replaced_by_the_extractive_one(answer, stop_reason, caplog):
    caplog.set_level(logging.WARNING, logger="brutus.tiers")
    history = turns(6)
    result, report = apply_tiers(history, Recording(answer=answer, stop_reason=stop_reason), SMALL, clock=CLOCK)
    goal = _goal_batch(result)
    metadata = tier_metadata(goal)
    assert (metadata.fallback, metadata.model, goal.info.model_id) == ("extractive", "extractive", "extractive")
    assert metadata.usage.input == 900 and goal.info.cost == 0.25  # the refused call was paid for
    assert view_tokens([goal]) <= metadata.covered_tokens
    assert direction_coverage(goal.parts[0].text, history[:20]) == 1.0
    assert report.strategy("goal_batch").fallbacks == 1
    assert "goal batch from recorder refused" in caplog.text


def test_no_goal_batch_is_written_when_none_can_keep_the_adr(monkeypatch, caplog):
    import brutus.tiers.goal_batch as goal_batch

    def broken(request):
        raise RuntimeError("extractor broke")

    monkeypatch.setattr(goal_batch, "extractive_summary", broken)
    caplog.set_level(logging.WARNING, logger="brutus.tiers")
    result, report = apply_tiers(turns(6), Recording(answer="## What Was Achieved\n- everything"), SMALL, clock=CLOCK)
    assert report.strategy("goal_batch").ran and report.strategy("goal_batch").summaries == 0
    assert not [m for m in result if (m.info.metadata or {}).get("summary_type") == "goal_batch"]
    assert "no goal batch written" in caplog.text


def test_a_goal_batch_is_never_larger_than_the_view_it_replaces():
    history = turns(6, tool_tokens=600)
    for message in history:  # long directions and replies: the old extractive text outgrew the span
        if message.info.role == "user" or not message.parts[-1].type == "tool":
            message.parts[0].text += " and keep the error messages as they were written" * 6
    result, _ = apply_tiers(history, ExtractiveSummarizer(), SMALL, clock=CLOCK)
    goal = _goal_batch(result)
    metadata = tier_metadata(goal)
    before = tier_view([m for m in result if m is not goal])  # the view the goal batch was cut from
    replaced = before[: [m.info.id for m in before].index("u5")]
    assert [m.info.id for m in replaced if m.info.role == "user"] == ["u0", "u1", "u2", "u3", "u4"]
    assert metadata.covered_tokens == view_tokens(replaced)
    assert view_tokens([goal]) <= metadata.covered_tokens
    assert metadata.fallback is None and direction_coverage(goal.parts[0].text, history[:20]) == 1.0


def test_the_summarizer_usage_does_not_change_the_context_size():
    history = turns(6)
    history[-1].info.tokens = TokenCounts(input=5_000, output=100)
    result, _ = apply_tiers(history, Recording(), SMALL, clock=CLOCK)
    # the raw history counts the summaries as added messages; their summarizer usage (900) is not the context
    assert context_size(result) == context_size(history) + view_tokens(result[len(history) :])


def test_a_failing_summarizer_falls_back_to_the_extractive_summary(caplog):
    caplog.set_level(logging.WARNING)
    result, report = apply_tiers(turns(6), Recording(fail=True), SMALL, clock=CLOCK)
    assert report.summaries == 11 and sum(s.fallbacks for s in report.strategies) == 11
    blocks = [m for m in result if tier_metadata(m) is not None]
    assert all(m.info.metadata["fallback"] == "extractive" for m in blocks)
    assert all(m.parts[0].text.startswith(("[SUMMARIZED]", "[GOAL BATCH]")) for m in blocks)
    assert "provider down" in caplog.text


def test_each_strategy_that_writes_logs_turns_and_tokens(caplog):
    caplog.set_level(logging.INFO, logger="brutus.tiers")
    apply_tiers(turns(6), ExtractiveSummarizer(), SMALL, clock=CLOCK)
    lines = [r.getMessage() for r in caplog.records if r.name == "brutus.tiers"]
    assert len(lines) == 3
    assert "goal_batch wrote 1 summary over 5 turns (20 messages)" in lines[2] and "saved" in lines[2]


def test_nothing_to_do_writes_nothing():
    history = turns(2)
    result, report = apply_tiers(history, Recording(), TierConfig(), clock=CLOCK)
    assert result == history and report.summaries == 0 and report.tokens_saved == 0
    assert [s.ran for s in report.strategies] == [False, False, False]


def test_runs_converge_and_the_view_stays_valid():
    history, summarizer = turns(12), ExtractiveSummarizer()
    for _ in range(10):
        history, report = apply_tiers(history, summarizer, SMALL, clock=CLOCK)
        assert anthropic_problems(to_anthropic(tier_view(history))) == []
        if not report.summaries:
            break
    else:
        pytest.fail("the tiers kept writing summaries")
    view = tier_view(history)
    assert [tier_metadata(m).summary_type for m in view if tier_metadata(m)][:1] == ["goal_batch"]
    assert len(view) < len(turns(12)) / 2


def test_a_manager_runs_the_strategies_it_is_given():
    summarizer = Recording()
    manager = StrategyManager(SMALL, [GoalBatchCompaction(), ToolCallSummarization()])
    written = []
    report = manager.run(turns(6), summarizer, lambda new: written.append(new) or _stored(new))
    assert [s.kind for s in report.strategies] == ["goal_batch", "tool_call"]
    assert not report.strategies[0].ran  # no [SUMMARIZED] blocks yet: no complete turn
    assert {w.kind for w in written} == {"tool_call"}
    with pytest.raises(InvalidInput, match="config must be a TierConfig"):
        StrategyManager({"threshold_tokens": 5})


def _stored(new):
    from brutus.tiers.manager import _memory_message

    return _memory_message(new, "ses_test", 0, 1)
