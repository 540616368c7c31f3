"""The importer registry: a third format, written here in a few lines and registered, is detected from its
content and imported through ``import_files`` and ``brutus import`` like the built-in ones (all or nothing,
skipped the second time, read back exactly); a file no importer takes is refused as before, with what it is
and what each registered importer looks for (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from brutus import SessionStore
from brutus.errors import ImportFormatError
from brutus.importers import (
    Document,
    ImportedSession,
    Importer,
    ImportReport,
    detect_format,
    import_files,
    parse_document,
    plan_document,
    register_importer,
    unregister_importer,
)
from brutus.importers.plan import SessionExists
from brutus.models import Message, MessageTime, MessageWithParts, TextPart

from cli_helpers import run
from corpus_helpers import corpus_file
from import_helpers import comparable, row_counts

SESSION = "ses_tiny0001"
TINY = """tiny-transcript v1 ses_tiny0001
title: The flaky test
1700000000000 user: the test at line 12 fails one time in ten
1700000004000 assistant: it sleeps instead of waiting; inject the clock
1700000009000 user: done, thanks — ünïcode kept
"""
_TURN = re.compile(r"(\d+) (user|assistant): (.*)")


class TinyImporter(Importer):
    """A made-up format: a header line naming the session, a title line, then one ``MILLIS ROLE: TEXT`` per message."""

    name = "tiny"
    reads = "text"
    describes = "a tiny transcript ('tiny-transcript v1' first)"

    def detect(self, data: str) -> bool:
        return data.startswith("tiny-transcript v1 ")

    def read(self, data: str, *, name: str) -> tuple[str, str, list[tuple[int, str, str]]]:
        header, title, *lines = data.splitlines()
        turns = []
        for number, line in enumerate(lines, start=3):
            match = _TURN.fullmatch(line)
            if match is None:
                raise ImportFormatError(f"{name}: line {number}: not 'MILLIS ROLE: TEXT'")
            turns.append((int(match[1]), match[2], match[3]))
        return header.split(" ")[2], title.removeprefix("title: "), turns

    def plan(self, document: Document, *, exists: SessionExists) -> list[ImportedSession]:
        session_id, title, turns = document.data
        history = [
            MessageWithParts(
                info=Message(id=f"msg_{session_id}_{n}", session_id=session_id, role=role, time=MessageTime(created=at)),
                parts=[TextPart(id=f"prt_{session_id}_{n}", text=text)],
            )
            for n, (at, role, text) in enumerate(turns)
        ]
        return [ImportedSession(session_id, title, history=history, created_at=turns[0][0], updated_at=turns[-1][0])]


def tiny_text(store: SessionStore, session_id: str) -> str:
    """The session written back in the tiny format."""
    session = store.get_session(session_id)
    lines = [f"tiny-transcript v1 {session.id}", f"title: {session.title}"]
    lines += [f"{m.info.time.created} {m.info.role}: {m.parts[0].text}" for m in store.messages(session_id)]
    return "\n".join(lines) + "\n"



@pytest.fixture
def tiny() -> Iterator[None]:
    register_importer(TinyImporter())
    try:
        yield
    finally:
        unregister_importer("tiny")


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.json"  # the name says JSON: the content decides
    path.write_text(TINY, encoding="utf-8")
    return path


def assert_round_trip(store: SessionStore, path: Path) -> None:
    assert tiny_text(store, SESSION) == TINY
    session = store.get_session(SESSION)
    assert (session.title, session.created_at, session.updated_at) == ("The flaky test", 1700000000000, 1700000009000)
    (planned,) = plan_document(parse_document(path.read_bytes(), name=str(path)))
    assert comparable(store.messages(SESSION)) == comparable(planned.history)


def test_a_registered_format_imports_through_import_files(store: SessionStore, tiny: None, tiny_file: Path) -> None:
    assert detect_format(tiny_file) == detect_format(TINY) == "tiny"
    reports = import_files(store, [tiny_file, corpus_file("2cba43de")])
    assert reports[0] == ImportReport(path=str(tiny_file), format="tiny", created=[SESSION], messages=3)
    assert reports[1].format == "claude-code" and len(reports[1].created) == 1
    assert_round_trip(store, tiny_file)

    before = row_counts(store)
    again = import_files(store, [tiny_file])
    assert again == [ImportReport(path=str(tiny_file), format="tiny", skipped=[SESSION])]
    assert row_counts(store) == before


def test_a_malformed_file_of_a_registered_format_writes_nothing(store: SessionStore, tiny: None, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(TINY + "yesterday user: when?\n", encoding="utf-8")
    before = row_counts(store)
    with pytest.raises(ImportFormatError, match=f"^{re.escape(str(bad))}: line 6: not 'MILLIS ROLE: TEXT'$"):
        import_files(store, [corpus_file("nimble-pixel"), bad])
    assert row_counts(store) == before


def test_a_registered_format_imports_through_the_cli(store_url: str, tiny: None, tiny_file: Path) -> None:
    first = run("import", str(tiny_file), "--db", store_url)
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == f"{SESSION}  imported (3 messages from notes.json, tiny)\n"
    again = run("import", str(tiny_file), "--db", store_url, "--json")
    assert (again.returncode, again.stderr) == (0, "")
    assert json.loads(again.stdout) == {
        "created": [],
        "updated": [],
        "skipped": [SESSION],
        "warnings": [],
        "files": [
            {"path": str(tiny_file), "format": "tiny", "created": [], "updated": [], "skipped": [SESSION], "messages": 0, "warnings": []}
        ],
    }
    with SessionStore.open(store_url) as store:
        assert_round_trip(store, tiny_file)


class GrowingTinyImporter(TinyImporter):
    """The tiny format whose files grow: importing one again appends the new turns."""

    @staticmethod
    def update(store: SessionStore, planned: ImportedSession, *, name: str) -> int:
        have = len(store.messages(planned.id))
        store.append_messages(planned.id, planned.history[have:])
        return len(planned.history) - have


def test_a_registered_format_whose_files_grow_is_brought_up_to_date(store: SessionStore, tiny_file: Path) -> None:
    register_importer(GrowingTinyImporter())
    try:
        import_files(store, [tiny_file])
        tiny_file.write_text(TINY + "1700000012000 assistant: good\n", encoding="utf-8")
        again = import_files(store, [tiny_file])
        assert again == [ImportReport(path=str(tiny_file), format="tiny", updated=[SESSION], messages=1)]
        assert tiny_text(store, SESSION) == tiny_file.read_text(encoding="utf-8")
        assert import_files(store, [tiny_file]) == [ImportReport(path=str(tiny_file), format="tiny", skipped=[SESSION])]
    finally:
        unregister_importer("tiny")


UNKNOWN = {
    "object": (
        b'{"name": "not a session", "items": [1, 2]}',
        "a JSON object that is neither an OpenCode export ({info, messages}) nor a Claude Code session entry "
        "(a 'type' with 'uuid' or 'sessionId'); its keys: items, name",
    ),
    "list": (
        b"[1, 2]",
        "a JSON list, not an OpenCode export ({info, messages}) nor a Claude Code session entry "
        "(a 'type' with 'uuid' or 'sessionId')",
    ),
    "json-lines": (b'{"a": 1}\n{"b": 2}\n', "JSON Lines, but no line is a Claude Code session entry (a 'type' with 'uuid' or 'sessionId')"),
    "text": (TINY.encode("utf-8"), "invalid JSON: Expecting value (line 1, column 1)"),
}


@pytest.mark.parametrize("case", sorted(UNKNOWN))
def test_a_file_no_importer_takes_is_refused_as_before(store: SessionStore, tmp_path: Path, case: str) -> None:
    data, message = UNKNOWN[case]
    path = tmp_path / "unknown.jsonl"
    path.write_bytes(data)
    before = row_counts(store)
    register_importer(TinyImporter())
    unregister_importer("tiny")  # registered and gone again: as if it never was
    with pytest.raises(ImportFormatError) as caught:
        import_files(store, [corpus_file("nimble-pixel"), path])
    assert str(caught.value) == f"{path}: {message}"
    assert row_counts(store) == before


def test_the_error_names_every_registered_format(tiny: None) -> None:
    with pytest.raises(ImportFormatError) as caught:
        parse_document(b"[1, 2]", name="f")
    assert str(caught.value) == (
        "f: a JSON list, not an OpenCode export ({info, messages}) nor a Claude Code session entry "
        "(a 'type' with 'uuid' or 'sessionId') nor a tiny transcript ('tiny-transcript v1' first)"
    )
