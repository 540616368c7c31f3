"""One walk renders both ways: ``to_anthropic`` and the live request (``render_messages``) agree on every
history without recorded content, less the final trim only ``to_anthropic`` does, and what the live request
adds is its own (recorded content sent back exactly). Both are rules: they import no database, store,
summarizer or CLI module."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
from corpus_helpers import all_files
from history_builders import assistant, compaction, summary, text, tool, user

import brutus
from brutus.history import filter_compacted
from brutus.importers import plan_document, read_document
from brutus.live.render import render_messages
from brutus.render import to_anthropic

SYSTEM = [{"type": "text", "text": "You are a coding agent."}]


def both_ways(history):
    """The messages ``to_anthropic`` renders, and those the live request renders."""
    rendered = render_messages(history, system=SYSTEM, tools=None)
    assert (rendered.stripped, rendered.mismatched, rendered.drop_block) == ([], [], False)
    return to_anthropic(history)["messages"], rendered.messages


def trimmed(messages):
    """``messages`` with ``to_anthropic``'s final trim: the last assistant text loses its trailing whitespace."""
    messages = copy.deepcopy(messages)
    if messages and messages[-1]["role"] == "assistant" and messages[-1]["content"][-1]["type"] == "text":
        messages[-1]["content"][-1]["text"] = messages[-1]["content"][-1]["text"].rstrip()
    return messages


@pytest.mark.parametrize("path", all_files(), ids=lambda p: p.name.split("__")[-1][:20])
def test_every_corpus_session_renders_the_same_both_ways(path):
    sessions = plan_document(read_document(path))
    rendered = 0
    for session in sessions:
        for history in (session.history, filter_compacted(session.history)):
            anthropic, live = both_ways(history)
            assert trimmed(live) == anthropic
            rendered += len(anthropic)
    assert rendered > 0 or not sessions  # a file of summary lines only holds no session


def test_only_to_anthropic_trims_the_final_assistant_text():
    history = [user("u1", text("a")), assistant("a1", text("end \n"), parent="u1")]
    anthropic, live = both_ways(history)
    assert anthropic[-1]["content"] == [{"type": "text", "text": "end"}]
    assert live[-1]["content"] == [{"type": "text", "text": "end \n"}]


def test_the_live_request_sends_recorded_content_back_exactly():
    response = {
        "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
            {"type": "text", "text": "Reading it.", "citations": None},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.py"}},
        ],
    }
    recorded = assistant("a1", text("Reading it."), tool("toolu_01", name="read_file", input={"path": "a.py"}, output="x = 1"),
                         parent="u1", metadata={"anthropic": {"response": response, "prefix": None}})
    sent = [{"type": "text", "text": "what is in a.py?", "cache_control": {"type": "ephemeral"}}]
    asked = user("u1", text("what is in a.py?"), metadata={"anthropic": {"content": sent}})
    history = [asked, recorded, user("u2", text("thanks"))]
    anthropic, live = both_ways(history)
    assert live[0]["content"] == sent
    assert live[1]["content"] == response["content"]  # thinking and every field kept, where to_anthropic has parts
    assert anthropic[1]["content"] == [
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.py"}},
    ]
    assert live[2:] == anthropic[2:]  # the tool result and the next user message: the walk's own


def test_a_summary_is_where_the_live_request_puts_its_breakpoint():
    history = [
        user("u1", text("go")),
        assistant("a1", text("done"), parent="u1"),
        compaction("c1"),
        summary("s1", "what happened", parent="c1"),
        user("u2", text("go on")),
    ]
    rendered = render_messages(history, system=SYSTEM, tools=None)
    assert trimmed(rendered.messages) == to_anthropic(history)["messages"]
    assert rendered.messages[rendered.summary_index]["content"][-1]["text"] == "what happened"


def test_both_renderers_import_only_rules():
    """The renderers (and what they import, transitively, within brutus) are rules: no database, store,
    summarizer or CLI module among them."""
    root = Path(brutus.__file__).parent
    seen, todo = set(), ["brutus.render", "brutus.live.render"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = root.joinpath(*name.split(".")[1:]).with_suffix(".py")
        package = name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                todo.append(module)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                todo += [n for n in names if n.startswith("brutus")]
    assert seen == {"brutus.render", "brutus.live.render", "brutus.blocks", "brutus.errors", "brutus.history",
                    "brutus.models", "brutus.pricing"}
