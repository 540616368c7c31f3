"""The three strategies as pure functions over a view: should_run and selection at each default's boundary,
turn detection and atomicity (ADR-0041)."""

from __future__ import annotations

import itertools

import pytest
from history_builders import assistant, compaction, summary, text, tool, user
from tier_sessions import tier_summary

from brutus.errors import InvalidInput
from brutus.tiers import GoalBatchCompaction, ThresholdSummarization, TierConfig, ToolCallSummarization
from brutus.tiers.strategies import goal_batch_selections, threshold_selections, tool_call_selections
from brutus.tiers.turns import turn_units
from brutus.tiers.view import view_tokens

_ids = itertools.count()


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


def done_turn(blocks: int = 1, *, raw_after: bool = False) -> list:
    """A complete turn: a user message and ``blocks`` [SUMMARIZED] blocks (and a raw reply after them)."""
    u = user(_id("u"), text("do the thing"))
    messages = [u] + [tier_summary(_id("s"), "tool_call", "x", "x") for _ in range(blocks)]
    if raw_after:
        messages.append(assistant(_id("a"), text("done"), parent=u.info.id))
    return messages


def raw_turn(replies: int = 1) -> list:
    """An incomplete turn: a user message and raw replies, no [SUMMARIZED] block."""
    u = user(_id("u"), text("and this"))
    return [u] + [assistant(_id("a"), text("working"), parent=u.info.id) for _ in range(replies)]


def live(messages_after: int) -> list:
    """The live turn at the end: a user message and ``messages_after - 1`` replies (``messages_after`` messages)."""
    return raw_turn(messages_after - 1)


def goal_block(turns: int = 3) -> object:
    return tier_summary(_id("g"), "goal_batch", "x", "x", turn_count=turns)


# -- config ------------------------------------------------------------------------------------------------


def test_defaults_are_the_adr_table():
    config = TierConfig()
    assert (config.min_turns_old_threshold, config.min_turns_to_compact, config.max_turns_per_batch) == (20, 3, 6)
    assert config.max_batches_per_run == 1


def test_a_batch_maximum_below_the_minimum_is_refused():
    with pytest.raises(ValueError, match="max_turns_per_batch .2. must be at least min_turns_to_compact .3."):
        TierConfig(max_turns_per_batch=2)
    with pytest.raises(ValueError):
        TierConfig(min_turns_to_compact=0)
    assert issubclass(InvalidInput, ValueError)


# -- turn detection ------------------------------------------------------------------------------------------


def test_turn_units_cut_the_view_into_turns_batches_and_loose_runs():
    lead = assistant("lead", text("left from before"))
    g = goal_block(4)
    view = [lead, g, *done_turn(2, raw_after=True), *raw_turn(2)]
    units = turn_units(view)
    assert [(u.kind, u.start, u.end, u.complete, u.turn_count) for u in units] == [
        ("loose", 0, 0, False, 0),
        ("batch", 1, 1, True, 4),
        ("turn", 2, 5, True, 1),
        ("turn", 6, 8, False, 1),
    ]
    assert [u.age for u in units] == [8, 7, 3, 0]


def test_user_messages_in_a_row_are_one_turn():
    first, second = user("u1", text("one")), user("u2", text("and two"))
    view = [first, second, tier_summary("s", "threshold", "a", "a"), *live(20)]
    (turn, _) = turn_units(view)
    assert (turn.start, turn.end, turn.complete) == (0, 2, True)


def test_an_imported_tagged_text_counts_as_a_block_without_metadata():
    u = user("u", text("go"))
    view = [u, assistant("a", text("[SUMMARIZED]\nI did it"), parent="u"), *live(20)]
    assert turn_units(view)[0].complete


# -- GoalBatchCompaction: age (min_turns_old_threshold = 20 messages) -------------------------------------


@pytest.mark.parametrize("after, batched", [(19, False), (20, True), (21, True)])
def test_the_youngest_turn_must_be_20_messages_old(after, batched):
    turns = done_turn() + done_turn() + done_turn()
    view = turns + live(after)
    assert GoalBatchCompaction().should_run(view, TierConfig()) is batched
    selections = goal_batch_selections(view, TierConfig())
    assert [(s.start, s.end, s.turn_count) for s in selections] == ([(0, 5, 3)] if batched else [])


def test_age_counts_from_the_last_message_of_the_turn():
    turns = done_turn() + done_turn() + done_turn(3)  # the youngest turn ends three blocks later
    assert not goal_batch_selections(turns + live(19), TierConfig())
    assert goal_batch_selections(turns + live(20), TierConfig())[0].end == len(turns) - 1


# -- GoalBatchCompaction: count (min_turns_to_compact = 3, max_turns_per_batch = 6) ----------------------------


@pytest.mark.parametrize("count, batched", [(2, False), (3, True), (4, True)])
def test_three_eligible_turns_are_needed(count, batched):
    view = [m for _ in range(count) for m in done_turn()] + live(20)
    assert GoalBatchCompaction().should_run(view, TierConfig()) is batched


@pytest.mark.parametrize("count, batch", [(6, 6), (7, 6)])
def test_at_most_six_turns_go_in_one_batch_the_oldest(count, batch):
    view = [m for _ in range(count) for m in done_turn()] + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert (selection.start, selection.end, selection.turn_count) == (0, 2 * batch - 1, batch)
    assert selection.kind == "goal_batch" and selection.parent_id is None


def test_more_batches_per_run_when_asked_each_of_at_least_the_minimum():
    view = [m for _ in range(13) for m in done_turn()] + live(20)
    config = TierConfig(max_batches_per_run=5)
    assert [(s.start, s.end) for s in goal_batch_selections(view, config)] == [(0, 11), (12, 23)]  # 1 left over
    view = [m for _ in range(15) for m in done_turn()] + live(20)
    assert [s.turn_count for s in goal_batch_selections(view, config)] == [6, 6, 3]


# -- GoalBatchCompaction: atomicity and incomplete turns ---------------------------------------------------------


def test_a_batch_takes_whole_turns_with_every_block_and_reply():
    turns = [done_turn(1), done_turn(3, raw_after=True), done_turn(2)]
    view = [m for t in turns for m in t] + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert (selection.start, selection.end) == (0, sum(map(len, turns)) - 1)
    assert view[selection.end + 1].info.role == "user"


def test_an_incomplete_turn_is_never_eligible_and_breaks_a_run():
    view = done_turn() + done_turn() + raw_turn() + done_turn() + done_turn() + live(20)
    assert not GoalBatchCompaction().should_run(view, TierConfig())
    view = done_turn() + done_turn() + done_turn() + raw_turn() + done_turn() + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert (selection.start, selection.end) == (0, 5)


def test_a_user_message_with_no_reply_yet_is_never_eligible():
    view = done_turn() + done_turn() + done_turn() + [user("waiting", text("?"))]
    config = TierConfig(min_turns_old_threshold=0)
    (selection,) = goal_batch_selections(view, config)
    assert selection.end == 5  # the last unit may still be in progress, whatever the age setting
    assert not goal_batch_selections(done_turn() + done_turn() + done_turn(), config)


def test_turns_holding_a_compaction_or_its_summary_are_never_eligible():
    pair = [compaction("c"), summary("cs", "what we did", parent="c")]
    view = pair + done_turn() + done_turn() + live(20)
    assert not goal_batch_selections(view, TierConfig())
    view = pair + done_turn() + done_turn() + done_turn() + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert selection.start == 2


def test_the_start_of_a_kept_tail_is_never_batched():
    tail = done_turn()
    view = tail + [compaction("c", tail_start_id=tail[0].info.id), summary("cs", "s", parent="c")]
    view += done_turn() + done_turn() + done_turn() + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert selection.start == 4


# -- GoalBatchCompaction: a goal batch is made of turns only (issue 24) ------------------------------------------
# These replace tests of the old contract, under which goal batches side by side were batched again (a batch
# of 12 turns and more, without the directions of the turns in them) and 1-2 turns before a goal batch were
# folded into it (a batch of 7 turns).


@pytest.mark.parametrize("blocks", [3, 6, 12])
def test_goal_batches_are_never_batched_again(blocks):
    view = [goal_block(3) for _ in range(blocks)] + live(20)
    assert not GoalBatchCompaction().should_run(view, TierConfig())
    assert [u.eligible(TierConfig(), last=False) for u in turn_units(view) if u.kind == "batch"] == [False] * blocks


def test_turns_and_goal_batches_do_not_batch_together():
    view = [goal_block(), goal_block()] + done_turn() + done_turn() + live(20)
    assert not goal_batch_selections(view, TierConfig())  # two blocks, then two turns: too few turns
    view = [goal_block(), goal_block()] + done_turn() + done_turn() + done_turn() + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert (selection.start, selection.end, selection.turn_count) == (2, 7, 3)


def test_fewer_turns_than_the_minimum_between_goal_batches_wait():
    between = done_turn() + done_turn()
    view = [goal_block(3)] + between + [goal_block(6)] + live(20)
    assert not goal_batch_selections(view, TierConfig())  # never folded into a neighbouring goal batch
    view = [goal_block(3)] + between + done_turn() + [goal_block(6)] + live(20)
    (selection,) = goal_batch_selections(view, TierConfig())
    assert (selection.start, selection.end, selection.turn_count) == (1, 6, 3)


@pytest.mark.parametrize("minimum, maximum", [(3, 6), (2, 4), (1, 1), (5, 5)])
def test_every_batch_holds_between_the_minimum_and_the_maximum_of_turns(minimum, maximum):
    config = TierConfig(min_turns_to_compact=minimum, max_turns_per_batch=maximum, max_batches_per_run=50)
    for count in range(1, 16):
        view = [m for _ in range(count) for m in done_turn()] + live(20)
        found = goal_batch_selections(view, config)
        assert all(minimum <= s.turn_count <= maximum for s in found)
        assert sum(s.turn_count for s in found) == count - count % maximum * (count % maximum < minimum)
        assert [view[s.start].info.role for s in found] == ["user"] * len(found)


# -- ToolCallSummarization ----------------------------------------------------------------------------------------


def tool_step(id: str, parent: str, *, tokens: int = 1_000, status: str = "completed") -> object:
    return assistant(id, text("let me look"), tool(f"call_{id}", tokens=tokens, status=status), parent=parent)


@pytest.mark.parametrize("after, selected", [(19, False), (20, True), (21, True)])
def test_tool_calls_must_be_20_messages_old(after, selected):
    view = [user("u", text("go")), tool_step("a1", "u", tokens=3_000)] + live(after)
    assert ToolCallSummarization().should_run(view, TierConfig()) is selected
    expected = [("tool_call", 1, 1, 1, "u")] if selected else []
    assert [(s.kind, s.start, s.end, s.turn_count, s.parent_id) for s in tool_call_selections(view, TierConfig())] == expected


@pytest.mark.parametrize("size, selected", [(1_999, False), (2_000, True)])
def test_a_run_of_tool_calls_is_summarized_once_it_holds_2000_tokens(size, selected):
    view = [user("u", text("go")), tool_step("a1", "u", tokens=500), tool_step("a2", "u", tokens=500)] + live(20)
    view[1].parts[0].text += "x" * (4 * (size - view_tokens(view[1:3])))
    assert view_tokens(view[1:3]) == size
    assert [(s.start, s.end) for s in tool_call_selections(view, TierConfig())] == ([(1, 2)] if selected else [])


def test_a_run_stops_at_the_recent_window_inside_a_long_turn():
    view = [user("u", text("go"))] + [tool_step(f"a{i}", "u") for i in range(30)]
    (selection,) = tool_call_selections(view, TierConfig())
    assert (selection.start, selection.end) == (1, len(view) - 21)


def test_unfinished_calls_blocks_and_text_replies_break_runs():
    view = [
        user("u", text("go")),
        tool_step("a1", "u", tokens=3_000),
        tool_step("a2", "u", tokens=3_000, status="running"),
        tool_step("a3", "u", tokens=3_000),
        tier_summary("s", "tool_call", "x", "x"),
        tool_step("a4", "u", tokens=3_000),
        assistant("a5", text("thinking"), parent="u"),
        tool_step("a6", "u", tokens=3_000),
        user("u2", text("next")),
        tool_step("a7", "u2", tokens=3_000),
    ] + live(20)
    found = [(s.start, s.end, s.parent_id) for s in tool_call_selections(view, TierConfig())]
    assert found == [(1, 1, "u"), (3, 3, "u"), (5, 5, "u"), (7, 7, "u"), (9, 9, "u2")]


def test_tool_calls_before_any_user_message_belong_to_no_turn():
    view = [tool_step("a1", "none", tokens=3_000)] + live(20)
    (selection,) = tool_call_selections(view, TierConfig())
    assert (selection.turn_count, selection.parent_id) == (0, None)


# -- ThresholdSummarization -----------------------------------------------------------------------------------------


def _padded(view: list, total: int) -> list:
    """``view`` with its first message's text padded so the whole estimate is exactly ``total``."""
    missing = total - view_tokens(view)
    assert missing >= 0
    view[0].parts[0].text += "x" * (4 * missing)
    assert view_tokens(view) == total
    return view


@pytest.mark.parametrize("total, fires", [(50_000, False), (50_001, True)])
def test_threshold_fires_above_50k_tokens(total, fires):
    view = _padded([user("u", text("go")), assistant("a", text("done"), parent="u")] + live(20), total)
    assert ThresholdSummarization().should_run(view, TierConfig()) is fires


@pytest.mark.parametrize("after, selected", [(19, False), (20, True), (21, True)])
def test_threshold_leaves_the_newest_20_messages_alone(after, selected):
    view = [user("u", text("go")), assistant("a", text("done"), parent="u")] + live(after)
    config = TierConfig(threshold_tokens=0)
    assert [(s.start, s.end) for s in threshold_selections(view, config)] == ([(1, 1)] if selected else [])


def test_threshold_takes_every_old_assistant_run_and_never_users_or_summaries():
    view = [
        assistant("lead", text("from before")),
        user("u1", text("go")),
        assistant("a1", text("one"), parent="u1"),
        tool_step("a2", "u1", status="pending"),
        tier_summary("s", "tool_call", "x", "x"),
        assistant("a3", text("three"), parent="u1"),
        compaction("c"),
        summary("cs", "prefix summary", parent="c"),
        user("u2", text("again")),
        assistant("a4", text("four"), parent="u2"),
    ] + live(20)
    found = [(s.start, s.end, s.turn_count, s.parent_id) for s in threshold_selections(view, TierConfig(threshold_tokens=0))]
    assert found == [(0, 0, 0, None), (2, 3, 1, "u1"), (5, 5, 1, "u1"), (9, 9, 1, "u2")]
