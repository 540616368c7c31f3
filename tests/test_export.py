"""Exporting as OpenCode JSON: an imported OpenCode file comes back as it was, and export → import into another
database gives the same messages, parts and tool states, for the whole corpus and for a session written
through the API with every part type (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brutus import SessionStore
from brutus.importers.export import dumps as export_text
from brutus.importers.export import export_opencode
from brutus.importers import import_file

from corpus_helpers import opencode_files, read_export
from import_helpers import corpus_database, dumps, fresh_url

NASTY = "nul \x00, lone surrogate \ud800, ansi \x1b[31mred\x1b[0m, crlf\r\n, private \ue000, emoji 🤖"


@pytest.fixture
def corpus(backend: str, tmp_path_factory, pg_server):
    """The whole corpus imported once per backend per run (shared: read only)."""
    return corpus_database(backend, tmp_path_factory, pg_server)


@pytest.fixture
def other_url(backend: str, tmp_path_factory, pg_server) -> str:
    """A second, empty database on the same backend, to import exports into."""
    return fresh_url(backend, tmp_path_factory, pg_server)


def write_export(store: SessionStore, session_id: str, path: Path) -> Path:
    path.write_text(export_text(export_opencode(store, session_id)), encoding="utf-8")
    return path


@pytest.mark.slow
def test_an_imported_opencode_file_exports_back_exactly(corpus) -> None:
    with corpus.open() as store:
        for path in opencode_files():
            original = read_export(path)
            assert export_opencode(store, original["info"]["id"]) == original, path.name


@pytest.mark.slow
def test_every_corpus_session_round_trips(corpus, other_url: str, tmp_path: Path) -> None:
    with corpus.open() as source, SessionStore.open(other_url) as target:
        sessions = source.list_sessions()
        assert len(sessions) == 22
        for root in sorted(s.id for s in sessions if s.parent_id is None):  # each export carries its children
            exported = export_opencode(source, root)
            family = [root, *sorted(s.id for s in sessions if s.parent_id == root)]
            assert import_file(target, write_export(source, root, tmp_path / "s.json")) == family
            assert export_opencode(target, root) == exported
        assert {s.id for s in target.list_sessions()} == {s.id for s in sessions}
        for session in sessions:
            assert dumps(target.messages(session.id)) == dumps(source.messages(session.id)), session.id
            assert dumps(target.filter_compacted(session.id)) == dumps(source.filter_compacted(session.id))
            copy = target.get_session(session.id)
            assert copy == session, session.id  # title, directory, parent, created/updated times, message count


def _native_session(store: SessionStore) -> tuple[str, str]:
    """A session written through the API with all twelve part types, a compaction, a pruned output, a child."""
    ses = store.create_session(title=NASTY, directory="/src/app")
    user = store.append_message(ses.id, "user", agent="build", model_id="claude-sonnet-4-5", provider_id="anthropic", metadata={"k": [1, None]})
    store.append_part(user.id, {"type": "text", "text": NASTY, "time": {"start": 5}})
    store.append_part(user.id, {"type": "file", "mime": "text/plain", "url": "file:///a.txt", "filename": "a.txt", "source": {"path": "a.txt"}})
    store.append_part(user.id, {"type": "agent", "name": "explore", "source": {"value": "@explore", "start": 0, "end": 8}})
    store.append_part(user.id, {"type": "subtask", "prompt": "look", "description": "d", "agent": "explore", "model": {"modelID": "m"}})
    reply = store.append_message(ses.id, "assistant", parent_id=user.id, agent="build", mode="build", model_id="claude-sonnet-4-5", provider_id="anthropic")
    store.append_part(reply.id, {"type": "step-start", "snapshot": "abc"})
    store.append_part(reply.id, {"type": "reasoning", "text": "hmm", "metadata": {"anthropic": {"signature": "sig"}}, "time": {"start": 1, "end": 2}})
    done = store.append_part(reply.id, {"type": "tool", "call_id": "c1", "tool": "read", "state": {"status": "pending", "input": {"path": NASTY}}})
    store.update_tool(done.id, status="running", title="read")
    store.update_tool(done.id, status="completed", output=NASTY * 50, metadata={"lines": 3})
    failed = store.append_part(reply.id, {"type": "tool", "call_id": "c2", "tool": "bash", "state": {"status": "pending", "input": {}}})
    store.update_tool(failed.id, status="error", error="exit 1")
    store.append_part(reply.id, {"type": "tool", "call_id": "c3", "tool": "bash", "state": {"status": "pending", "input": {"x": None}}})
    store.append_part(reply.id, {"type": "tool", "call_id": "c4", "tool": "grep", "state": {
        "status": "completed", "input": {}, "output": "old", "time": {"start": 1, "end": 2, "compacted": 3}}})
    store.append_part(reply.id, {"type": "retry", "attempt": 2, "error": {"message": "overloaded"}})
    store.append_part(reply.id, {"type": "snapshot", "snapshot": "def"})
    store.append_part(reply.id, {"type": "patch", "hash": "h", "files": ["a.py"]})
    store.append_part(reply.id, {"type": "step-finish", "reason": "tool-calls", "cost": 0.5, "tokens": {"input": 9, "cache": {"read": 4}}})
    store.finish_message(reply.id, finish="tool-calls", tokens={"input": 10, "output": 3, "cache": {"write": 2}}, cost=0.25)
    marker = store.append_message(ses.id, "user", synthetic=True)
    store.append_part(marker.id, {"type": "compaction", "auto": True, "overflow": True, "tail_start_id": user.id})
    summary = store.append_message(ses.id, "assistant", parent_id=marker.id, summary=True, mode="compaction", agent="compaction")
    store.append_part(summary.id, {"type": "text", "text": "what we did", "synthetic": True, "ignored": False})
    store.finish_message(summary.id, finish="stop")
    aborted = store.append_message(ses.id, "assistant", parent_id=marker.id)
    store.finish_message(aborted.id, finish="error", error={"name": "MessageAbortedError", "data": {}})
    child = store.create_session(title="sub-agent", parent_id=ses.id)
    note = store.append_message(child.id, "user", metadata={})
    store.append_part(note.id, {"type": "text", "text": "sub task", "ignored": True})
    return ses.id, child.id


def test_a_session_written_through_the_api_round_trips(store: SessionStore, other_url: str, tmp_path: Path) -> None:
    parent, child = _native_session(store)
    with SessionStore.open(other_url) as target:
        path = write_export(store, parent, tmp_path / f"{parent}.json")  # the child travels inside
        assert import_file(target, path) == [parent, child]
        for session_id in (parent, child):
            assert dumps(target.messages(session_id)) == dumps(store.messages(session_id))
            assert dumps(target.filter_compacted(session_id)) == dumps(store.filter_compacted(session_id))
            assert export_opencode(target, session_id) == export_opencode(store, session_id)
            assert target.get_session(session_id) == store.get_session(session_id)  # times included
        assert target.get_session(child).parent_id == parent
        assert target.get_session(parent).title == NASTY


def test_the_export_has_opencode_shape(store: SessionStore) -> None:
    parent, _ = _native_session(store)
    exported = export_opencode(store, parent)
    assert set(exported) == {"info", "messages", "children"}
    assert [c["info"]["parentID"] for c in exported["children"]] == [parent]
    assert set(export_opencode(store, parent, children=False)) == {"info", "messages"}
    info = exported["info"]
    assert (info["id"], info["directory"]) == (parent, "/src/app") and set(info["time"]) == {"created", "updated"}
    user, reply, marker, summary, aborted = (m["info"] for m in exported["messages"])
    assert user["model"] == {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"} and "tokens" not in user
    assert (reply["modelID"], reply["providerID"], reply["parentID"], reply["finish"]) == ("claude-sonnet-4-5", "anthropic", user["id"], "tool-calls")
    assert reply["tokens"] == {"input": 10, "output": 3, "reasoning": 0, "cache": {"read": 0, "write": 2}} and reply["cost"] == 0.25
    assert summary["summary"] is True and summary["mode"] == "compaction" and marker["synthetic"] is True
    assert aborted["error"]["name"] == "MessageAbortedError"
    parts = exported["messages"][1]["parts"]
    tool = next(p for p in parts if p["type"] == "tool")
    assert (tool["callID"], tool["sessionID"], tool["messageID"]) == ("c1", parent, reply["id"])
    assert tool["state"]["status"] == "completed" and tool["state"]["output"] == NASTY * 50
    pending = next(p for p in parts if p.get("callID") == "c3")
    assert pending["state"] == {"status": "pending", "input": {"x": None}}
    pruned = next(p for p in parts if p.get("callID") == "c4")
    assert pruned["state"]["time"]["compacted"] == 3 and pruned["state"]["output"] == "old"
    compaction = exported["messages"][2]["parts"][0]
    assert compaction == {
        "type": "compaction", "auto": True, "overflow": True, "tailStartID": user["id"],
        "id": compaction["id"], "sessionID": parent, "messageID": marker["id"],
    }


def test_export_text_is_valid_utf8_json_even_with_lone_surrogates(store: SessionStore) -> None:
    parent, _ = _native_session(store)
    text = export_text(export_opencode(store, parent))
    text.encode("utf-8")  # would raise on a raw lone surrogate
    assert "\\ud800" in text and "\\u0000" in text
    assert json.loads(text) == export_opencode(store, parent)


def test_a_child_exported_alone_keeps_its_parent_id(store: SessionStore, other_url: str, tmp_path: Path) -> None:
    _, child = _native_session(store)
    exported = export_opencode(store, child)
    with SessionStore.open(other_url) as target:
        import_file(target, write_export(store, child, tmp_path / "child.json"))
        assert target.get_session(child).parent_id is None  # its parent is not in this database
        assert export_opencode(target, child) == exported  # …but the export still names it


def test_cli_export_keeps_children_and_times_and_import_restores_them(store_url: str, other_url: str, tmp_path: Path) -> None:
    from cli_helpers import run
    from corpus_helpers import corpus_file

    main = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d"
    assert run("import", corpus_file("0a725fb5"), "--db", store_url).returncode == 0
    out = tmp_path / "exported.json"
    result = run("export", main, "-o", out, "--db", store_url)
    assert result.returncode == 0 and result.stdout == f"exported {main} (213 messages, 1 child session) to {out}\n"
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert [c["info"]["id"] for c in exported["children"]] == [f"{main}_eb46ebab"]
    assert exported["info"]["time"] == {"created": 1752983480360, "updated": 1752989409697}  # the transcript's, not the import's

    again = run("import", out, "--db", other_url, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["created"] == [main, f"{main}_eb46ebab"]
    with SessionStore.open(store_url) as source, SessionStore.open(other_url) as target:
        assert target.list_sessions() == source.list_sessions()  # ids, parents, titles, created/updated times, counts
        for session in source.list_sessions():
            assert dumps(target.messages(session.id)) == dumps(source.messages(session.id))
