"""Importing OpenCode exports and Claude Code sessions: format detection, exact mapping of known content,
no duplicates, and malformed input refused with the database unchanged (SQLite and PostgreSQL)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from brutus import InvalidInput, SessionStore
from brutus.errors import ImportFormatError
from brutus.importers import detect_format, import_file, import_files, plan_document, read_document
from brutus.models import MessageWithParts, ToolPart

from corpus_helpers import all_files, claude_code_files, corpus_file, opencode_files, read_bytes, read_export, read_text
from import_helpers import comparable, corpus_database, row_counts

NIMBLE = "ses_39b4c1891ffezxPVc5OPmcqF33"
SAILOR = "ses_39b7f9e89ffe7J0WzLzYrUt4eW"
CC_SMALL = "ses_2cba43de-c8d2-4a69-add8-9fae3ad93900"
CC_COMPACTED = "ses_da4409c0-22ff-4ced-95ce-96c5411830a9"
CC_SIDECHAIN = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d"


def tools(history: list[MessageWithParts]) -> list[ToolPart]:
    return [p for m in history for p in m.parts if isinstance(p, ToolPart)]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def write_jsonl(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


@pytest.fixture
def corpus(backend: str, tmp_path_factory, pg_server):
    """The whole corpus imported once per backend per run (shared: read only)."""
    return corpus_database(backend, tmp_path_factory, pg_server)


# -- format detection ---------------------------------------------------------------------------------------


def test_format_is_told_by_content_not_by_name(tmp_path: Path) -> None:
    disguised_export = tmp_path / "session.jsonl"
    disguised_export.write_bytes(read_bytes(corpus_file("nimble-pixel")))
    disguised_jsonl = tmp_path / "export.json"
    disguised_jsonl.write_bytes(read_bytes(corpus_file("2cba43de")))
    assert detect_format(disguised_export) == "opencode"
    assert detect_format(disguised_jsonl) == "claude-code"
    assert detect_format(json.dumps(lines_of(corpus_file("9b92ce83"))[0])) == "claude-code"  # one line
    assert {read_document(p).format for p in opencode_files()} == {"opencode"}
    assert {read_document(p).format for p in claude_code_files()} == {"claude-code"}


# -- OpenCode -----------------------------------------------------------------------------------------------


def test_opencode_maps_one_to_one_with_ids_kept(store: SessionStore) -> None:
    assert import_file(store, corpus_file("nimble-pixel")) == [NIMBLE]
    session = store.get_session(NIMBLE)
    assert session.title == "Re-enable protobuf transport, logging.ts review"
    assert session.directory == "/Users/alex/repos/vfp/dark-factory"
    history = store.messages(NIMBLE)
    assert [m.info.role for m in history] == ["user", "assistant", "assistant", "assistant", "user", "assistant", "assistant", "assistant"]
    assert history[0].info.id == "msg_c64b3e7700010H66Vhg03GjeqB"
    assert [p.type for p in history[0].parts] == ["text", "file", "text", "text"]

    first_reply = history[1].info
    assert first_reply.parent_id == "msg_c64b3e7700010H66Vhg03GjeqB"
    assert (first_reply.finish, first_reply.model_id is not None, first_reply.mode) == ("tool-calls", True, first_reply.agent)
    assert first_reply.tokens.model_dump() == {"input": 16109, "output": 110, "reasoning": 77, "cache": {"read": 0, "write": 0}}
    assert first_reply.metadata["opencode"]["info"]["tokens"] == {"total": 16219}
    assert set(first_reply.metadata["opencode"]["info"]) >= {"path", "tokens"}
    assert [p.type for p in history[1].parts] == ["step-start", "reasoning", "tool", "step-finish"]

    calls = tools(history)
    assert [(t.id, t.tool, t.state.status) for t in calls] == [
        ("prt_c64b3f78a001nLT8TjPn0MuaqE", "read", "completed"),
        ("prt_c64b40be2001eBKT3W4tMnZT59", "apply_patch", "completed"),
        ("prt_c64b44e54001aCP0eBye4th5Vr", "grep", "completed"),
        ("prt_c64b45c56001T89Z7EJU8Cfkdy", "read", "completed"),
    ]
    patch = calls[1]
    assert patch.call_id == "call_6G7SLNkFMDlf58jSsPU55hiO"
    assert patch.state.output == "Success. Updated the following files:\nM TODO.md"
    assert patch.state.title == "Success. Updated the following files:\nM TODO.md"
    assert patch.state.time.start is not None and patch.state.time.end >= patch.state.time.start
    # the provider's call metadata has no brutus field: kept beside the message for the export
    assert "openai" in history[2].info.metadata["opencode"]["parts"][patch.id]["metadata"]

    aborted = history[-1].info
    assert aborted.error == {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}
    assert aborted.finish is None and [p.type for p in history[-1].parts] == ["step-start", "reasoning"]
    assert history[0].info.metadata["opencode"]["session"]["slug"] == "nimble-pixel"


def test_opencode_compaction_part_and_summary_make_a_boundary(store: SessionStore) -> None:
    import_file(store, corpus_file("curious-sailor"))
    history = store.messages(SAILOR)
    compaction = next(m for m in history if any(p.type == "compaction" for p in m.parts))
    assert compaction.info.id == "msg_c648e17e6001YM54MG29gGQBfQ" and compaction.info.role == "user"
    part = compaction.parts[0]
    assert (part.id, part.auto, part.overflow, part.tail_start_id) == ("prt_c648e17e7001bDWLJI0WznttOm", False, False, None)
    summary = next(m for m in history if m.info.summary)
    assert summary.info.parent_id == compaction.info.id
    assert (summary.info.mode, summary.info.finish) == ("compaction", "stop")
    view = store.filter_compacted(SAILOR)
    assert [m.info.id for m in view][:2] == [compaction.info.id, summary.info.id]
    assert len(history) == 40 and len(view) == 2


@pytest.mark.slow
def test_opencode_tool_states_as_recorded(corpus) -> None:
    with corpus.open() as store:
        ids = [read_export(p)["info"]["id"] for p in opencode_files()]
        states = [t.state for i in ids for t in tools(store.messages(i))]
    statuses = [s.status for s in states]
    assert (len(states), statuses.count("completed"), statuses.count("error"), statuses.count("running")) == (556, 544, 11, 1)
    assert sum(1 for s in states if s.time.compacted) == 51  # pruned by OpenCode: the mark is kept, the output too
    assert all(s.output is not None for s in states if s.status == "completed")
    running = next(s for s in states if s.status == "running")
    assert running.time.end is None and running.input["command"] == "bun scripts/export_opencode_sessions.sh.ts"
    assert {s.error for s in states if s.status == "error"} >= {"Tool execution aborted"}


# -- Claude Code --------------------------------------------------------------------------------------------


def test_claude_code_assistant_lines_sharing_an_id_are_one_message_with_usage_counted_once(store: SessionStore) -> None:
    path = corpus_file("2cba43de")
    assert import_file(store, path) == [CC_SMALL]
    history = store.messages(CC_SMALL)
    assistants = [m for m in history if m.info.role == "assistant"]
    lines = [e for e in lines_of(path) if e["type"] == "assistant"]
    assert (len(lines), len(assistants)) == (14, 11)
    assert [m.info.role for m in history].count("user") == 7

    merged = next(m for m in assistants if m.info.metadata["claude_code"]["message"]["id"] == "msg_01FDaqKhqX1tzFaDKdeHhSwo")
    assert [p.type for p in merged.parts] == ["reasoning", "text"]
    assert merged.info.tokens.model_dump() == {"input": 10, "output": 928, "reasoning": 0, "cache": {"read": 0, "write": 16643}}
    assert merged.parts[0].text.startswith("The user has shared a detailed peer review")
    assert len(merged.parts[0].metadata["anthropic"]["signature"]) == 2008
    assert merged.parts[1].text.startswith("This is a thorough and well-structured review!")
    assert merged.info.finish == "stop" and merged.info.model_id == "claude-sonnet-4-20250514"  # end_turn
    # Claude Code records no cost: it is priced from the usage (Sonnet 4: $3 / $15, writes $3.75, reads $0.30)
    assert merged.info.cost == pytest.approx((10 * 3 + 928 * 15 + 16_643 * 3.75) / 1e6)

    last_usage = {}
    for line in lines:
        last_usage[line["message"]["id"]] = line["message"]["usage"]
    assert sum(m.info.tokens.input for m in assistants) == sum(u["input_tokens"] for u in last_usage.values()) == 43
    assert sum(m.info.tokens.input for m in assistants) < sum(line["message"]["usage"]["input_tokens"] for line in lines)
    assert sum(m.info.tokens.output for m in assistants) == sum(u["output_tokens"] for u in last_usage.values())
    users = [m.info.id for m in history if m.info.role == "user"]
    assert all(m.info.parent_id in users for m in assistants)


def test_claude_code_usage_no_column_can_hold_counts_as_none(store: SessionStore, tmp_path: Path) -> None:
    """A count past a BIGINT (a corrupt file: found by the fuzzer) is read as 0, as a negative one is, not a
    pydantic error."""
    entries = lines_of(corpus_file("2cba43de"))
    first = next(e for e in entries if e["type"] == "assistant")["message"]["id"]
    for entry in entries:  # every line of that message: its usage is counted once, from its last line
        if entry["type"] == "assistant" and entry["message"]["id"] == first:
            entry["message"]["usage"].update(input_tokens=2**63, output_tokens=-1)
    [session_id] = import_file(store, write_jsonl(tmp_path / "huge.jsonl", entries))
    found = [m.info.tokens for m in store.messages(session_id)
             if m.info.role == "assistant" and m.info.metadata["claude_code"]["message"]["id"] == first]
    assert [(t.input, t.output) for t in found] == [(0, 0)]


def test_claude_code_tool_results_complete_their_calls(store: SessionStore) -> None:
    import_files(store, [corpus_file("2cba43de"), corpus_file("9dd861b1")])
    calls = {t.call_id: t for s in store.list_sessions() for t in tools(store.messages(s.id))}
    todo = calls["toolu_01DfZHuC87a5enxTVq1VYecV"]
    assert (todo.tool, todo.state.status) == ("TodoWrite", "completed")
    assert todo.state.output.startswith("Todos have been modified successfully. Ensure that you conti")
    assert "newTodos" in todo.state.metadata["claude_code"]["tool_use_result"]
    assert todo.state.time.end >= todo.state.time.start

    failed = calls["toolu_01EJ4d6H35NcGpAorNRoai7X"]
    assert failed.state.status == "error" and failed.state.output is None
    assert failed.state.error.startswith("sudo: a terminal is required to read the password")


@pytest.mark.slow
def test_claude_code_compact_summaries_become_boundaries(corpus) -> None:
    with corpus.open() as store:
        history = store.messages(CC_COMPACTED)
        view = store.filter_compacted(CC_COMPACTED)
    compactions = [m for m in history if any(p.type == "compaction" for p in m.parts)]
    summaries = [m for m in history if m.info.summary]
    assert len(compactions) == len(summaries) == 3
    for user, summary in zip(compactions, summaries):
        assert user.info.role == "user" and summary.info.role == "assistant"
        assert summary.info.parent_id == user.info.id and summary.info.finish == "stop" and summary.info.error is None
        assert summary.parts[0].text.startswith("This session is being continued from a previous conversation")
        assert [m.info.id for m in history].index(summary.info.id) == [m.info.id for m in history].index(user.info.id) + 1
    # the first one followed a /compact command; the others were automatic
    assert [m.parts[0].auto for m in compactions] == [False, True, True]
    assert view[0].info.id == compactions[-1].info.id == "msg_da4409c0_1de80627-a653-4faf-ba14-d4fc35644fc7_compaction"
    assert view[1].info.id == summaries[-1].info.id
    assert len(view) < len(history)
    last = tools(history)[-1]  # the session ended before the last call got its result
    assert (last.call_id, last.state.status) == ("toolu_01311ojuCGfnoUYJHmv3HMKo", "running")


def test_claude_code_sidechain_goes_into_a_child_session(store: SessionStore) -> None:
    created = import_file(store, corpus_file("0a725fb5"))
    child_id = CC_SIDECHAIN + "_eb46ebab"
    assert created == [CC_SIDECHAIN, child_id]
    child = store.get_session(child_id)
    assert (child.parent_id, child.title) == (CC_SIDECHAIN, "Search operator notation updates")
    sub = store.messages(child_id)
    assert len(sub) == 12 and sub[0].info.role == "user"
    assert sub[0].parts[0].text.startswith("Search through all .tex files in /home/kenth56/vsla/docs/papers/src/sections/")
    assert len(tools(sub)) == 15 and all(t.state.status == "completed" for t in tools(sub))
    main = store.messages(CC_SIDECHAIN)
    assert not any(m.info.metadata["claude_code"].get("isSidechain") for m in main if m.info.metadata)
    task = next(t for t in tools(main) if t.tool == "Task")
    assert task.state.output.startswith("Based on my search through all .tex files")
    assert [s.id for s in store.list_sessions(parent_id=CC_SIDECHAIN)] == [child_id]
    notices = [n for m in main if m.info.metadata for n in m.info.metadata["claude_code"].get("notices", [])]
    assert [n["content"] for n in notices] == ["Claude Opus 4 limit reached, now using Sonnet 4"]


def test_claude_code_image_becomes_a_file_part(store: SessionStore) -> None:
    import_file(store, corpus_file("6dc88126"))
    files = [p for m in store.messages("ses_6dc88126-2048-43a9-b5c2-b9747d5a0301") for p in m.parts if p.type == "file"]
    assert len(files) == 1 and files[0].mime == "image/png"
    assert files[0].url.startswith("data:image/png;base64,iVBOR") and len(files[0].url) == 350760 + len("data:image/png;base64,")


def test_claude_code_file_with_only_summary_lines_imports_nothing(store: SessionStore) -> None:
    before = row_counts(store)
    assert import_file(store, corpus_file("c001d2c0")) == []
    assert row_counts(store) == before


def _entry(kind: str, uuid: str, parent: str | None, second: int, **extra) -> dict:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "7e57-session",
        "timestamp": f"2025-08-01T10:00:{second:02d}.000Z",
        "isSidechain": False,
        "cwd": "/src",
        **extra,
    }


def _user(uuid: str, parent: str | None, second: int, content, **extra) -> dict:
    return _entry("user", uuid, parent, second, message={"role": "user", "content": content}, **extra)


def _assistant(uuid: str, parent: str, second: int, message_id: str, block: dict, stop=None, output=5) -> dict:
    usage = {"input_tokens": 100, "output_tokens": output, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3}
    message = {"id": message_id, "role": "assistant", "model": "claude-sonnet-4-5", "content": [block], "stop_reason": stop, "usage": usage}
    return _entry("assistant", uuid, parent, second, message=message)


def test_claude_code_compact_boundary_lines_of_newer_versions(store: SessionStore, tmp_path: Path) -> None:
    entries = [
        _user("u1", None, 1, "Fix the bug"),
        _assistant("a1", "u1", 2, "msg_A", {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}),
        _assistant("a2", "a1", 3, "msg_A", {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "x"}}, stop="tool_use", output=40),
        _user("r1", "a2", 4, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.py"}]}]),
        _user("r2", "r1", 5, [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True}]),
        _entry("system", "b1", None, 6, subtype="compact_boundary", content="Conversation compacted",
               compactMetadata={"trigger": "manual", "preTokens": 51234}, logicalParentUuid="r2"),
        _user("s1", "b1", 7, "This session is being continued... summary text", isCompactSummary=True),
        _assistant("a3", "s1", 8, "msg_B", {"type": "text", "text": "Continuing."}, stop="end_turn"),
        _entry("system", "b2", None, 9, subtype="compact_boundary", content="Conversation compacted",
               compactMetadata={"trigger": "auto", "preTokens": 60000}),
        _user("u2", "b2", 10, "And now?"),
    ]
    path = write_jsonl(tmp_path / "newer.jsonl", entries)
    assert import_file(store, path) == ["ses_7e57-session"]
    history = store.messages("ses_7e57-session")
    roles = [(m.info.role, m.info.summary, [p.type for p in m.parts]) for m in history]
    assert roles == [
        ("user", False, ["text"]),
        ("assistant", False, ["tool", "tool"]),
        ("user", False, ["compaction"]),
        ("assistant", True, ["text"]),
        ("assistant", False, ["text"]),
        ("user", False, ["compaction"]),
        ("assistant", True, []),  # a boundary no summary followed still closes
        ("user", False, ["text"]),
    ]
    first = history[1]
    assert first.info.tokens.output == 40 and first.info.tokens.input == 100 and first.info.finish == "tool-calls"
    calls = tools(history)
    assert (calls[0].state.status, calls[0].state.output) == ("completed", "a.py")
    assert (calls[1].state.status, calls[1].state.error) == ("error", "boom")
    boundary = history[2]
    assert boundary.info.id == "msg_7e57sess_b1" and boundary.parts[0].auto is False
    assert boundary.info.metadata["claude_code"]["compactMetadata"]["preTokens"] == 51234
    assert history[5].parts[0].auto is True
    assert history[3].info.parent_id == boundary.info.id and history[4].info.parent_id == boundary.info.id
    assert [m.info.id for m in store.filter_compacted("ses_7e57-session")] == [m.info.id for m in history[5:]]


def test_claude_code_resumed_copy_of_a_session_does_not_clash(store: SessionStore, tmp_path: Path) -> None:
    original = [_user("u1", None, 1, "hello"), _assistant("a1", "u1", 2, "msg_A", {"type": "text", "text": "hi"})]
    resumed = [dict(e, sessionId="another-session") for e in original] + [_user("u2", "a1", 3, "more", sessionId="another-session")]
    first = import_file(store, write_jsonl(tmp_path / "one.jsonl", original))
    second = import_file(store, write_jsonl(tmp_path / "two.jsonl", resumed))
    assert (first, second) == (["ses_7e57-session"], ["ses_another-session"])
    assert len(store.messages("ses_another-session")) == 3


# -- no duplicates ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [corpus_file("nimble-pixel"), corpus_file("0a725fb5")], ids=["opencode", "claude-code"])
def test_importing_twice_does_not_duplicate(store: SessionStore, path: Path) -> None:
    created = import_file(store, path)
    before = row_counts(store)
    assert import_file(store, path) == []
    again = import_files(store, [path, path])
    assert [r.created for r in again] == [[], []] and again[0].skipped == created
    assert row_counts(store) == before


# -- malformed input ----------------------------------------------------------------------------------------


def _truncated(path: Path) -> bytes:
    data = read_bytes(path)
    return data[: len(data) // 2]


MALFORMED = {
    "empty": (lambda: b"", "empty"),
    "blank": (lambda: b"  \n\n\t\n", "empty"),
    "binary": (lambda: bytes(range(256)) * 4, "binary"),
    "not-utf8": (lambda: b"\xff\xfe\xfa not text \x80\x81", "not UTF-8"),
    "truncated-opencode": (lambda: _truncated(corpus_file("nimble-pixel")), "truncated"),
    "damaged-last-line": (lambda: read_bytes(corpus_file("2cba43de")).rstrip(b"\n") + b" x\n", "line 28: invalid JSON"),
    "broken-middle-line": (
        lambda: b"\n".join(
            line if n != 4 else line[: len(line) // 3] for n, line in enumerate(read_bytes(corpus_file("2cba43de")).splitlines(), 1)
        ),
        "line 4: invalid JSON",
    ),
    "json-array": (lambda: b'[{"info": {}, "messages": []}]', "JSON list"),
    "other-json-object": (lambda: b'{"name": "not a session", "items": [1, 2]}', "neither an OpenCode export"),
    "export-with-bad-messages": (lambda: b'{"info": {"id": "ses_x"}, "messages": {"a": 1}}', "'messages' array"),
    "other-jsonl": (lambda: b'{"a": 1}\n{"b": 2}\n', "no line is a Claude Code session entry"),
    "jsonl-with-array-line": (lambda: b'{"type": "user", "uuid": "u"}\n[1, 2]\n', "line 2: a JSON list"),
    "plain-text": (lambda: b"hello world\nthis is not json\n", "invalid JSON"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_is_refused_and_nothing_is_written(store: SessionStore, tmp_path: Path, case: str) -> None:
    import_file(store, corpus_file("nimble-pixel"))  # something in the database to stay unchanged
    before = row_counts(store)
    make, expected = MALFORMED[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(make())
    with pytest.raises(ImportFormatError) as caught:
        import_file(store, path)
    assert expected in str(caught.value) and str(path) in str(caught.value)
    assert isinstance(caught.value, InvalidInput)
    assert row_counts(store) == before


def test_an_error_late_in_a_file_writes_nothing_of_it(store: SessionStore, tmp_path: Path) -> None:
    export = read_export(corpus_file("nimble-pixel"))
    export["messages"][-1]["parts"][0]["type"] = "hologram"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(export), encoding="utf-8")
    before = row_counts(store)
    with pytest.raises(ImportFormatError, match=r"messages\[7\].*parts\[0\]: unsupported part type 'hologram'"):
        import_files(store, [corpus_file("2cba43de"), bad])  # the good file first: rolled back too
    assert row_counts(store) == before

    entries = lines_of(corpus_file("9dd861b1"))
    entries[5]["timestamp"] = "yesterday"
    with pytest.raises(ImportFormatError, match="line 6: no valid ISO timestamp"):
        import_file(store, write_jsonl(tmp_path / "late.jsonl", entries))
    assert row_counts(store) == before


def test_a_refusal_by_the_store_names_the_file(store: SessionStore, tmp_path: Path) -> None:
    import_file(store, corpus_file("nimble-pixel"))
    export = read_export(corpus_file("nimble-pixel"))
    export["info"]["id"] = "ses_copy"  # a new session whose message ids are already taken
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(export), encoding="utf-8")
    before = row_counts(store)
    with pytest.raises(ImportFormatError, match="copy.json: cannot import session ses_copy: message .* already exists"):
        import_file(store, copy)
    assert row_counts(store) == before


# -- gzip-compressed files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fragment", ["nimble-pixel", "2cba43de"], ids=["opencode", "claude-code"])
def test_a_gzip_file_imports_as_the_plain_file(store: SessionStore, tmp_path: Path, fragment: str) -> None:
    plain = tmp_path / "plain.json"
    plain.write_bytes(read_bytes(corpus_file(fragment)))
    planned = plan_document(read_document(plain))
    compressed = tmp_path / "compressed.data"  # told from the content (the gzip magic), not from the name
    compressed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (compressed, corpus_file(fragment)):
        document, expected = read_document(path), read_document(plain)
        assert (document.name, document.format) == (str(path), expected.format)
        assert (document.data, document.warnings) == (expected.data, expected.warnings)
    assert import_file(store, compressed) == [s.id for s in planned]
    for session in planned:
        assert comparable(store.messages(session.id)) == comparable(session.history)
    assert import_file(store, plain) == []  # the same sessions: already there


def _gzip_corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


CORRUPT_GZIP = {
    "magic-only": lambda data: b"\x1f\x8b",
    "not-deflate": lambda data: b"\x1f\x8b" + b"not a gzip stream at all" * 4,
    "truncated": lambda data: data[: len(data) // 2],
    "flipped-byte": lambda data: _gzip_corrupt(data, len(data) // 2),
    "bad-crc": lambda data: _gzip_corrupt(data, len(data) - 6),
}


@pytest.mark.parametrize("case", sorted(CORRUPT_GZIP))
def test_a_corrupt_gzip_file_is_refused_and_nothing_is_written(store: SessionStore, tmp_path: Path, case: str) -> None:
    import_file(store, corpus_file("nimble-pixel"))  # something in the database to stay unchanged
    before = row_counts(store)
    path = tmp_path / f"{case}.jsonl.gz"
    path.write_bytes(CORRUPT_GZIP[case](gzip.compress(read_bytes(corpus_file("2cba43de")))))
    for attempt in (lambda: import_file(store, path), lambda: import_files(store, [corpus_file("9dd861b1"), path])):
        with pytest.raises(ImportFormatError, match="corrupt gzip") as caught:
            attempt()
        assert str(caught.value).startswith(f"{path}: ")
        assert row_counts(store) == before


def test_a_gzip_file_holding_no_session_is_refused_like_a_plain_one(store: SessionStore, tmp_path: Path) -> None:
    path = tmp_path / "notes.gz"
    path.write_bytes(gzip.compress(b"hello world\nthis is not json\n"))
    before = row_counts(store)
    with pytest.raises(ImportFormatError, match="invalid JSON") as caught:
        import_file(store, path)
    assert str(caught.value).startswith(f"{path}: ")
    assert row_counts(store) == before


# -- the whole corpus, on both backends ---------------------------------------------------------------------



@pytest.mark.slow
def test_every_corpus_file_imports_as_planned(corpus) -> None:
    reports = {Path(r.path).name: r for r in corpus.reports}
    assert set(reports) == {p.name for p in all_files()}
    assert {r.format for name, r in reports.items() if name.endswith(".json.gz")} == {"opencode"}
    assert {r.format for name, r in reports.items() if name.endswith(".jsonl.gz")} == {"claude-code"}
    assert reports[corpus_file("c001d2c0").name].created == []  # summary lines only
    with corpus.open() as store:
        for path in all_files():
            planned = plan_document(read_document(path))
            assert reports[path.name].created == [s.id for s in planned]
            for session in planned:
                # the store kept exactly what the importer chose: ids, times, tokens, tool states, metadata
                assert comparable(store.messages(session.id)) == comparable(session.history), path.name


@pytest.mark.slow
def test_corpus_row_counts(corpus) -> None:
    with corpus.open() as store:
        counts = row_counts(store)
        opencode_ids = [read_export(p)["info"]["id"] for p in opencode_files()]
        opencode_messages = sum(len(store.messages(i)) for i in opencode_ids)
    assert opencode_messages == 494  # every entry of the 12 exports
    assert counts["sessions"] == 12 + 9 + 1  # 9 Claude Code files with a conversation, one with a sub-agent
    assert counts["tool_states"] == 556 + 1013  # every tool part / tool_use block
    assert counts["tool_outputs"] == 544 + (1011 - 139)  # completed calls: OpenCode's, and results not is_error
    assert counts["compactions"] == 0  # markers are the compaction engine's; boundaries come from the rows
