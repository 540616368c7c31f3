"""to_anthropic: histories rendered as Anthropic Messages API bodies, and the validator every body goes through."""

from __future__ import annotations

import json

import pytest
from corpus_helpers import corpus_file, load_export, opencode_files
from history_builders import assistant, compaction, summary, text, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brutus.errors import InvalidInput
from brutus.history import filter_compacted
from brutus.models import (
    AgentPart,
    CompactionConfig,
    CompactionPart,
    FilePart,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    ToolPart,
)
from brutus.pruning import prune
from brutus.render import (
    CLEARED_TOOL_OUTPUT,
    COMPACTION_PROMPT,
    INTERRUPTED_TOOL_OUTPUT,
    PLACEHOLDER_USER_TEXT,
    anthropic_problems,
    to_anthropic,
    validate_anthropic,
)


def T(value):
    return {"type": "text", "text": value}


def use(id, name="bash", input=None):
    return {"type": "tool_use", "id": id, "name": name, "input": input or {}}


def res(id, content, error=False):
    block = {"type": "tool_result", "tool_use_id": id, "content": content}
    if error:
        block["is_error"] = True
    return block


def U(*blocks):
    return {"role": "user", "content": list(blocks)}


def A(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def render(history, **kwargs):
    body = to_anthropic(history, **kwargs)
    validate_anthropic(body)
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # what the HTTP client will send
    return body


# -- plain turns, system --------------------------------------------------------------------------------------


def test_a_plain_exchange():
    history = [user("u1", text("hi")), assistant("a1", text("hello"), parent="u1"), user("u2", text("bye"))]
    assert render(history) == {"messages": [U(T("hi")), A(T("hello")), U(T("bye"))]}


def test_system_is_included_when_given_and_omitted_otherwise():
    history = [user("u1", text("hi"))]
    assert render(history, system="be brief") == {"system": "be brief", "messages": [U(T("hi"))]}
    assert "system" not in render(history)
    assert "system" not in render(history, system="")


def test_empty_history_renders_no_messages():
    assert to_anthropic([]) == {"messages": []}
    assert anthropic_problems(to_anthropic([])) == ["messages must not be empty"]
    validate_anthropic(to_anthropic([]), allow_empty=True)


# -- tools ------------------------------------------------------------------------------------------------------


def test_tool_results_go_first_in_the_next_user_message():
    history = [
        user("u1", text("list files")),
        assistant("a1", text("sure"), tool("call_1", input={"command": "ls"}, output="a.py\n"), parent="u1"),
        user("u2", text("thanks")),
    ]
    assert render(history)["messages"] == [
        U(T("list files")),
        A(T("sure"), use("call_1", input={"command": "ls"})),
        U(res("call_1", "a.py\n"), T("thanks")),
    ]


def test_a_trailing_tool_call_gets_a_user_message_of_its_own():
    history = [user("u1", text("go")), assistant("a1", tool("c1", output="done"), parent="u1")]
    assert render(history)["messages"] == [U(T("go")), A(use("c1")), U(res("c1", "done"))]


def test_each_assistant_step_is_followed_by_its_results():
    history = [
        user("u1", text("fix it")),
        assistant("a1", tool("c1", name="read", output="code"), parent="u1", finish="tool-calls"),
        assistant("a2", text("patching"), tool("c2", name="edit", output="ok"), parent="u1", finish="tool-calls"),
        assistant("a3", text("fixed"), parent="u1"),
    ]
    assert render(history)["messages"] == [
        U(T("fix it")),
        A(use("c1", "read")),
        U(res("c1", "code")),
        A(T("patching"), use("c2", "edit")),
        U(res("c2", "ok")),
        A(T("fixed")),
    ]


def test_parallel_calls_in_one_message_get_all_their_results_in_order():
    history = [
        user("u1", text("look")),
        assistant("a1", tool("c1", output="1"), tool("c2", status="error", error="nope"), tool("c3", output="3")),
    ]
    assert render(history)["messages"][2] == U(res("c1", "1"), res("c2", "nope", True), res("c3", "3"))


def test_a_pruned_output_is_cleared_but_the_call_and_input_stay():
    history = [
        user("u1", text("read")),
        assistant("a1", tool("c1", name="read", input={"path": "big.txt"}, output="x" * 10_000, compacted=123)),
    ]
    assert render(history)["messages"] == [
        U(T("read")),
        A(use("c1", "read", {"path": "big.txt"})),
        U(res("c1", "[Old tool result content cleared]")),
    ]
    assert CLEARED_TOOL_OUTPUT == "[Old tool result content cleared]"


@pytest.mark.parametrize("status", ["pending", "running"])
def test_an_unfinished_tool_is_an_interrupted_error(status):
    history = [user("u1", text("run")), assistant("a1", tool("c1", status=status, input={"command": "sleep 9"}))]
    assert render(history)["messages"][1:] == [
        A(use("c1", input={"command": "sleep 9"})),
        U(res("c1", "[Tool execution was interrupted]", True)),
    ]
    assert INTERRUPTED_TOOL_OUTPUT == "[Tool execution was interrupted]"


def test_error_results_and_their_fallbacks():
    history = [
        user("u1", text("run")),
        assistant(
            "a1",
            tool("c1", status="error", error="permission denied"),
            tool("c2", status="error", error="  "),
            tool("c3", output=""),
            tool("c4", output=" \n"),
            tool("c5", output="kept  "),
            tool("c6", output="lost"),
        ),
    ]
    history[1].parts[5].state.output = None  # completed, but the output was lost
    assert render(history)["messages"][2] == U(
        res("c1", "permission denied", True),
        res("c2", "[Tool execution failed]", True),
        res("c3", "(no output)"),
        res("c4", "(no output)"),
        res("c5", "kept  "),
        res("c6", "[Tool execution was interrupted]", True),
    )


def test_tool_use_ids_are_made_valid_and_unique():
    history = [
        user("u1", text("go")),
        assistant("a1", tool("functions.bash:0", output="a"), tool("call 1", output="b"), tool("call_1", output="c")),
        user("u2", text("again")),
        assistant("a2", tool("functions.bash:0", output="d"), tool("", id="prt_9", output="e"), tool("", output="f")),
    ]
    history[3].parts[2].id = None  # neither a call id nor a part id
    messages = render(history)["messages"]
    assert [b["id"] for b in messages[1]["content"]] == ["functions_bash_0", "call_1", "call_1_2"]
    assert [b["tool_use_id"] for b in messages[2]["content"][:3]] == ["functions_bash_0", "call_1", "call_1_2"]
    assert [b["id"] for b in messages[3]["content"]] == ["functions_bash_0_2", "prt_9", "toolu"]


def test_the_rendered_input_is_a_copy():
    part = tool("c1", input={"path": "a"}, output="x")
    body = render([user("u1", text("go")), assistant("a1", part)])
    body["messages"][1]["content"][0]["input"]["path"] = "changed"
    assert part.state.input == {"path": "a"}


# -- compaction --------------------------------------------------------------------------------------------------


def test_the_compaction_pair_renders_as_question_and_answer():
    history = [compaction("c1"), summary("s1", "We fixed the parser.", parent="c1"), user("u2", text("next"))]
    assert render(history)["messages"] == [
        U(T("What did we do so far?")),
        A(T("We fixed the parser.")),
        U(T("next")),
    ]
    assert COMPACTION_PROMPT == "What did we do so far?"


def test_with_a_tail_the_compaction_pair_comes_first():
    history = [
        user("u1", text("one")),
        assistant("a1", text("did one"), parent="u1"),
        user("u2", text("two")),
        assistant("a2", tool("c2", output="out2"), parent="u2", finish="tool-calls"),
        assistant("a2b", text("did two"), parent="u2"),
        compaction("c1", tail_start_id="u2"),
        summary("s1", "Summary of one.", parent="c1"),
        user("u3", text("three")),
    ]
    view = filter_compacted(history)
    assert [m.info.id for m in view] == ["u2", "a2", "a2b", "c1", "s1", "u3"]
    expected = [
        U(T("What did we do so far?")),
        A(T("Summary of one.")),
        U(T("two")),
        A(use("c2")),
        U(res("c2", "out2")),
        A(T("did two")),
        U(T("three")),
    ]
    assert render(view)["messages"] == expected
    # the full history renders the same order after the part before the tail
    assert render(history)["messages"] == [U(T("one")), A(T("did one"))] + expected


def test_a_pending_compaction_is_rendered_in_place():
    history = [user("u1", text("one")), user("u2", text("two")), compaction("c1", tail_start_id="u2")]
    assert render(history)["messages"] == [U(T("one"), T("two"), T("What did we do so far?"))]


def test_two_compactions_with_nested_tails():
    history = [
        user("a", text("a")),
        user("t1a", text("t1a")),
        user("t1b", text("t1b")),
        compaction("c1", tail_start_id="t1a"),
        summary("s1", "S1", parent="c1"),
        user("b", text("b")),
        compaction("c2", tail_start_id="t1b"),
        summary("s2", "S2", parent="c2"),
        user("c", text("c")),
    ]
    # c1 first: a, C1, S1, t1a, t1b, b, C2, S2, c; then c2's tail (t1b, b) moves after S2
    assert render(history)["messages"] == [
        U(T("a"), T("What did we do so far?")),
        A(T("S1")),
        U(T("t1a"), T("What did we do so far?")),
        A(T("S2")),
        U(T("t1b"), T("b"), T("c")),
    ]


# -- shape ----------------------------------------------------------------------------------------------------------


def test_consecutive_same_role_messages_merge():
    history = [
        user("u1", text("one")),
        user("u2", text("two")),
        assistant("a1", text("x")),
        assistant("a2", text("y")),
    ]
    assert render(history)["messages"] == [U(T("one"), T("two")), A(T("x"), T("y"))]


def test_a_history_starting_with_the_assistant_gets_a_placeholder_user_first():
    history = [assistant("a0", text("Welcome back.")), user("u1", text("hi"))]
    assert render(history)["messages"] == [U(T("(continued)")), A(T("Welcome back.")), U(T("hi"))]
    assert PLACEHOLDER_USER_TEXT == "(continued)"


def test_empty_and_blank_texts_and_empty_messages_disappear():
    history = [
        user("u1", text("one"), text(""), text(" \n\t")),
        assistant("a1", text("   "), StepStartPart(), StepFinishPart(reason="stop")),  # renders to nothing
        user("u2", text("two")),
        assistant("a2", text("answer")),
    ]
    assert render(history)["messages"] == [U(T("one"), T("two")), A(T("answer"))]


def test_ignored_text_is_skipped_and_synthetic_kept():
    history = [
        user("u1", text("shown"), text("hidden", ignored=True), text("Called the Read tool", synthetic=True)),
        assistant("a1", text("ok"), text("secret", ignored=True)),
    ]
    assert render(history)["messages"] == [U(T("shown"), T("Called the Read tool")), A(T("ok"))]


def test_parts_that_are_never_sent():
    history = [
        user("u1", text("go"), AgentPart(name="build"), SnapshotPart(snapshot="s"), PatchPart(hash="h")),
        assistant(
            "a1",
            StepStartPart(snapshot="s"),
            ReasoningPart(text="thinking hard", metadata={"anthropic": {"signature": "forged"}}),
            text("done"),
            RetryPart(attempt=2, error="overloaded"),
            StepFinishPart(reason="stop"),
            CompactionPart(),  # a compaction part only means something on a user message
        ),
    ]
    assert render(history)["messages"] == [U(T("go")), A(T("done"))]


def test_file_and_subtask_parts_are_text():
    history = [
        user(
            "u1",
            text("look at these"),
            FilePart(mime="text/x-python", filename="a.py", url="file:///repo/a.py"),
            FilePart(mime="image/png", url="https://example.com/shot.png"),
            FilePart(mime="image/png", url="data:image/png;base64,AAAA"),
            SubtaskPart(prompt="find the tests", description="explore tests", agent="explore"),
            SubtaskPart(prompt=" ", description="empty", agent="general"),
        ),
    ]
    assert render(history)["messages"] == [
        U(
            T("look at these"),
            T("[file: a.py (text/x-python)]"),
            T("[file: https://example.com/shot.png (image/png)]"),
            T("[file: unnamed (image/png)]"),
            T("[subtask explore: explore tests]\nfind the tests"),
            T("[subtask general: empty]"),
        )
    ]


def test_the_final_assistant_text_loses_trailing_whitespace_only_at_the_end():
    history = [
        user("u1", text("a")),
        assistant("a1", text("middle  \n")),
        user("u2", text("b")),
        assistant("a2", text("end \n\n")),
    ]
    assert render(history)["messages"] == [U(T("a")), A(T("middle  \n")), U(T("b")), A(T("end"))]


def test_failed_assistant_messages_are_left_out_as_opencode_does():
    history = [
        user("u1", text("one")),
        assistant("a1", text("half an answer"), tool("c1", output="x"), error={"name": "APIError", "data": {}}),
        user("u2", text("two")),
        assistant("a2", StepStartPart(), ReasoningPart(text="hmm"), error={"name": "MessageAbortedError"}),
        user("u3", text("three")),
        assistant("a3", text("partial"), tool("c3", status="running"), error={"name": "MessageAbortedError"}),
    ]
    assert render(history)["messages"] == [
        U(T("one"), T("two"), T("three")),
        A(T("partial"), use("c3")),
        U(res("c3", "[Tool execution was interrupted]", True)),
    ]


def test_lone_surrogates_are_replaced_so_the_body_encodes():
    history = [
        user("u1", text("bad \udc80 text")),
        assistant("a1", tool("c1", input={"path": "f\ud800", "list": ["\udfff"]}, output="out \ud83d")),
    ]
    messages = render(history)["messages"]
    assert messages == [
        U(T("bad \ufffd text")),
        A(use("c1", input={"path": "f\ufffd", "list": ["\ufffd"]})),
        U(res("c1", "out \ufffd")),
    ]
    assert history[0].parts[0].text == "bad \udc80 text"  # the stored text is untouched


# -- the validator ------------------------------------------------------------------------------------------------


def test_validator_accepts_a_good_body_and_raises_listing_problems():
    validate_anthropic({"system": "s", "messages": [U(T("hi")), A(use("x")), U(res("x", "ok"))]})
    with pytest.raises(InvalidInput, match="the first message must be a user message"):
        validate_anthropic({"messages": [A(T("hi"))]})


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([U(T("a")), U(T("b"))], "messages.1: roles must alternate (two user messages in a row)"),
        ([{"role": "system", "content": [T("a")]}], "messages.0: role must be 'user' or 'assistant', not 'system'"),
        ([U()], "messages.0: content must be a non-empty list of blocks"),
        ([{"role": "user", "content": "hi"}], "messages.0: content must be a non-empty list of blocks"),
        ([U(T(" "))], "messages.0.content.0: text blocks must contain non-whitespace text"),
        ([U(T("a")), A(use("x"))],
         "messages.1: tool_use 'x' needs exactly one tool_result in the next message (found 0)"),
        ([U(T("a")), A(use("x")), U(res("x", "1"), res("x", "2"))],
         "messages.1: tool_use 'x' needs exactly one tool_result in the next message (found 2)"),
        ([U(T("a")), A(use("x")), U(T("b"), res("x", "1"))],
         "messages.2: tool_result blocks must come first in the content"),
        ([U(res("y", "1"))], "messages.0: tool_result 'y' answers no tool_use in the previous message"),
        ([U(T("a")), A(use("bad.id")), U(res("bad.id", "1"))],
         "messages.1.content.0: tool_use id 'bad.id' must match [A-Za-z0-9_-]+"),
        ([U(T("a")), A(use("x")), U(res("x", "1")), A(use("x")), U(res("x", "2"))],
         "messages.3.content.0: tool_use id 'x' is not unique"),
        ([U(T("a")), A(use("x")), U(res("x", ""))], "messages.2.content.0: tool_result content must not be empty"),
        ([U(T("a")), A(use("x", name="")), U(res("x", "1"))], "messages.1.content.0: tool_use needs a name"),
        ([U(T("a")), A({"type": "tool_use", "id": "x", "name": "n", "input": "[]"}), U(res("x", "1"))],
         "messages.1.content.0: tool_use input must be an object"),
        ([U(use("x"))], "messages.0.content.0: a user message cannot hold a 'tool_use' block"),
        ([U(T("a")), A({"type": "thinking", "thinking": "t"})],
         "messages.1.content.0: a assistant message cannot hold a 'thinking' block"),
        ([U(T("a")), A(T("b "))], "final assistant content cannot end with trailing whitespace"),
        ([U(T("a\ud800"))], "messages.0.content.0: text is not valid UTF-8 (lone surrogate)"),
        ([U(T("a")), A(use("x")), U(res("x", "\ud800"))],
         "messages.2.content.0: tool_result content is not valid UTF-8 (lone surrogate)"),
        ([U(T("a")), A(use("x", input={"k": "\ud800"})), U(res("x", "1"))],
         "messages.1.content.0: tool_use input is not valid UTF-8 (lone surrogate)"),
    ],
)
def test_validator_finds_each_broken_rule(messages, problem):
    assert problem in anthropic_problems({"messages": messages})


def test_validator_checks_the_body_itself():
    assert anthropic_problems([]) == ["the body must be an object with a 'messages' list"]
    assert anthropic_problems({"messages": [U(T("a"))], "tools": []}) == ["unexpected keys ['tools']"]
    assert anthropic_problems({"system": "", "messages": [U(T("a"))]}) == [
        "system must be a non-empty string when present"
    ]


# -- random histories ---------------------------------------------------------------------------------------------

_texts = st.sampled_from(["", " ", "\n", "hello", "trailing \n", "日本語", "a\x00b", "lone \ud800"])


@st.composite
def _parts(draw, role):
    kind = draw(st.sampled_from(["text", "text", "tool", "tool", "reasoning", "step", "file", "subtask", "compaction"]))
    if kind == "text":
        return text(draw(_texts), ignored=draw(st.booleans()) and draw(st.booleans()), synthetic=draw(st.booleans()))
    if kind == "tool":
        status = draw(st.sampled_from(["pending", "running", "completed", "error"]))
        part = tool(
            draw(st.sampled_from(["c1", "c2", "fn.x:1", "", "toolu_A"])),
            name=draw(st.sampled_from(["bash", "read", "skill"])),
            status=status,
            output=draw(_texts) if status == "completed" else None,
            error=draw(_texts) if status == "error" else None,
            compacted=draw(st.sampled_from([None, 5])) if status == "completed" else None,
            input=draw(st.sampled_from([{}, {"command": "ls"}])),
        )
        if status == "completed" and draw(st.integers(0, 9)) == 0:
            part.state.output = None
        return part
    if kind == "reasoning":
        return ReasoningPart(text=draw(_texts))
    if kind == "step":
        return draw(st.sampled_from([StepStartPart(), StepFinishPart(reason="stop")]))
    if kind == "file":
        return FilePart(mime="text/plain", filename=draw(st.sampled_from([None, "f.txt"])), url="data:,x")
    if kind == "subtask":
        return SubtaskPart(prompt=draw(_texts), description="d", agent="a")
    return CompactionPart(tail_start_id=draw(st.sampled_from([None, "m0", "m1", "m3"])))


@st.composite
def random_histories(draw):
    history = []
    for index in range(draw(st.integers(0, 12))):
        mid = f"m{index}"
        role = draw(st.sampled_from(["user", "assistant", "compaction"]))
        if role == "compaction":  # a completed compaction pair, often with a tail
            tail = draw(st.sampled_from([None] + [f"m{i}" for i in range(index)] + [f"m{i}s" for i in range(index)]))
            history.append(user(mid, CompactionPart(tail_start_id=tail), *draw(st.lists(_parts("user"), max_size=1))))
            history.append(summary(f"{mid}s", draw(_texts), parent=mid))
            continue
        parts = draw(st.lists(_parts(role), max_size=4))
        if role == "user":
            history.append(user(mid, *parts))
            continue
        is_summary = draw(st.integers(0, 4)) == 0
        parent = draw(st.sampled_from([None] + [f"m{i}" for i in range(index)]))
        error = draw(st.sampled_from([None, None, None, {"name": "APIError"}, {"name": "MessageAbortedError"}]))
        finish = draw(st.sampled_from(["stop", "tool-calls", None]))
        history.append(assistant(mid, *parts, parent=parent, summary=is_summary, error=error, finish=finish))
    return history


def _sent(message):
    """Whether an assistant message is sent at all (OpenCode drops failed ones, keeps aborts with content)."""
    error = message.info.error
    return not error or (
        error.get("name") == "MessageAbortedError"
        and any(p.type not in ("step-start", "reasoning") for p in message.parts)
    )


def _sent_tool_parts(history):
    return sum(
        isinstance(p, ToolPart)
        for m in history
        if m.info.role == "assistant" and _sent(m)
        for p in m.parts
    )


def _expected_text_blocks(history):
    count = 0
    for m in history:
        if m.info.role == "assistant" and not _sent(m):
            continue
        for p in m.parts:
            if p.type == "text":
                count += not p.ignored and bool(p.text.strip())
            elif p.type in ("file", "subtask"):
                count += 1
            elif p.type == "compaction":
                count += m.info.role == "user"
    return count


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_histories(), st.sampled_from([None, "", "sys"]))
def test_random_histories_render_valid_bodies(history, system):
    body = to_anthropic(history, system=system)
    assert anthropic_problems(body, allow_empty=True) == []
    json.dumps(body, ensure_ascii=False).encode("utf-8")
    assert ("system" in body) == (system == "sys")
    blocks = [b for m in body["messages"] for b in m["content"]]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert len(uses) == len(results) == _sent_tool_parts(history)
    placeholder = body["messages"][:1] == [U(T(PLACEHOLDER_USER_TEXT))]
    texts = [b for b in blocks if b["type"] == "text"]
    assert len(texts) == _expected_text_blocks(history) + placeholder
    assert bool(body["messages"]) == bool(texts or uses)
    assert anthropic_problems(to_anthropic(filter_compacted(history)), allow_empty=True) == []


# -- the real corpus ---------------------------------------------------------------------------------------------

CORPUS_MESSAGES = {
    "clever-cabin": 30,
    "crisp-garden": 76,
    "curious-harbor": 82,
    "curious-sailor": 70,
    "hidden-river": 74,
    "kind-meadow": 130,
    "nimble-pixel": 11,
    "quick-falcon": 146,
    "quiet-meadow": 34,
    "shiny-nebula": 32,
    "silent-nebula": 33,
    "silent-panda": 115,
}


@pytest.mark.parametrize("path", opencode_files(), ids=lambda p: p.name.split("__")[1])
def test_every_corpus_session_renders_valid(path):
    history = load_export(path)
    body = render(history, system="You are a coding agent.")
    assert len(body["messages"]) == CORPUS_MESSAGES[path.name.split("__")[1]]
    uses = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == _sent_tool_parts(history)
    render(filter_compacted(history))
    # two sessions carry OpenCode's own prune marks; an aggressive prune adds exactly the parts it marks
    slug = path.name.split("__")[1]
    before = {"curious-sailor": 20, "silent-panda": 31}.get(slug, 0)
    assert len(_cleared(body)) == before
    result = prune(history, CompactionConfig(prune_protect=2_000, prune_minimum=500), now=1)
    assert len(_cleared(render(history))) == before + len(result.parts)


def _cleared(body):
    return [b for m in body["messages"] for b in m["content"]
            if b["type"] == "tool_result" and b["content"] == CLEARED_TOOL_OUTPUT]


def test_the_corpus_compaction_renders_as_question_and_summary():
    body = render(filter_compacted(load_export(corpus_file("curious-sailor"))))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][0]["content"] == [T("What did we do so far?")]
    (summary_block,) = body["messages"][1]["content"]
    assert summary_block["text"].startswith("## Goal\n\nCreate research notes and an OpenCode skill")


def test_the_corpus_running_tool_renders_interrupted():
    results = []
    for path in opencode_files():
        history = load_export(path)
        parts = [p for m in history for p in m.parts if isinstance(p, ToolPart)]
        running = [p.call_id for p in parts if p.state.status == "running"]
        if running:
            body = render(history)
            results += [b for m in body["messages"] for b in m["content"]
                        if b["type"] == "tool_result" and b["tool_use_id"] in running]
    assert len(results) == 1
    assert results[0]["content"] == INTERRUPTED_TOOL_OUTPUT and results[0]["is_error"] is True
