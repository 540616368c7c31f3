"""Done means (issues 6 and 24): over a 200-turn generated session and the longest corpus sessions, replayed
with the tiers run before every model call, the view stays under a fixed budget and has no floor: what lies
behind the newest 20 messages stays bounded however many turns came before.

Since issue 24 a ``[GOAL BATCH]`` is never batched again (ADR-0041: a goal batch is made of 3-6 turns and
keeps their direction), so on their own the tiers leave one goal batch per few turns; the prefix compaction
(seed 004) takes what is older, as an agent runs it at its context threshold. The 200-turn replay therefore
compacts at 80% of an 80K window (``ContextPolicy.compact_at``). Before issue 24 it ran without compaction,
and goal batches of goal batches (without the directions of their turns) kept it under the budget.
"""

from __future__ import annotations

import pytest
from corpus_helpers import load_export, opencode_files
from tier_sessions import generated_session, goal_batch_figures, replay

from brutus.history import compaction_part, filter_compacted
from brutus.render import anthropic_problems, to_anthropic
from brutus.tiers import TierConfig, tier_metadata, tier_view

BUDGET = 80_000  # estimated tokens: the context window of the replay
COMPACT_AT = 64_000  # the prefix compaction runs above 80% of it, before the model call
OLD_BUDGET = 10_000  # what lies behind the newest 20 messages: a compaction summary, goal batches, a few turns


@pytest.fixture(scope="module")
def two_hundred_turns():
    return replay(generated_session(200), TierConfig(), prepare=filter_compacted, compact_at=COMPACT_AT)


@pytest.fixture(scope="module")
def without_tiers():
    return replay(generated_session(200), TierConfig(), prepare=filter_compacted, compact_at=COMPACT_AT, strategies=())


@pytest.mark.slow  # the 200-turn replay: CI runs it
def test_200_turns_stay_under_a_fixed_budget(two_hundred_turns, without_tiers):
    run = two_hundred_turns
    assert len(run.turn_ends) == 200
    assert max(run.tiered_tokens) <= COMPACT_AT < BUDGET
    assert run.plain_tokens[-1] > 20 * BUDGET  # without the tiers and compaction: 1.8M tokens
    # the tiers keep the view small enough that the prefix compaction runs far less often (11 times, not 28)
    assert 2 * len(run.compactions) <= len(without_tiers.compactions)


@pytest.mark.slow  # the 200-turn replay: CI runs it
def test_200_turns_have_no_floor(two_hundred_turns, without_tiers):
    run = two_hundred_turns
    assert max(run.old_tokens) <= OLD_BUDGET < max(without_tiers.old_tokens)  # 9.1K with the tiers, 35K without
    late = max(run.old_tokens[run.turn_ends[150] :])
    early = max(run.old_tokens[run.turn_ends[20] : run.turn_ends[70]])
    assert late <= early * 1.25  # turn 150-200 sits no higher than turn 20-70: nothing accumulates
    assert max(run.tiered_messages) <= 60


def test_every_goal_batch_of_200_turns_keeps_the_adr(two_hundred_turns):
    found = goal_batch_figures(two_hundred_turns.everything)
    assert len(found) >= 30
    for figures in found:
        assert 3 <= figures.turn_count == figures.turns <= 6 and figures.nested == 0
        assert figures.size <= figures.covered_tokens == figures.replaced_tokens
        assert figures.coverage >= 0.8 and "Human Direction" in figures.headings


@pytest.mark.slow  # the 200-turn replay: CI runs it
def test_200_turns_end_with_goal_batches_in_front_and_a_valid_view(two_hundred_turns):
    run = two_hundred_turns
    view = tier_view(run.history)
    assert anthropic_problems(to_anthropic(view, system="agent")) == []
    assert compaction_part(view[0]) is not None and view[1].info.summary  # the compaction pair first
    batches = [n for n, m in enumerate(view) if tier_metadata(m) and tier_metadata(m).summary_type == "goal_batch"]
    turns = [n for n, m in enumerate(view) if m.info.role == "user" and compaction_part(m) is None]
    assert max(batches, default=0) < min(turns)  # then the goal batches, oldest first, then turns verbatim
    covered = sum(tier_metadata(m).turn_count for m in view if tier_metadata(m) and tier_metadata(m).summary_type == "goal_batch")
    users = sum(m.info.role == "user" and compaction_part(m) is None for m in view)
    since = generated_session(200)[run.compactions[-1] + 1 :]
    assert covered + users == sum(m.info.role == "user" for m in since)  # every turn since: verbatim or in one batch


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
