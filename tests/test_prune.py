"""prune / plan_prune: seed 004's algorithm, exactly (40,000 protect, 20,000 minimum, 2 turns, `skill`)."""

from __future__ import annotations

import pytest
from history_builders import assistant, compaction, summary, text, tool, user
from corpus_helpers import load_export, opencode_files
from hypothesis import given, settings
from hypothesis import strategies as st

from brutus import pruning as prune_module
from brutus.models import CompactionConfig, MessageWithParts, PruneResult, ToolPart
from brutus.pruning import PruneCandidate, PrunePlan, plan_prune, prune
from brutus.tokens import estimate_tokens

NOW = 1_750_000_000_000


def old_turn(*parts, n="0"):
    """A user turn whose assistant answer holds ``parts``, followed by two protected turns."""
    return [user(f"u{n}", text("old")), assistant(f"a{n}", *parts, parent=f"u{n}")]


def protected_turns():
    return [
        user("u8", text("recent")),
        assistant("a8", tool("recent8", tokens=90_000), parent="u8"),
        user("u9", text("current")),
        assistant("a9", tool("recent9", tokens=90_000), parent="u9"),
    ]


def unpruned(total, prunable=0):
    """Nothing pruned under the default thresholds: ``total`` scanned, ``prunable`` beyond the protect window."""
    return PruneResult(pruned=0, total=total, parts=[], prunable=prunable, protect=40_000, minimum=20_000)


def compacted_ids(history):
    return [p.call_id for m in history for p in m.parts if isinstance(p, ToolPart) and p.state.time.compacted]


# -- the seed's unit test, ported -------------------------------------------------------------------------


def test_seed_prune_protects_recent_content():
    history = [
        user("1"),
        assistant("2", tool("read1", name="read", output="x" * 10_000)),  # 2,500 tokens
        user("3"),  # turn 1
        user("4"),  # turn 0 (current)
    ]
    result = prune(history, now=NOW)
    assert result == unpruned(2_500)
    assert compacted_ids(history) == []


def test_defaults_are_the_seeds():
    config = CompactionConfig()
    assert (config.prune, config.prune_protect, config.prune_minimum) == (True, 40_000, 20_000)
    assert (config.protected_tools, config.protected_turns) == (("skill",), 2)


# -- protect / minimum boundaries -----------------------------------------------------------------------


def test_exactly_40000_scanned_is_all_protected():
    history = old_turn(tool("c", tokens=40_000)) + protected_turns()
    assert prune(history, now=NOW) == unpruned(40_000)
    assert compacted_ids(history) == []


def test_40001_scanned_prunes_the_part_that_crosses_the_line_whole():
    history = old_turn(tool("c", tokens=40_001)) + protected_turns()
    result = prune(history, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (40_001, 40_001, ["c"])
    assert compacted_ids(history) == ["c"]


def test_exactly_20000_pruned_is_not_enough_to_commit():
    history = old_turn(tool("b", tokens=20_000), tool("c", tokens=40_000)) + protected_turns()
    assert prune(history, now=NOW) == unpruned(60_000, prunable=20_000)
    assert compacted_ids(history) == []


def test_20001_pruned_commits():
    history = old_turn(tool("b", tokens=20_001), tool("c", tokens=40_000)) + protected_turns()
    result = prune(history, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (20_001, 60_001, ["b"])
    assert compacted_ids(history) == ["b"]


def test_parts_are_scanned_newest_first_and_listed_in_that_order():
    history = (
        old_turn(tool("a1", tokens=15_000), tool("a2", tokens=6_000), n="1")
        + old_turn(tool("b1", tokens=10_000), tool("b2", tokens=39_999), tool("b3", tokens=1), n="2")
        + protected_turns()
    )
    # newest first: b3 (1) b2 (39,999) -> 40,000 protected; b1, a2, a1 pruned: 31,000
    result = prune(history, now=NOW)
    assert [p.call_id for p in result.parts] == ["b1", "a2", "a1"]
    assert (result.pruned, result.total) == (31_000, 71_000)
    assert compacted_ids(history) == ["a1", "a2", "b1"]


def test_marking_sets_now_on_exactly_those_parts_and_keeps_the_output():
    history = old_turn(tool("b", tokens=30_000), tool("c", tokens=40_000)) + protected_turns()
    result = prune(history, now=NOW)
    part = history[1].parts[0]
    assert result.parts[0] is part  # the caller's object, mutated in place
    assert part.state.time.compacted == NOW
    assert part.state.output == "x" * 120_000
    assert history[1].parts[1].state.time.compacted is None
    assert [p.state.time.compacted for m in history[2:] for p in m.parts if isinstance(p, ToolPart)] == [None, None]


def test_now_defaults_to_the_clock_in_milliseconds(monkeypatch):
    monkeypatch.setattr(prune_module.time, "time", lambda: 1_700_000_000.25)
    history = old_turn(tool("b", tokens=30_000), tool("c", tokens=40_000)) + protected_turns()
    prune(history)
    assert history[1].parts[0].state.time.compacted == 1_700_000_000_250


def test_a_second_prune_stops_at_the_first_compacted_part():
    history = old_turn(tool("a", tokens=5_000), tool("b", tokens=30_000), tool("c", tokens=40_000)) + protected_turns()
    first = prune(history, now=NOW)
    assert [p.call_id for p in first.parts] == ["b", "a"]
    # c (40,000) is counted, then b is compacted: stop entirely, a is never reached
    assert prune(history, now=NOW + 1) == unpruned(40_000)
    assert history[1].parts[0].state.time.compacted == NOW


# -- what is skipped, where it stops ---------------------------------------------------------------------


def test_the_last_two_turns_are_protected():
    history = [
        user("u1", text("one")),
        assistant("a1", tool("t1", tokens=30_000), parent="u1"),
        user("u2", text("two")),
        assistant("a2", tool("t2", tokens=100_000), parent="u2"),
        user("u3", text("three")),
        assistant("a3", tool("t3", tokens=100_000), parent="u3"),
    ]
    # a3 and a2 belong to the last two turns: only t1 is scanned
    assert prune(history, now=NOW) == unpruned(30_000)


@pytest.mark.parametrize(
    ("turns", "expected_total", "expected_parts"),
    [(0, 120_000, ["t3", "t2", "t1"]), (1, 90_000, ["t2", "t1"]), (2, 50_000, ["t1"]), (3, 0, [])],
)
def test_protected_turns_is_configurable(turns, expected_total, expected_parts):
    history = [
        user("u1", text("one")),
        assistant("a1", tool("t1", tokens=50_000), parent="u1"),
        user("u2", text("two")),
        assistant("a2", tool("t2", tokens=40_000), parent="u2"),
        user("u3", text("three")),
        assistant("a3", tool("t3", tokens=30_000), parent="u3"),
    ]
    config = CompactionConfig(protected_turns=turns, prune_protect=10_000, prune_minimum=10_000)
    result = prune(history, config, now=NOW)
    assert result.total == expected_total
    assert [p.call_id for p in result.parts] == expected_parts


def test_protected_tools_are_skipped_and_not_counted():
    history = old_turn(tool("s", name="skill", tokens=100_000), tool("c", tokens=40_000)) + protected_turns()
    assert prune(history, now=NOW) == unpruned(40_000)
    config = CompactionConfig(protected_tools=("bash",))
    result = prune(history, config, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (100_000, 100_000, ["s"])


@pytest.mark.parametrize("status", ["pending", "running", "error"])
def test_tools_that_did_not_complete_are_skipped(status):
    other = tool("e", status=status, error="failed: " + "x" * 400_000 if status == "error" else None)
    history = old_turn(tool("b", tokens=25_000), other, tool("c", tokens=40_000)) + protected_turns()
    result = prune(history, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (25_000, 65_000, ["b"])
    assert other.state.time.compacted is None


def test_stops_at_a_summary_message():
    history = [
        user("u0", text("before")),
        assistant("a0", tool("before", tokens=100_000), parent="u0"),
        compaction("c1"),
        summary("s1", "the summary", parent="c1"),
        *old_turn(tool("b", tokens=10_000), tool("c", tokens=40_000)),
        *protected_turns(),
    ]
    assert prune(history, now=NOW) == unpruned(50_000, prunable=10_000)


def test_a_pending_summary_message_stops_too():
    history = [
        user("u0", text("before")),
        assistant("a0", tool("before", tokens=100_000), parent="u0"),
        compaction("c1"),
        assistant("s1", text("half"), parent="c1", summary=True, finish=None),
        *protected_turns(),
    ]
    assert prune(history, now=NOW) == unpruned(0)


def test_a_summary_inside_the_protected_turns_does_not_stop():
    history = [
        *old_turn(tool("b", tokens=30_000), tool("c", tokens=40_000)),
        user("u8", text("recent")),
        compaction("c1"),  # the last two turns: c1 and its summary
        summary("s1", "sum", parent="c1"),
    ]
    result = prune(history, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (30_000, 70_000, ["b"])


def test_stops_entirely_at_an_already_compacted_part():
    history = (
        old_turn(tool("older", tokens=90_000), n="1")
        + old_turn(tool("a", tokens=30_000), tool("done", tokens=5, compacted=1), tool("c", tokens=40_000), n="2")
        + protected_turns()
    )
    # c counted (40,000); "done" is compacted: a and everything older are never scanned
    assert prune(history, now=NOW) == unpruned(40_000)


def test_compacted_parts_that_are_not_candidates_do_not_stop():
    history = old_turn(
        tool("a", tokens=30_000),
        tool("sk", name="skill", tokens=5, compacted=1),  # protected: skipped before the compacted check
        tool("er", status="error", error="boom", compacted=1),  # not completed: skipped too
        tool("c", tokens=40_000),
    ) + protected_turns()
    result = prune(history, now=NOW)
    assert [p.call_id for p in result.parts] == ["a"]


def test_compacted_zero_is_not_compacted_as_in_the_seed():
    history = old_turn(tool("a", tokens=30_000), tool("z", tokens=1, compacted=0), tool("c", tokens=40_000))
    history += protected_turns()
    result = prune(history, now=NOW)
    # z is counted like any part: it crosses the 40,000 line and is pruned with a
    assert [p.call_id for p in result.parts] == ["z", "a"]
    assert (result.pruned, result.total) == (30_001, 70_001)


def test_prune_disabled_does_nothing():
    history = old_turn(tool("b", tokens=30_000), tool("c", tokens=40_000)) + protected_turns()
    assert prune(history, CompactionConfig(prune=False), now=NOW) == PruneResult(pruned=0, total=0, parts=[])
    assert compacted_ids(history) == []


def test_empty_history_and_histories_without_tools():
    assert prune([], now=NOW) == unpruned(0)
    assert prune([user("u", text("a")), assistant("a", text("b"))] * 3, now=NOW) == unpruned(0)


def test_a_completed_output_that_was_not_loaded_counts_zero():
    history = old_turn(tool("gone", output=None, status="completed"), tool("c", tokens=40_001)) + protected_turns()
    history[1].parts[0].state.output = None
    result = prune(history, now=NOW)
    # c crosses the line; past it every candidate is pruned, the unloaded one too (it adds 0)
    assert [p.call_id for p in result.parts] == ["c", "gone"]
    assert (result.pruned, result.total) == (40_001, 40_001)


def test_estimates_are_utf8_bytes():
    # 4-byte characters: 10,001 emoji are 40,004 bytes = 10,001 tokens
    history = old_turn(tool("e", output="\U0001f600" * 30_001), tool("c", tokens=40_000)) + protected_turns()
    result = prune(history, now=NOW)
    assert (result.pruned, result.total, [p.call_id for p in result.parts]) == (30_001, 70_001, ["e"])


# -- plan_prune: the rows a store feeds it -----------------------------------------------------------------


def test_plan_prune_on_rows_without_any_output_text():
    rows = [
        PruneCandidate(1, "user"),
        PruneCandidate(2, "assistant", part_id="p1", tool="read", status="completed", output_tokens=25_000),
        PruneCandidate(2, "assistant", part_id="p2", tool="bash", status="completed", output_tokens=40_000),
        PruneCandidate(3, "user"),
        PruneCandidate(4, "assistant", part_id="p3", tool="bash", status="completed", output_tokens=99_999),
        PruneCandidate(5, "user"),
    ]
    assert plan_prune(rows) == PrunePlan(pruned=25_000, total=65_000, part_ids=("p1",), prunable=25_000)


def test_plan_prune_message_rows_without_tools_count_turns():
    # without the user rows 3 and 5 there would be no turns: nothing would be scanned at all
    tool_rows = [
        PruneCandidate(2, "assistant", part_id="p1", tool="read", status="completed", output_tokens=25_000),
        PruneCandidate(2, "assistant", part_id="p2", tool="bash", status="completed", output_tokens=40_000),
    ]
    assert plan_prune(tool_rows) == PrunePlan(0, 0, ())
    rows = [*tool_rows, PruneCandidate(3, "user"), PruneCandidate(5, "user")]
    assert plan_prune(rows) == PrunePlan(25_000, 65_000, ("p1",), 25_000)


def test_plan_prune_stops_at_summary_and_compacted_rows():
    rows = [
        PruneCandidate(1, "user"),
        PruneCandidate(2, "assistant", part_id="p0", tool="bash", status="completed", output_tokens=90_000),
        PruneCandidate(3, "assistant", summary=True),
        PruneCandidate(4, "assistant", part_id="p1", tool="bash", status="completed", output_tokens=90_000),
        PruneCandidate(5, "user"),
        PruneCandidate(6, "user"),
    ]
    assert plan_prune(rows) == PrunePlan(90_000, 90_000, ("p1",), 90_000)
    rows[3] = PruneCandidate(
        4, "assistant", part_id="p1", tool="bash", status="completed", output_tokens=9, compacted=True
    )
    assert plan_prune(rows) == PrunePlan(0, 0, ())


def test_plan_prune_disabled():
    rows = [PruneCandidate(1, "assistant", part_id="p", tool="bash", status="completed", output_tokens=10**6)]
    assert plan_prune(rows, CompactionConfig(prune=False, protected_turns=0)) == PrunePlan(0, 0, ())
    assert plan_prune(rows, CompactionConfig(protected_turns=0)) == PrunePlan(10**6, 10**6, ("p",), 10**6)


# -- against a literal port of the seed's Go ----------------------------------------------------------------


def seed_prune(messages: list[MessageWithParts], config: CompactionConfig) -> tuple[int, int, list[ToolPart]]:
    """Seed 004's Prune, line by line (goto commit as a flag), without marking."""
    if not config.prune:
        return 0, 0, []
    total = pruned = turns = 0
    to_prune: list[ToolPart] = []
    done = False
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg.info.role == "user":
            turns += 1
        if turns < config.protected_turns:
            continue
        if msg.info.role == "assistant" and msg.info.summary:
            break
        for j in range(len(msg.parts) - 1, -1, -1):
            part = msg.parts[j]
            if not isinstance(part, ToolPart):
                continue
            if part.state.status != "completed":
                continue
            if part.tool in config.protected_tools:
                continue
            if part.state.time.compacted is not None and part.state.time.compacted > 0:
                done = True
                break
            estimate = estimate_tokens(part.state.output)
            total += estimate
            if total > config.prune_protect:
                pruned += estimate
                to_prune.append(part)
        if done:
            break
    if pruned <= config.prune_minimum:
        return 0, total, []
    return pruned, total, to_prune


@st.composite
def histories(draw):
    messages = []
    for m in range(draw(st.integers(0, 14))):
        role = draw(st.sampled_from(["user", "assistant", "assistant"]))
        parts = []
        for p in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                parts.append(text("t"))
                continue
            status = draw(st.sampled_from(["completed", "completed", "completed", "error", "running", "pending"]))
            parts.append(
                tool(
                    f"c{m}_{p}",
                    name=draw(st.sampled_from(["bash", "read", "skill"])),
                    status=status,
                    output=("y" * draw(st.integers(0, 60))) if status == "completed" else None,
                    error="boom" if status == "error" else None,
                    compacted=draw(st.sampled_from([None, None, None, None, 7])),
                )
            )
        if role == "user":
            messages.append(user(f"m{m}", *parts))
        else:
            messages.append(assistant(f"m{m}", *parts, summary=draw(st.booleans()) and draw(st.booleans())))
    return messages


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 40), st.integers(0, 30), st.integers(0, 3))
def test_prune_matches_the_seed_port(history, protect, minimum, turns):
    config = CompactionConfig(prune_protect=protect, prune_minimum=minimum, protected_turns=turns)
    pruned, total, parts = seed_prune(history, config)
    result = prune(history, config, now=NOW)
    assert (result.pruned, result.total) == (pruned, total)
    assert [id(p) for p in result.parts] == [id(p) for p in parts]
    assert all(p.state.time.compacted == NOW for p in result.parts)


# -- the corpus ----------------------------------------------------------------------------------------------

SMALL = CompactionConfig(prune_protect=4_000, prune_minimum=1_000)


@pytest.mark.parametrize("path", opencode_files(), ids=lambda p: p.name.split("__")[1])
def test_prune_on_the_corpus_matches_the_seed_port(path):
    for config in (CompactionConfig(), SMALL):
        history = load_export(path)
        pruned, total, parts = seed_prune(history, config)
        result = prune(history, config, now=NOW)
        assert (result.pruned, result.total) == (pruned, total)
        assert [id(p) for p in result.parts] == [id(p) for p in parts]
        assert sum(estimate_tokens(p.state.output) for p in result.parts) == result.pruned


def test_prune_on_the_corpus_exact_numbers():
    by_slug = {path.name.split("__")[1]: path for path in opencode_files()}
    # quick-falcon: the largest session; 50,698 tokens of outputs scanned, 10,698 above the 40,000 line
    # (18,838 beyond the protect window: the part crossing the line counts whole, as the rule does; under the
    # 20,000 minimum, so nothing is pruned)
    assert prune(load_export(by_slug["quick-falcon"]), now=NOW) == unpruned(50_698, prunable=18_838)
    # curious-sailor: its summary is inside the two protected turns, so the scan goes on past it and stops
    # at the first part OpenCode itself pruned in that session
    assert prune(load_export(by_slug["curious-sailor"]), now=NOW) == unpruned(39_294)
    history = load_export(by_slug["quick-falcon"])
    result = prune(history, SMALL, now=NOW)
    # parts crossing the line are pruned whole, so pruned is more than total - protect (46,698)
    assert (result.pruned, result.total, len(result.parts)) == (46_814, 50_698, 58)
    assert len(compacted_ids(history)) == 58
