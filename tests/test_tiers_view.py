"""tier_view: each covered range replaced by its newest covering summary, where the range was; hierarchical
substitution, barriers, composition with filter_compacted and prune, and valid renders on random histories."""

from __future__ import annotations

import copy

from history_builders import assistant, compaction, summary, text, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tier_sessions import tier_summary

from brutus.history import filter_compacted
from brutus.models import CompactionPart, ReasoningPart, StepFinishPart, ToolPart
from brutus.render import CLEARED_TOOL_OUTPUT, anthropic_problems, to_anthropic
from brutus.split import is_split_boundary
from brutus.summarizers import ExtractiveSummarizer
from brutus.tiers import TierConfig, apply_tiers, tier_metadata, tier_view
from brutus.tiers.view import span_of, view_tokens
from brutus.tiers.view import barrier_ids, is_barrier


def ids(view):
    return [m.info.id for m in view]


def session():
    """Two turns with tool calls, then a live one."""
    return [
        user("u1", text("read the config")),
        assistant("a1", text("reading"), tool("c1", name="read", output="x" * 400), parent="u1", finish="tool-calls"),
        assistant("a2", text("it is yaml"), parent="u1"),
        user("u2", text("add validation")),
        assistant("a3", text("editing"), tool("c3", name="edit", output="ok"), parent="u2", finish="tool-calls"),
        assistant("a4", text("done"), parent="u2"),
        user("u3", text("now the tests")),
    ]


def test_without_tier_summaries_the_view_is_the_history():
    history = session()
    view = tier_view(history)
    assert view == history and all(a is b for a, b in zip(view, history))


def test_a_summary_takes_the_place_of_its_range_wherever_it_was_written():
    history = session() + [tier_summary("s1", "tool_call", "a1", "a2")]
    before = copy.deepcopy(history)
    assert ids(tier_view(history)) == ["u1", "s1", "u2", "a3", "a4", "u3"]
    assert history == before  # nothing mutated, originals kept


def test_a_goal_batch_wins_over_the_blocks_it_covers():
    history = session() + [
        tier_summary("s1", "tool_call", "a1", "a2"),
        tier_summary("s2", "threshold", "a3", "a4"),
        tier_summary("g", "goal_batch", "u1", "a4", turn_count=2),
    ]
    assert ids(tier_view(history)) == ["g", "u3"]
    assert span_of(tier_view(history)[0]) == ("u1", 0, "a4", 0)


def test_older_summaries_outside_the_newest_range_still_apply():
    history = session() + [tier_summary("s2", "threshold", "a3", "a4"), tier_summary("s1", "tool_call", "a1", "a2")]
    assert ids(tier_view(history)) == ["u1", "s1", "u2", "s2", "u3"]


def test_a_partial_overlap_leaves_the_older_summary_out():
    history = session() + [tier_summary("old", "tool_call", "a1", "a3"), tier_summary("new", "threshold", "a2", "a4")]
    assert ids(tier_view(history)) == ["u1", "a1", "new", "u3"]


def test_summaries_that_cannot_apply_are_hidden_and_their_range_stays():
    history = session()
    cases = [
        tier_summary("gone", "tool_call", "behind_boundary", "a2"),
        tier_summary("reversed", "tool_call", "a2", "a1"),
        tier_summary("pending", "tool_call", "a1", "a2", finish=None),
        tier_summary("bad", "tool_call", "a1", "a2", turn_count="many"),
    ]
    errored = tier_summary("errored", "tool_call", "a1", "a2")
    errored.info.error = {"name": "APIError"}
    assert tier_metadata(cases[-1]) is None
    for bad in [*cases, errored]:
        assert ids(tier_view(history + [bad])) == ids(history)


def test_a_summary_written_before_its_range_is_not_applied():
    history = session()
    history.insert(0, tier_summary("early", "tool_call", "a1", "a2"))
    assert ids(tier_view(history)) == ids(history[1:])


def test_ranges_never_hold_a_compaction_message_or_a_prefix_summary():
    history = session() + [compaction("c"), summary("cs", "all so far", parent="c"), user("u4", text("go on"))]
    for frm, to in [("u3", "c"), ("c", "cs"), ("cs", "u4"), ("a4", "u4")]:
        assert ids(tier_view(history + [tier_summary("s", "goal_batch", frm, to)])) == ids(history)
    assert ids(tier_view(history + [tier_summary("s", "tool_call", "a1", "a2")]))[:2] == ["u1", "s"]


def test_a_kept_tail_keeps_its_start_so_the_compaction_pair_still_renders_first():
    history = session()
    history += [compaction("c", tail_start_id="u2"), summary("cs", "summary of u1", parent="c"), user("u4", text("go"))]
    view = filter_compacted(history)
    assert ids(view)[0] == "u2"
    assert ids(tier_view(view + [tier_summary("g", "goal_batch", "u2", "a4")])) == ids(view)  # would drop the tail start
    tiered = tier_view(view + [tier_summary("s", "threshold", "a3", "a4")])
    assert ids(tiered) == ["u2", "s", "u3", "c", "cs", "u4"]
    body = to_anthropic(tiered)
    assert anthropic_problems(body) == []
    assert body["messages"][0]["content"][0]["text"] == "What did we do so far?"
    assert barrier_ids(view) == {"u2"} and is_barrier(view[0], barrier_ids(view))


def test_it_composes_with_filter_compacted():
    history = session() + [tier_summary("s_old", "tool_call", "a1", "a2")]
    history += [compaction("c"), summary("cs", "everything", parent="c"), user("u4", text("next"))]
    history += [assistant("a5", text("x"), tool("c5", output="y" * 100), parent="u4"), assistant("a6", text("ok"), parent="u4")]
    history += [tier_summary("s_new", "tool_call", "a5", "a5")]
    assert ids(tier_view(filter_compacted(history))) == ["c", "cs", "u4", "s_new", "a6"]


def test_pruned_outputs_stay_pruned_in_the_messages_kept():
    history = session()
    history[4].parts[1].state.time.compacted = 5
    view = tier_view(history + [tier_summary("s", "tool_call", "a1", "a2")])
    results = [b for m in to_anthropic(view)["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == [CLEARED_TOOL_OUTPUT]


def test_a_range_ending_on_a_tool_call_takes_its_result_along():
    history = session() + [tier_summary("s", "tool_call", "a1", "a1")]
    body = to_anthropic(tier_view(history))
    assert anthropic_problems(body) == []
    blocks = [b["type"] for m in body["messages"] for b in m["content"]]
    assert blocks.count("tool_use") == blocks.count("tool_result") == 1  # only a3's call is left


def test_view_tokens_sums_message_estimates():
    history = session()
    summarized = tier_view(history + [tier_summary("s", "tool_call", "a1", "a2", text="[SUMMARIZED]\nshort")])
    assert view_tokens(summarized) < view_tokens(history)


# -- random histories ----------------------------------------------------------------------------------------------

_texts = st.sampled_from(["", " ", "hello", "trailing \n", "日本語", "lone \ud800", "x" * 300])


@st.composite
def _part(draw, role):
    kind = draw(st.sampled_from(["text", "text", "tool", "tool", "reasoning", "step"] if role == "assistant"
                                else ["text", "text", "tool"]))
    if kind == "text":
        return text(draw(_texts), ignored=draw(st.integers(0, 5)) == 0)
    if kind == "reasoning":
        return ReasoningPart(text=draw(_texts))
    if kind == "step":
        return StepFinishPart(reason="stop")
    status = draw(st.sampled_from(["completed", "completed", "error", "running", "pending"]))
    return tool(
        draw(st.sampled_from(["c1", "c2", "fn.x:1", ""])),
        status=status,
        output=draw(_texts) if status == "completed" else None,
        error="failed" if status == "error" else None,
        compacted=draw(st.sampled_from([None, None, 5])) if status == "completed" else None,
    )


@st.composite
def histories(draw):
    """Turns, prefix compactions (often with a tail), and tier summaries over random ranges of whole messages."""
    history = []
    for index in range(draw(st.integers(0, 16))):
        mid = f"m{index}"
        originals = [m for m in history if not (m.info.metadata or {}).get("summary_type")]
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "compaction", "tier"]))
        if kind == "compaction":
            tail = draw(st.sampled_from([None] + [m.info.id for m in originals]))
            history += [compaction(mid, tail_start_id=tail), summary(f"{mid}s", draw(_texts), parent=mid)]
        elif kind == "tier" and originals:
            start = draw(st.integers(0, len(originals) - 1))
            end = draw(st.integers(start, len(originals) - 1))
            kind_ = draw(st.sampled_from(["tool_call", "threshold", "goal_batch"]))
            history.append(tier_summary(mid, kind_, originals[start].info.id, originals[end].info.id, text=draw(_texts) or None))
        elif kind == "user":
            history.append(user(mid, *draw(st.lists(_part("user"), max_size=2))))
        elif kind == "assistant":
            error = draw(st.sampled_from([None, None, None, {"name": "APIError"}]))
            finish = draw(st.sampled_from(["stop", "tool-calls", None]))
            history.append(assistant(mid, *draw(st.lists(_part("assistant"), max_size=3)), error=error, finish=finish))
    return history


def _tool_parts(view):
    return sum(
        isinstance(p, ToolPart) for m in view if m.info.role == "assistant" and not m.info.error for p in m.parts
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_random_tier_views_render_valid_bodies_and_keep_order(history):
    for base in (history, filter_compacted(history)):
        view = tier_view(base)
        body = to_anthropic(view)
        assert anthropic_problems(body, allow_empty=True) == []
        uses = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
        assert len(uses) == _tool_parts(view)
        originals = [m for m in base if not (m.info.metadata or {}).get("summary_type")]
        kept = [m for m in view if m in originals]
        assert [originals.index(m) for m in kept] == sorted(originals.index(m) for m in kept)
        assert len(set(map(id, view))) == len(view)
        compaction_messages = [m for m in base if any(isinstance(p, CompactionPart) for p in m.parts) or m.info.summary]
        assert all(m in view for m in compaction_messages)


@st.composite
def sessions(draw):
    """Plausible sessions: turns of a user message, tool steps and a reply, sometimes a prefix compaction."""
    history = []
    for turn in range(draw(st.integers(1, 14))):
        if draw(st.integers(0, 7)) == 0 and history:
            tail = draw(st.sampled_from([None] + [m.info.id for m in history if m.info.role == "user"]))
            history += [compaction(f"c{turn}", tail_start_id=tail), summary(f"c{turn}s", "summary", parent=f"c{turn}")]
        history.append(user(f"u{turn}", text(draw(st.sampled_from(["go", "now this", "x" * 200])))))
        for step in range(draw(st.integers(0, 3))):
            status = draw(st.sampled_from(["completed", "completed", "error", "running"]))
            history.append(assistant(
                f"a{turn}_{step}", text("step"),
                tool(f"t{turn}_{step}", status=status, tokens=draw(st.sampled_from([10, 300, 2_000])) if status == "completed" else None,
                     error="boom" if status == "error" else None),
                parent=f"u{turn}", finish="tool-calls"))
        if draw(st.booleans()):
            history.append(assistant(f"a{turn}_end", text("done"), parent=f"u{turn}"))
    return history


_small = st.builds(
    TierConfig,
    tool_call_recent_messages=st.integers(0, 6),
    tool_call_min_tokens=st.sampled_from([0, 500]),
    threshold_tokens=st.sampled_from([0, 2_000, 10**9]),
    threshold_recent_messages=st.integers(0, 6),
    min_turns_old_threshold=st.integers(0, 6),
    min_turns_to_compact=st.integers(1, 3),
    max_turns_per_batch=st.integers(3, 4),
    max_batches_per_run=st.integers(1, 3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), _small, st.integers(1, 4))
def test_runs_of_the_tiers_keep_turns_whole_and_renders_valid(history, config, runs):
    summarizer = ExtractiveSummarizer()
    for _ in range(runs):
        history, _ = apply_tiers(filter_compacted(history), summarizer, config, clock=lambda: 1_800_000_000_000)
        view = tier_view(history)
        assert anthropic_problems(to_anthropic(view), allow_empty=True) == []
    originals = [m for m in history if tier_metadata(m) is None]
    where = {m.info.id: index for index, m in enumerate(originals)}
    for summary_message in history:
        metadata = tier_metadata(summary_message)
        if metadata is None:
            continue
        start, end = where[metadata.covers.from_id], where[metadata.covers.to_id]
        covered = originals[start : end + 1]
        if metadata.summary_type == "goal_batch":  # whole turns: from a user message to just before the next one
            assert is_split_boundary(covered[0])
            assert end + 1 == len(originals) or is_split_boundary(originals[end + 1])
        else:  # [SUMMARIZED] blocks cover assistant messages only
            assert all(m.info.role == "assistant" for m in covered)
