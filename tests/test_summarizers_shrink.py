"""shrink_request: each stage exactly (drop pruned calls, cut long outputs, drop oldest turns, cut long texts),
stopping at the first that fits, never mutating its input."""

from __future__ import annotations

import pytest

from brutus.errors import InvalidInput
from brutus.models import MessageWithParts
from brutus.estimates import estimate_message_tokens
from brutus.render import to_anthropic, validate_anthropic
from brutus.summarizers import SummaryRequest, estimate_request_tokens, request_fits, shrink_request
from brutus.summarizers.prompts import summary_prompt, system_prompt
from brutus.summarizers.shrink import omitted_note
from brutus.summarizers.text import cut_middle
from brutus.tokens import estimate_tokens
from history_builders import assistant, compaction, summary, text, tool, user

CUT = 1_000
MAX = 500


def pruned_call() -> object:
    return tool("p1", name="read", input={"filePath": "src/old.py"}, output="o" * 8_000, compacted=1_700_000_000_000)


def history() -> list[MessageWithParts]:
    return [
        user("u1", text("First, read the old module.")),
        assistant("a1", pruned_call(), tool("b1", name="bash", input={"command": "make"}, output="y" * 20_000),
                  text("Read it."), parent="u1"),
        user("u2", text("Now write the new one.")),
        assistant("a2", tool("w2", name="write", input={"filePath": "src/new.py", "content": "c" * 6_000}, output="ok"),
                  tool("e2", name="bash", input={"command": "pytest"}, status="error", error="E" * 9_000),
                  text("Wrote it."), parent="u2"),
        user("u3", text("Summarize the state.")),
        assistant("a3", text("All done."), parent="u3"),
    ]


def request(history_: list[MessageWithParts] | None = None, **fields: object) -> SummaryRequest:
    return SummaryRequest(history=history() if history_ is None else history_, max_tokens=MAX, **fields)


def needed(request_: SummaryRequest) -> int:
    return estimate_request_tokens(request_) + request_.max_tokens


def without_pruned(history_: list[MessageWithParts]) -> list[MessageWithParts]:
    first = history_[1]
    return [history_[0], first.model_copy(update={"parts": first.parts[1:]}), *history_[2:]]


def cut_tools(history_: list[MessageWithParts]) -> list[MessageWithParts]:
    a1, a2 = history_[1], history_[3]
    bash1 = a1.parts[0]
    write, bash2 = a2.parts[0], a2.parts[1]
    a1 = a1.model_copy(update={"parts": [
        bash1.model_copy(update={"state": bash1.state.model_copy(update={"output": cut_middle("y" * 20_000, CUT)})}),
        a1.parts[1],
    ]})
    a2 = a2.model_copy(update={"parts": [
        write.model_copy(update={"state": write.state.model_copy(
            update={"input": {"filePath": "src/new.py", "content": cut_middle("c" * 6_000, CUT)}})}),
        bash2.model_copy(update={"state": bash2.state.model_copy(update={"error": cut_middle("E" * 9_000, CUT)})}),
        a2.parts[2],
    ]})
    return [history_[0], a1, history_[2], a2, *history_[4:]]


# -- the estimate ----------------------------------------------------------------------------------------------


def test_estimate_is_the_prompts_plus_the_messages() -> None:
    r = request(instructions="be brief", previous_summary="before")
    expected = (estimate_tokens(system_prompt("compaction")) + estimate_tokens(summary_prompt(r))
                + sum(estimate_message_tokens(m) for m in r.history))
    assert estimate_request_tokens(r) == expected


def test_request_fits_at_the_exact_boundary_and_zero_is_unlimited() -> None:
    r = request()
    assert request_fits(r, needed(r))
    assert not request_fits(r, needed(r) - 1)
    assert request_fits(r, 0)


# -- the stages, one by one -----------------------------------------------------------------------------------


def test_a_request_that_fits_comes_back_equal_as_a_new_object() -> None:
    r = request()
    got = shrink_request(r, needed(r), cut_chars=CUT)
    assert got == r and got is not r and got.history is not r.history
    assert shrink_request(r, 0) == r


def test_stage_1_drops_pruned_calls_only() -> None:
    r = request()
    stage1 = r.model_copy(update={"history": without_pruned(r.history)})
    assert needed(stage1) < needed(r)
    got = shrink_request(r, needed(stage1), cut_chars=CUT)
    assert got.history == stage1.history
    assert [p.call_id for p in got.history[1].parts if p.type == "tool"] == ["b1"]
    assert got.history[3] is r.history[3]  # untouched messages are shared, not copied


def test_stage_2_cuts_long_outputs_errors_and_inputs() -> None:
    r = request()
    stage2 = r.model_copy(update={"history": cut_tools(without_pruned(r.history))})
    got = shrink_request(r, needed(stage2), cut_chars=CUT)
    assert got.history == stage2.history
    output = got.history[1].parts[0].state.output
    assert output.startswith("y" * 666 + "\n[… 19000 characters cut …]\n") and output.endswith("y" * 334)
    assert shrink_request(r, needed(stage2) - 1, cut_chars=CUT).history != stage2.history  # one token less: stage 3


def test_stage_3_drops_the_fewest_oldest_turns_behind_a_note() -> None:
    r = request()
    stage2 = cut_tools(without_pruned(r.history))
    got = shrink_request(r, needed(r.model_copy(update={"history": stage2})) - 1, cut_chars=CUT)
    note, *rest = got.history
    assert rest == stage2[2:]  # turn 1 (two messages) dropped, turns 2 and 3 kept
    assert note.info.role == "user" and note.info.synthetic and note.info.id == "u1~omitted"
    assert [p.text for p in note.parts] == [omitted_note(2)] == ["[2 earlier messages left out to fit the summarizer's context]"]
    assert request_fits(got, needed(got))

    smaller = shrink_request(r, needed(got) - 1, cut_chars=CUT)
    assert smaller.history[1:] == stage2[4:]  # two turns dropped
    assert smaller.history[0].parts[0].text == omitted_note(4)
    validate_anthropic(to_anthropic(smaller.history))  # the note merges into the kept user turn


def test_stage_4_cuts_long_texts_when_one_turn_is_left() -> None:
    huge = [user("u1", text("old")), assistant("a1", text("ok"), parent="u1"),
            user("u2", text("log: " + "L" * 50_000)), assistant("a2", text("R" * 30_000), parent="u2")]
    r = request(huge)
    got = shrink_request(r, 3_000, cut_chars=CUT)
    assert [m.info.id for m in got.history] == ["u1~omitted", "u2", "a2"]
    assert got.history[1].parts[0].text == cut_middle("log: " + "L" * 50_000, CUT)
    assert got.history[2].parts[0].text == cut_middle("R" * 30_000, CUT)
    assert request_fits(got, 3_000)


def test_when_nothing_is_enough_the_last_stage_comes_back_and_does_not_fit() -> None:
    r = request(instructions="x" * 40_000)
    got = shrink_request(r, 2_000, cut_chars=CUT)
    assert not request_fits(got, 2_000)
    assert got.history[0].info.id == "u1~omitted" and got.history[1:] == cut_tools(without_pruned(r.history))[4:]


def test_a_dropped_compaction_summary_becomes_the_previous_summary() -> None:
    rolled = [compaction("c1"), summary("s1", "We set up CI and the parser.", parent="c1"), *history()]
    r = request(rolled)
    context = needed(r.model_copy(update={"history": rolled[:2] + cut_tools(without_pruned(rolled[2:]))})) - 1
    got = shrink_request(r, context, cut_chars=CUT)
    assert got.history[0].info.id == "c1~omitted"
    assert got.previous_summary == "We set up CI and the parser."
    assert "We set up CI and the parser." in summary_prompt(got)
    assert "We set up CI and the parser." not in summary_prompt(r)  # there it was still in the history
    kept = shrink_request(request(rolled, previous_summary="given"), context, cut_chars=CUT)
    assert kept.previous_summary == "given"


def test_the_input_is_never_mutated() -> None:
    r = request(instructions="x")
    before = r.model_dump()
    for context in (0, needed(r), 9_000, 3_000, 100):
        shrink_request(r, context, cut_chars=CUT)
    assert r.model_dump() == before


def test_cut_chars_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="cut_chars"):
        shrink_request(request(), 1_000, cut_chars=0)
