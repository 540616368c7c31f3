"""``brutus import`` of a Claude Code transcript that grew since it was imported (new entries appended, the
session equal to a single import of the whole file), of one whose earlier entries changed (refused, nothing
written), and of one whose last line a crash cut short (imported up to it, with a warning), on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brutus import SessionStore
from brutus.importers.grown import comparable

from cli_helpers import run
from corpus_helpers import corpus_file, read_text
from import_helpers import row_counts

MAIN = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d"
CHILD = f"{MAIN}_eb46ebab"


def _lines(fragment: str) -> list[str]:
    return read_text(corpus_file(fragment)).splitlines(keepends=True)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _import(db: str, path: Path, *extra: str) -> dict:
    result = run("import", str(path), "--db", db, "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _state(db: str) -> dict:
    """Every session of the database: its row (times, title, counts) and what its messages say."""
    with SessionStore.open(db) as store:
        return {s.id: (s, [comparable(m) for m in store.messages(s.id)]) for s in store.list_sessions()}


@pytest.mark.parametrize("first", [7, 120, 300, 480, 608])  # mid-turn, before and after the sidechain, a line short
def test_a_grown_transcript_appends_what_is_new(store_url: str, tmp_path: Path, first: int) -> None:
    lines = _lines("0a725fb5")
    grown = _write(tmp_path / "session.jsonl", lines[:first])
    _import(store_url, grown)
    before = _state(store_url)[MAIN][0].message_count

    _write(grown, lines)  # the agent went on writing the same file
    report = _import(store_url, grown)
    assert MAIN in report["updated"] + report["skipped"] and report["warnings"] == []
    assert _state(store_url)[MAIN][0].message_count == 213 > before

    single = tmp_path / "single.db"
    _import(f"sqlite:///{single}", grown)
    assert _state(store_url) == _state(f"sqlite:///{single}")  # messages, parts, times, titles: all equal


def test_the_grown_report_and_an_unchanged_file(store_url: str, tmp_path: Path) -> None:
    lines = _lines("0a725fb5")
    path = _write(tmp_path / "session.jsonl", lines[:30])
    assert _import(store_url, path)["files"][0]["messages"] == 12
    _write(path, lines)
    result = run("import", str(path), "--db", store_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{MAIN}  updated (214 messages written from session.jsonl, claude-code, which grew since)",
        f"{CHILD}  imported (a new sub-agent session, from session.jsonl, claude-code)",
    ]
    with SessionStore.open(store_url) as store:
        counts = row_counts(store)
    again = _import(store_url, path)
    assert (again["created"], again["updated"], again["skipped"]) == ([], [], [MAIN, CHILD])
    with SessionStore.open(store_url) as store:
        assert row_counts(store) == counts  # nothing written


def test_a_transcript_whose_earlier_entries_changed_is_refused(store_url: str, tmp_path: Path) -> None:
    lines = _lines("2cba43de")
    path = _write(tmp_path / "session.jsonl", lines[:20])
    _import(store_url, path)
    before = _state(store_url)
    entry = json.loads(lines[1])
    entry["message"]["content"] = "a different prompt"
    _write(path, [lines[0], json.dumps(entry) + "\n", *lines[2:]])
    result = run("import", str(path), "--db", store_url)
    assert result.returncode == 1
    assert result.stderr.startswith(f"brutus: error: {path}: session ses_2cba43de-c8d2-4a69-add8-9fae3ad93900 was imported")
    assert "earlier entries changed" in result.stderr and "brutus sessions delete" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _state(store_url) == before


def test_a_session_compacted_in_brutus_is_not_rewritten(store_url: str, tmp_path: Path) -> None:
    lines = _lines("2cba43de")
    path = _write(tmp_path / "session.jsonl", lines[:20])
    _import(store_url, path)
    assert run("compact", "ses_2cba43de-c8d2-4a69-add8-9fae3ad93900", "--db", store_url).returncode == 0
    before = _state(store_url)
    _write(path, lines)
    result = run("import", str(path), "--db", store_url)
    assert result.returncode == 1 and "was added in brutus after the import" in result.stderr
    assert _state(store_url) == before


def test_a_last_line_cut_short_is_left_out_with_a_warning(store_url: str, tmp_path: Path) -> None:
    lines = _lines("2cba43de")
    cut = _write(tmp_path / "crashed.jsonl", [*lines[:-1], lines[-1][: len(lines[-1]) // 2]])
    whole = _write(tmp_path / "whole.jsonl", lines[:-1])

    result = run("import", str(cut), "--db", store_url)
    assert result.returncode == 0
    assert result.stderr == f"brutus: warning: {cut}: line 28 is cut short (the file ends inside it: the agent was stopped mid-write?); read up to line 27\n"
    report = _import(store_url, cut)  # again, as JSON: nothing new, the warning still said
    assert report["warnings"] == report["files"][0]["warnings"] == [result.stderr.removeprefix("brutus: warning: ").strip()]

    single = tmp_path / "single.db"
    _import(f"sqlite:///{single}", whole)
    assert _state(store_url) == _state(f"sqlite:///{single}")  # as if the file ended before the cut line

    _write(cut, lines)  # the agent came back and finished the line
    assert _import(store_url, cut)["warnings"] == []
    fresh = tmp_path / "fresh.db"
    _import(f"sqlite:///{fresh}", cut)
    assert _state(store_url) == _state(f"sqlite:///{fresh}")


def test_a_broken_line_in_the_middle_is_still_an_error(store_url: str, tmp_path: Path) -> None:
    lines = _lines("2cba43de")
    path = _write(tmp_path / "broken.jsonl", [*lines[:5], lines[5][:40] + "\n", *lines[6:]])
    result = run("import", str(path), "--db", store_url)
    assert result.returncode == 1 and f"{path}: line 6: invalid JSON" in result.stderr
    assert _state(store_url) == {}


def test_a_line_cut_anywhere_is_read_up_to_it() -> None:
    from brutus.importers import parse_document

    lines = _lines("2cba43de")
    last = lines[-1].rstrip("\n")
    whole = parse_document("".join(lines[:-1]).encode("utf-8"), name="f")
    for at in range(1, len(last), 7):  # inside keys, strings, numbers, between tokens
        document = parse_document(("".join(lines[:-1]) + last[:at]).encode("utf-8"), name="f")
        assert document.data == whole.data, at
        assert document.warnings == ("f: line 28 is cut short (the file ends inside it: the agent was stopped mid-write?); read up to line 27",)


def test_a_file_imported_before_brutus_priced_claude_code_is_still_already_imported(store_url: str, tmp_path: Path) -> None:
    """The cost is brutus's own pricing of the usage, not what the file says: a session imported when it was
    not priced (or priced at other rates) is the same session, and re-importing the file writes nothing."""
    from sqlalchemy import text

    path = _write(tmp_path / "session.jsonl", _lines("2cba43de"))
    _import(store_url, path)
    with SessionStore.open(store_url) as store:
        with store.engine.begin() as conn:
            changed = conn.execute(text("UPDATE messages SET cost = 0 WHERE cost > 0")).rowcount
        assert changed > 0
        counts = row_counts(store)
    again = _import(store_url, path)
    assert again["skipped"] and not again["updated"] and not again["created"]
    with SessionStore.open(store_url) as store:
        assert row_counts(store) == counts
