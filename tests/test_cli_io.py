"""``brutus import`` and ``brutus export`` through the real entry point (``python -m brutus``), on SQLite and
PostgreSQL: new ids printed, no duplicates, one-line errors with the database unchanged, export → import."""

from __future__ import annotations

import json
from pathlib import Path

from corpus_helpers import corpus_file, read_bytes, read_export
from import_helpers import fresh_url
from cli_helpers import run

NIMBLE = "ses_39b4c1891ffezxPVc5OPmcqF33"
CC_SMALL = "ses_2cba43de-c8d2-4a69-add8-9fae3ad93900"


def listed(db: str) -> list[str]:
    result = run("sessions", "list", "--db", db, "--json")
    assert result.returncode == 0, result.stderr
    return sorted(s["id"] for s in json.loads(result.stdout))


def test_import_prints_the_new_ids_and_skips_what_is_there(store_url: str) -> None:
    files = [str(corpus_file("nimble-pixel")), str(corpus_file("2cba43de")), str(corpus_file("c001d2c0"))]
    first = run("import", *files, "--db", store_url, "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["created"] == [NIMBLE, CC_SMALL] and report["skipped"] == []
    assert [(f["format"], f["messages"]) for f in report["files"]] == [("opencode", 8), ("claude-code", 18), ("claude-code", 0)]
    assert listed(store_url) == sorted([NIMBLE, CC_SMALL])

    again = run("import", *files, "--db", store_url)
    assert again.returncode == 0, again.stderr
    assert f"{NIMBLE}  already imported" in again.stdout and f"{CC_SMALL}  already imported" in again.stdout
    assert "nothing to import" in again.stdout
    assert listed(store_url) == sorted([NIMBLE, CC_SMALL])


def test_import_for_people_names_each_session(store_url: str) -> None:
    path = corpus_file("0a725fb5")
    result = run("import", str(path), "--db", store_url)
    assert result.returncode == 0, result.stderr
    main, child = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d", "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d_eb46ebab"
    assert result.stdout.splitlines() == [
        f"{main}  imported (225 messages in 2 sessions from {path.name}, claude-code)",
        f"{child}  imported (sub-agent session of {main})",
    ]


def test_malformed_file_exits_non_zero_with_one_line_and_imports_nothing(store_url: str, tmp_path: Path) -> None:
    run("import", str(corpus_file("9dd861b1")), "--db", store_url)
    before = listed(store_url)
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(read_bytes(corpus_file("nimble-pixel"))[:5000])
    for bad, message in ((truncated, "truncated?"), (tmp_path / "missing.json", "cannot read the file")):
        result = run("import", str(corpus_file("nimble-pixel")), str(bad), "--db", store_url)
        assert result.returncode == 1
        assert result.stderr.startswith(f"brutus: error: {bad}: ") and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert listed(store_url) == before  # the good file before it was not imported either


def test_export_to_a_file_and_import_elsewhere(store_url: str, backend: str, tmp_path_factory, pg_server, tmp_path: Path) -> None:
    assert run("import", str(corpus_file("2cba43de")), "--db", store_url).returncode == 0
    out = tmp_path / "exported.json"
    result = run("export", CC_SMALL, "-o", str(out), "--db", store_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"exported {CC_SMALL} (18 messages) to {out}"
    assert json.loads(out.read_text(encoding="utf-8"))["info"]["id"] == CC_SMALL

    elsewhere = fresh_url(backend, tmp_path_factory, pg_server)
    imported = run("import", str(out), "--db", elsewhere, "--json")
    assert json.loads(imported.stdout)["created"] == [CC_SMALL]
    full = [run("show", CC_SMALL, "--full", "--json", "--db", db).stdout for db in (store_url, elsewhere)]
    assert json.loads(full[0]) == json.loads(full[1]) and len(json.loads(full[0])) == 18


def test_export_to_standard_output(store_url: str) -> None:
    run("import", str(corpus_file("nimble-pixel")), "--db", store_url)
    result = run("export", NIMBLE, "--db", store_url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == read_export(corpus_file("nimble-pixel"))


def test_export_errors_are_one_line(store_url: str, tmp_path: Path) -> None:
    missing = run("export", "ses_nope", "--db", store_url)
    assert missing.returncode == 1 and missing.stderr.strip() == "brutus: error: session not found: 'ses_nope'"
    run("import", str(corpus_file("nimble-pixel")), "--db", store_url)
    unwritable = run("export", NIMBLE, "-o", str(tmp_path / "no" / "such" / "dir.json"), "--db", store_url)
    assert unwritable.returncode == 1 and "brutus: error: cannot write" in unwritable.stderr
    assert "Traceback" not in unwritable.stderr
