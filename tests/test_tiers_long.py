"""Done means (issue 6): over a 200-turn generated session and the longest corpus sessions, replayed with the
tiers run before every model call, the view stays under a fixed budget and has no floor: what lies behind
the newest 20 messages stays bounded however many turns came before."""

from __future__ import annotations

import pytest
from corpus_helpers import load_export, opencode_files
from tier_sessions import generated_session, replay

from brutus.history import filter_compacted
from brutus.render import anthropic_problems, to_anthropic
from brutus.tiers import TierConfig, tier_metadata, tier_view

BUDGET = 80_000  # estimated tokens: the view of the generated session, at every step
OLD_BUDGET = 8_000  # what lies behind the newest 20 messages: summaries and a few user messages


@pytest.fixture(scope="module")
def two_hundred_turns():
    return replay(generated_session(200), TierConfig())


def test_200_turns_stay_under_a_fixed_budget(two_hundred_turns):
    run = two_hundred_turns
    assert len(run.turn_ends) == 200
    assert max(run.tiered_tokens) <= BUDGET
    assert run.plain_tokens[-1] > 20 * BUDGET  # without the tiers: 1.8M tokens


def test_200_turns_have_no_floor(two_hundred_turns):
    run = two_hundred_turns
    assert max(run.old_tokens) <= OLD_BUDGET
    late = max(run.old_tokens[run.turn_ends[150] :])
    early = max(run.old_tokens[run.turn_ends[20] : run.turn_ends[70]])
    assert late <= early * 1.25  # turn 150-200 sits no higher than turn 20-70: nothing accumulates
    assert max(run.tiered_messages) <= 60


def test_200_turns_end_with_goal_batches_in_front_and_a_valid_view(two_hundred_turns):
    view = tier_view(two_hundred_turns.history)
    assert anthropic_problems(to_anthropic(view, system="agent")) == []
    kinds = [tier_metadata(m).summary_type for m in view if tier_metadata(m)]
    assert kinds[0] == "goal_batch" and kinds.count("goal_batch") <= 3
    covered = sum(tier_metadata(m).turn_count for m in view if tier_metadata(m) and tier_metadata(m).summary_type == "goal_batch")
    users = sum(m.info.role == "user" for m in view)
    assert covered + users == 200  # every turn is either verbatim or inside a goal batch


def _longest(count: int):
    return sorted(opencode_files(), key=lambda path: len(load_export(path)), reverse=True)[:count]


CORPUS_BUDGET = 50_000


@pytest.mark.parametrize("path", _longest(3), ids=lambda p: p.name.split("__")[1])
def test_the_longest_corpus_sessions_stay_under_a_fixed_budget(path):
    history = load_export(path)
    run = replay(history, TierConfig(), prepare=filter_compacted)
    assert max(run.tiered_tokens) <= CORPUS_BUDGET
    assert run.tiered_tokens[-1] <= run.plain_tokens[-1]
    assert anthropic_problems(to_anthropic(tier_view(run.history))) == []


def test_the_whole_corpus_back_to_back_has_no_floor():
    history = [message for path in opencode_files() for message in load_export(path)]
    run = replay(history, TierConfig(), prepare=filter_compacted)
    assert max(run.plain_tokens) > 4 * CORPUS_BUDGET  # 288K without the tiers
    assert max(run.tiered_tokens) <= 60_000  # the threshold (50K) plus what arrives before the next run
    # below the threshold short turns may wait verbatim; once it is crossed they are summarized and batched,
    # and what lies behind the newest 20 messages falls back to a few thousand tokens, late as early
    assert min(run.old_tokens[-200:]) <= 8_000
    assert anthropic_problems(to_anthropic(tier_view(run.history))) == []
