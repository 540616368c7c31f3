"""``brutus show SESSION --full-text`` (texts, tool inputs and outputs whole) and ``--markdown`` (a transcript:
compaction boundaries, summaries and pruned outputs marked), through the CLI on SQLite and PostgreSQL, and the
Markdown renderer (``brutus.markdown``) without a database."""

from __future__ import annotations

import re
from pathlib import Path

from brutus import SessionStore
from brutus.markdown import fence, to_markdown
from brutus.models import MessageWithParts

from cli_helpers import run
from corpus_helpers import corpus_file

CC = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d"
LONG = "line one\n" + "x" * 5000 + "\nthe end ```` of it"


def _session(store: SessionStore) -> str:
    """A session with a long text, a long tool input and output, a pruned output and a compaction."""
    ses = store.create_session(title="show me")
    user = store.append_message(ses.id, "user")
    store.append_part(user.id, {"type": "text", "text": LONG})
    reply = store.append_message(ses.id, "assistant", parent_id=user.id, model_id="claude-x")
    tool = store.append_part(reply.id, {"type": "tool", "call_id": "c1", "tool": "bash", "state": {"status": "pending", "input": {"command": "echo " + "y" * 3000}}})
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output="out " + "z" * 4000)
    old = store.append_part(reply.id, {"type": "tool", "call_id": "c2", "tool": "read", "state": {"status": "pending", "input": {"path": "a.txt"}}})
    store.update_tool(old.id, status="running")
    store.update_tool(old.id, status="completed", output="SECRET OLD OUTPUT")
    store.finish_message(reply.id, finish="stop")
    with store.engine.begin() as conn:  # a prune mark, as prune writes it
        from sqlalchemy import text

        conn.execute(text("UPDATE tool_states SET compacted_at = 1700000000000 WHERE part_id = :p"), {"p": old.id})
    return ses.id


def test_full_text_prints_texts_inputs_and_outputs_whole(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session_id = _session(store)
    short = run("show", session_id, "--db", store_url)
    assert short.returncode == 0, short.stderr
    assert "x" * 5000 not in short.stdout and "y" * 3000 not in short.stdout
    full = run("show", session_id, "--full-text", "--db", store_url)
    assert full.returncode == 0, full.stderr
    assert "\n   " + LONG.replace("\n", "\n   ") + "\n" in full.stdout  # piped: plain, whole, indented
    assert '"command": "echo ' + "y" * 3000 + '"\n' in full.stdout
    assert "   out " + "z" * 4000 + "\n" in full.stdout
    assert "(output pruned at 2023-11-14 22:13:20)" in full.stdout


def test_markdown_marks_pruned_outputs_and_shows_their_text_only_with_full(store_url: str, tmp_path: Path) -> None:
    with SessionStore.open(store_url) as store:
        session_id = _session(store)
    view = run("show", session_id, "--markdown", "--db", store_url)
    assert view.returncode == 0, view.stderr
    assert view.stdout.startswith("# show me\n")
    assert "## #1 User · " in view.stdout and "## #2 Assistant (claude-x) · " in view.stdout
    assert fence(LONG) not in view.stdout and LONG in view.stdout  # a text is written as it is
    assert "**Tool `bash`** (completed)" in view.stdout and '"command": "echo ' + "y" * 3000 in view.stdout
    assert "*Output pruned at 2023-11-14 22:13:20 UTC: the model no longer sees it.*" in view.stdout
    assert "SECRET OLD OUTPUT" not in view.stdout
    whole = run("show", session_id, "--markdown", "--full", "-o", tmp_path / "t.md", "--db", store_url)
    assert whole.returncode == 0 and whole.stdout == f"wrote {session_id} (2 messages) to {tmp_path / 't.md'}\n"
    assert "Output (pruned):\n\n```\nSECRET OLD OUTPUT\n```" in (tmp_path / "t.md").read_text(encoding="utf-8")


def test_markdown_of_a_compacted_claude_code_session(store_url: str) -> None:
    assert run("import", corpus_file("0a725fb5"), "--db", store_url).returncode == 0
    view = run("show", CC, "--markdown", "--db", store_url)
    assert view.returncode == 0, view.stderr
    headings = re.findall(r"^## #\d+ .*$", view.stdout, re.MULTILINE)  # a summary's own text has headings too
    assert headings[0].startswith("## #165 Compaction boundary (automatic) · 2025-07-20 05:22:19 UTC")
    assert headings[1].startswith("## #166 Summary (assistant) · ")
    assert len(headings) == 213 - 164
    full = run("show", CC, "--markdown", "--full", "--db", store_url)
    full_headings = re.findall(r"^## #\d+ .*$", full.stdout, re.MULTILINE)
    assert len(full_headings) == 213 and full_headings[164] == headings[0]
    assert "---\n\n## #165 Compaction boundary" in full.stdout


def test_show_refuses_two_formats_and_a_stray_output(store_url: str, tmp_path: Path) -> None:
    with SessionStore.open(store_url) as store:
        session_id = _session(store)
    both = run("show", session_id, "--markdown", "--json", "--db", store_url)
    assert both.returncode != 0 and both.stderr == "brutus: error: --markdown and --json are two formats: choose one\n"
    stray = run("show", session_id, "-o", tmp_path / "x.md", "--db", store_url)
    assert stray.returncode != 0 and "use it with --markdown" in stray.stderr and not (tmp_path / "x.md").exists()


def test_fence_is_longer_than_any_backtick_run() -> None:
    assert fence("a ```` b", "json") == "`````json\na ```` b\n`````"
    assert fence("plain\n") == "```\nplain\n```"


def test_to_markdown_without_a_database() -> None:
    def message(seq: int, role: str, parts: list, **info) -> MessageWithParts:
        return MessageWithParts.model_validate(
            {"info": {"id": f"msg_{seq}", "session_id": "ses_1", "seq": seq, "role": role, "time": {"created": 0}, **info}, "parts": parts}
        )

    history = [
        message(1, "user", [{"type": "compaction", "auto": False, "overflow": True}]),
        message(2, "assistant", [{"type": "text", "text": "the summary"}], summary=True, model_id="m"),
        message(3, "assistant", [{"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "running", "input": {}}}]),
    ]
    assert to_markdown(history) == (
        "---\n\n## #1 Compaction boundary (manual, context overflow) · 1970-01-01 00:00:00 UTC\n\n"
        "*The model's view starts here: what came before is replaced by the summary below.*\n\n"
        "## #2 Summary (assistant, m) · 1970-01-01 00:00:00 UTC\n\nthe summary\n\n"
        "## #3 Assistant · 1970-01-01 00:00:00 UTC\n\n"
        "**Tool `bash`** (running)\n\nInput:\n\n```json\n{}\n```\n\n*No result recorded.*\n"
    )
