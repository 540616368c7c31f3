"""split_point: the oldest user-message boundary whose tail fits the preserve budget (seeds 000, 002)."""

from __future__ import annotations

import pytest
from corpus_helpers import load_export, opencode_files
from history_builders import assistant, compaction, text, tool, user
from hypothesis import given, settings
from hypothesis import strategies as st

from brutus.errors import InvalidInput
from brutus.estimates import estimate_message_tokens
from brutus.split import DEFAULT_PRESERVE_RATIO, is_split_boundary, preserve_budget, split_point


def words(tokens):
    """A text part of exactly ``tokens`` estimated tokens."""
    return text("abcd" * tokens)


def six():
    # estimates: 100, 50, 20, 30, 10, 40 -> tails from the end: 40, 50*, 80, 100*, 150, 250* (* = user)
    return [
        user("u0", words(96)),
        assistant("a0", words(46), parent="u0"),
        user("u1", words(16)),
        assistant("a1", tool("c1", tokens=25), parent="u1"),  # 4 + bash 1 + output 25
        user("u2", words(6)),
        assistant("a2", words(36), parent="u2"),
    ]


def test_the_fixture_estimates():
    assert [estimate_message_tokens(m) for m in six()] == [100, 50, 20, 30, 10, 40]


@pytest.mark.parametrize(
    ("budget", "index"),
    [(10**9, 0), (250, 0), (249, 2), (100, 2), (99, 4), (50, 4), (49, 6), (0, 6)],
)
def test_the_oldest_boundary_whose_tail_fits(budget, index):
    assert split_point(six(), budget) == index


@pytest.mark.parametrize(
    ("context_limit", "ratio", "index"),
    [(250, 0.4, 2), (249, 0.4, 4), (250, 1.0, 0), (125, 0.4, 4), (500, 0.2, 2), (100, 0.5, 4)],
)
def test_the_default_budget_is_a_ratio_of_the_context(context_limit, ratio, index):
    assert split_point(six(), context_limit=context_limit, ratio=ratio) == index


def test_preserve_budget():
    assert DEFAULT_PRESERVE_RATIO == 0.4
    assert preserve_budget(context_limit=200_000) == 80_000
    assert preserve_budget(context_limit=249) == 99  # 99.6, floored
    assert preserve_budget(context_limit=100, ratio=0.29) == 29  # 28.999… in floating point
    assert preserve_budget(123, context_limit=200_000) == 123  # an explicit budget wins
    assert preserve_budget(context_limit=0) == float("inf")


def test_an_unlimited_context_keeps_everything():
    assert split_point(six(), context_limit=0) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"preserve_tokens": -1},
        {"context_limit": -1},
        {"context_limit": 100, "ratio": 0},
        {"context_limit": 100, "ratio": 1.5},
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(InvalidInput):
        split_point(six(), **kwargs)


def test_when_no_tail_fits_everything_is_summarized():
    history = [user("u0", words(10)), assistant("a0", words(1_000), parent="u0")]
    assert split_point(history, 500) == 2


def test_no_user_message_means_no_boundary():
    history = [assistant("a0", words(1)), assistant("a1", words(1))]
    assert split_point(history, 10**6) == 2
    assert split_point([], 10**6) == 0


def test_a_history_starting_with_the_assistant_splits_at_its_first_user_message():
    history = [assistant("a0", words(1)), user("u1", words(1)), assistant("a1", words(1))]
    assert split_point(history, 10**6) == 1


def test_assistant_steps_stay_with_their_turn():
    history = [
        user("u0", words(6)),  # 10
        assistant("a0", tool("c1", tokens=5), parent="u0", finish="tool-calls"),  # 10
        assistant("a1", tool("c2", tokens=5), parent="u0", finish="tool-calls"),  # 10
        assistant("a2", words(6), parent="u0"),  # 10
    ]
    # a tail of 30 (a0..a2) fits 35 but starts at an assistant step: no split inside the turn
    assert split_point(history, 35) == 4
    assert split_point(history, 40) == 0


def test_a_user_message_carrying_only_tool_results_is_no_boundary():
    results_only = user("r1", tool("c9", tokens=5))  # 4 + 1 + 5
    history = [user("u0", words(6)), assistant("a0", words(6), parent="u0"), results_only, assistant("a1", words(6))]
    assert not is_split_boundary(results_only)
    assert split_point(history, 20) == 4
    assert split_point(history, 40) == 0


def test_boundaries():
    assert is_split_boundary(user("u", words(1)))
    assert is_split_boundary(user("u"))  # an empty user message still starts a turn
    assert is_split_boundary(compaction("c"))
    assert is_split_boundary(user("u", words(1), tool("c", tokens=1)))
    assert not is_split_boundary(assistant("a", words(1)))


# -- properties ----------------------------------------------------------------------------------------------


@st.composite
def histories(draw):
    history = []
    for index in range(draw(st.integers(0, 15))):
        kind = draw(st.sampled_from(["user", "assistant", "results"]))
        size = draw(st.integers(0, 30))
        if kind == "user":
            history.append(user(f"m{index}", words(size)))
        elif kind == "results":
            history.append(user(f"m{index}", tool(f"c{index}", tokens=size)))
        else:
            history.append(assistant(f"m{index}", words(size), tool(f"c{index}", tokens=size)))
    return history


def tail(history, index):
    return sum(estimate_message_tokens(m) for m in history[index:])


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 400))
def test_split_point_properties(history, budget):
    index = split_point(history, budget)
    boundaries = [i for i, m in enumerate(history) if is_split_boundary(m)]
    fitting = [i for i in boundaries if tail(history, i) <= budget]
    assert index == (min(fitting) if fitting else len(history))


# -- the corpus ----------------------------------------------------------------------------------------------

CORPUS_SPLITS = {  # split_point at budgets 100,000 / 20,000 / 5,000 / 1,000
    "clever-cabin": [0, 6, 15, 18],
    "crisp-garden": [0, 0, 34, 47],
    "curious-harbor": [0, 5, 43, 50],
    "curious-sailor": [0, 30, 35, 40],
    "hidden-river": [0, 13, 36, 45],
    "kind-meadow": [0, 29, 70, 74],
    "nimble-pixel": [0, 0, 0, 8],
    "quick-falcon": [0, 61, 77, 77],
    "quiet-meadow": [0, 0, 20, 20],
    "shiny-nebula": [0, 0, 22, 22],
    "silent-nebula": [0, 17, 17, 17],
    "silent-panda": [0, 64, 64, 64],
}


@pytest.mark.parametrize("path", opencode_files(), ids=lambda p: p.name.split("__")[1])
def test_split_point_on_the_corpus(path):
    history = load_export(path)
    splits = [split_point(history, budget) for budget in (100_000, 20_000, 5_000, 1_000)]
    assert splits == CORPUS_SPLITS[path.name.split("__")[1]]
    for budget, index in zip((100_000, 20_000, 5_000, 1_000), splits):
        if index < len(history):
            assert history[index].info.role == "user" and tail(history, index) <= budget
        older = [i for i in range(index) if is_split_boundary(history[i])]
        assert all(tail(history, i) > budget for i in older)
