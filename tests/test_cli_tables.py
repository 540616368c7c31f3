"""What the CLI prints for people, at 80 and 160 columns on a terminal and piped to a file: ids and numbers never
split or cut, long text ellipsised, and piped output plain (no box drawing, no colour) and not cut at 80.

A terminal is what rich takes for one: ``TTY_COMPATIBLE=1`` with ``COLUMNS`` for its width (rich's own
documented switches); without them the CliRunner's stdout is a pipe."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from brutus import SessionStore
from brutus.cli.tables import Column, table_widths
from brutus.models import ModelLimits
from brutus.replay import ReplayReport
from cli_helpers import Result, run
from corpus_helpers import corpus_file
from conftest import plain_url

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = set("─│┃━┏┓┗┛┡┩╇╈┳┻╋┼┌┐└┘")
CLAUDE = "0a725fb5"  # a Claude Code session with a sub-agent: the longest ids in the corpus
OPENCODE = "quick-falcon"


def terminal(*args: str, width: int) -> Result:
    """``brutus ARGS`` as a terminal ``width`` columns wide shows it (colour codes removed)."""
    result = run(*args, env={"COLUMNS": str(width), "TTY_COMPATIBLE": "1"})
    return Result(result.returncode, ANSI.sub("", result.stdout), ANSI.sub("", result.stderr), result.args)


def piped(*args: str) -> Result:
    return run(*args, env={"COLUMNS": "80"})  # a COLUMNS setting does not cut what goes to a file


def imported(url: str) -> tuple[str, str, str]:
    """The two corpus files in ``url``: the Claude Code session, its sub-agent session, the OpenCode session."""
    result = run("import", corpus_file(CLAUDE), corpus_file(OPENCODE), "--db", url, "--json")
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)["files"]
    (main, child), (opencode,) = files[0]["created"], files[1]["created"]
    return main, child, opencode


def fits(output: str, width: int) -> None:
    lines = output.splitlines()
    assert lines and all(len(line.rstrip()) <= width for line in lines), max(lines, key=len)


def row_of(output: str, first: str) -> list[str]:
    """The cells of the line that starts with ``first`` (an id: another id may start with it)."""
    found = [line.split() for line in output.splitlines() if line.split()[:1] == [first]]
    assert len(found) == 1, f"{len(found)} lines start with {first!r} in:\n{output}"
    return found[0]


def line_with(output: str, needle: str) -> str:
    found = [line for line in output.splitlines() if needle in line]
    assert found, f"{needle!r} is on no line of:\n{output}"
    return found[0]


# -- the fitting rule, without a database -----------------------------------------------------------------


def test_text_gives_way_and_ids_and_numbers_keep_their_width() -> None:
    columns = [Column("id", "whole"), Column("est. tokens", "number"), Column("title", least=10)]
    rows = [["ses_" + "x" * 40, "1,234,567", "a title much longer than the room it will get"]]
    assert table_widths(columns, rows, 200) == [44, 11, 45]  # everything at its natural width
    assert table_widths(columns, rows, 80) == [44, 11, 80 - 44 - 11 - 6]  # the title takes what is left
    assert table_widths(columns, rows, 60) == [44, 9, 10]  # header wrapped at its space, title at its least


# -- sessions list ------------------------------------------------------------------------------------------


def test_sessions_list_at_80_and_160_columns_and_piped(store_url: str) -> None:
    main, child, opencode = imported(store_url)
    sessions = {s["id"]: s for s in json.loads(run("sessions", "list", "--db", store_url, "--json").stdout)}
    title = sessions[main]["title"]
    assert len(title) > 60

    narrow = terminal("sessions", "list", "--db", store_url, width=80)
    assert narrow.returncode == 0, narrow.stderr
    fits(narrow.stdout, 80)
    for session_id, session in sessions.items():  # the id whole on one line, with its count and time
        assert row_of(narrow.stdout, session_id)[1:4] == [str(session["message_count"]), *session["updated"][:16].split("T")]
    assert title not in narrow.stdout and "…" in line_with(narrow.stdout, title[:20])  # ellipsised
    assert f"sub-agent of {main}"[:40] in narrow.stdout or f"parent {main}"[:40] in narrow.stdout

    wide = terminal("sessions", "list", "--db", store_url, width=160)
    fits(wide.stdout, 160)
    assert title[:30] in " ".join(row_of(wide.stdout, main))  # the title beside the id
    assert row_of(wide.stdout, child)[:5] == [child, str(sessions[child]["message_count"]),
                                              *sessions[child]["updated"][:16].split("T"), main]

    plain = piped("sessions", "list", "--db", store_url)
    assert not BOX & set(plain.stdout) and "\x1b" not in plain.stdout
    lines = plain.stdout.splitlines()
    assert lines[0].split() == ["id", "messages", "updated", "(UTC)", "parent", "title"]
    assert len(lines) == 1 + len(sessions)
    row = next(line for line in plain.stdout.splitlines() if line.startswith(main + " "))
    assert row.endswith(title) and len(row) > 80  # whole, on one line, not cut at 80
    assert row_of(plain.stdout, child)[:5] == [
        child, str(sessions[child]["message_count"]), *sessions[child]["updated"][:16].split("T"), main]


def test_sessions_list_json_has_both_times(store_url: str) -> None:
    imported(store_url)
    for session in json.loads(run("sessions", "list", "--db", store_url, "--json").stdout):
        for ms, iso in (("created_at", "created"), ("updated_at", "updated")):
            moment = datetime.fromisoformat(session[iso])
            assert moment.utcoffset() is not None and moment.utcoffset().total_seconds() == 0
            assert round(moment.timestamp() * 1000) == session[ms]


# -- stats, prune, compact, import, show --------------------------------------------------------------------


def test_stats_at_80_columns_keeps_tool_names_and_numbers_whole(store_url: str) -> None:
    main, _, _ = imported(store_url)
    assert run("compact", main, "--db", store_url).returncode == 0
    stats = json.loads(run("stats", main, "--db", store_url, "--json").stdout)
    for width in (80, 160):
        shown = terminal("stats", main, "--db", store_url, width=width)
        assert shown.returncode == 0, shown.stderr
        fits(shown.stdout, width)
        for tool in stats["tools"]:  # each tool on one line with all its numbers
            cells = line_with(shown.stdout, f"{tool['tool']} ").split()
            assert cells[0] == tool["tool"] and cells[1:] == [
                f"{tool[k]:,}" for k in ("calls", "completed", "errors", "tokens", "output_tokens", "pruned_calls",
                                         "pruned_tokens")]
        transcripts, compaction = stats["compactions"]  # the transcript's own auto-compaction, then brutus's
        assert transcripts["imported"] and line_with(shown.stdout, "(imported)").split()[0] == "(imported)"
        row = line_with(shown.stdout, compaction["id"])
        assert f"{compaction['pre_tokens']:,}" in row and f"{compaction['post_tokens']:,}" in row
    plain = piped("stats", main, "--db", store_url)
    assert not BOX & set(plain.stdout)
    assert max(len(line) for line in plain.stdout.splitlines()) > 80  # the usage line, not wrapped
    row = line_with(plain.stdout, compaction["id"])
    assert row.split()[-2:] == ["manual", "completed"]
    assert line_with(plain.stdout, "(imported)").split()[-2:] == ["auto", "completed"]


def test_import_and_show_lines_wrap_at_words_on_a_terminal(store_url: str) -> None:
    shown = terminal("import", corpus_file(CLAUDE), "--db", store_url, width=80)
    assert shown.returncode == 0, shown.stderr
    fits(shown.stdout, 80)
    main = f"ses_{corpus_file(CLAUDE).name.split('.')[0]}"
    assert line_with(shown.stdout, main).startswith(main)
    assert corpus_file(CLAUDE).name in shown.stdout  # the file name not split
    history = terminal("show", main, "--db", store_url, width=80)
    fits(history.stdout, 80)
    plain = piped("show", main, "--db", store_url)
    assert max(len(line) for line in plain.stdout.splitlines()) > 80


# -- replay, demo -------------------------------------------------------------------------------------------


def test_replay_at_80_columns_and_piped(store_url: str) -> None:
    path = str(corpus_file("quiet-meadow"))
    shown = terminal("replay", path, "--context-limit", "36000", "--db", store_url, width=80)
    assert shown.returncode == 0, shown.stderr
    fits(shown.stdout, 80)
    report = json.loads(run("replay", path, "--context-limit", "36000", "--db", store_url, "--json").stdout)
    for c in report["compactions"]:
        row = line_with(shown.stdout, f"{c['view_before']:,} → {c['view_after']:,}")
        assert row.split()[0] == str(c["step"]) and f"{c['pre_tokens']:,} → {c['post_tokens']:,}" in row
    flat = " ".join(shown.stdout.split())
    assert "usable 27,000: 36,000 less an output reserve of 9,000, a quarter of the limit" in flat
    assert "c compaction" in flat and "┄ the compaction threshold" in flat and "p prune" not in flat

    plain = piped("replay", path, "--context-limit", "36000", "--db", store_url)
    assert "limit 36,000 tokens, usable 27,000: 36,000 less an output reserve of 9,000" in plain.stdout
    legend = line_with(plain.stdout, "context per step")
    chart = [line for line in plain.stdout.splitlines() if "┤" in line]
    assert len(legend) > 80 and all(len(line) > 80 for line in chart)  # one line each, 100 steps' worth wide
    assert not {"┏", "┃", "━"} & set(plain.stdout)


def test_the_usable_limit_of_a_200k_model_with_64k_output() -> None:
    from brutus.cli.replay_output import usable_line

    report = ReplayReport(
        session_id="ses_x", model="claude-sonnet-4-5", limits=ModelLimits(context=200_000, output=64_000),
        usable_tokens=168_000, compact_at=134_400, prune_protect=0, prune_minimum=0, summarizer="extractive",
        steps=0, tool_calls=0, fixed_tokens=0, token_ratio=1.0,
    )
    assert usable_line(report) == (
        "limit 200,000 tokens, usable 168,000: 200,000 less an output reserve of 32,000, the model's 64,000 output "
        "tokens, capped at 32,000 as is_overflow does (seed 004)"
    )
    gpt = report.model_copy(update={"model": "gpt-5", "limits": ModelLimits(context=400_000, input=272_000,
                                                                             output=128_000), "usable_tokens": 272_000})
    assert usable_line(gpt) == "limit 400,000 tokens, usable 272,000: the model's input limit (its 128,000 output tokens come on top)"


def test_demo_at_80_columns(tmp_path: Path) -> None:
    shown = terminal("demo", "--db", f"sqlite:///{tmp_path / 'demo.db'}", width=80)
    assert shown.returncode == 0, shown.stderr
    report, _ = shown.stdout.split("\nstored in ")  # then commands to copy, with this test's long tmp path
    fits(report, 80)
    assert "36.0K ┤───" in shown.stdout


# -- gc --------------------------------------------------------------------------------------------------------


def test_gc_reports_the_size_of_the_whole_database(db_url: str) -> None:
    SessionStore.open(db_url).close()
    imported(db_url)
    done = json.loads(run("gc", "--before", "now", "--db", db_url, "--json").stdout)
    if db_url.startswith("sqlite"):
        path = Path(db_url.removeprefix("sqlite:///"))
        assert done["bytes_after"] == path.stat().st_size + (path.with_name(path.name + "-wal").stat().st_size
                                                             if path.with_name(path.name + "-wal").exists() else 0)
        return
    engine = create_engine(plain_url(db_url.replace("postgresql://", "postgresql+psycopg://", 1)))
    with engine.connect() as connection:
        database = connection.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        outputs = connection.execute(text("SELECT pg_total_relation_size('tool_outputs')")).scalar_one()
        messages = connection.execute(text("SELECT pg_total_relation_size('messages')")).scalar_one()
    engine.dispose()
    assert done["bytes_after"] > outputs + messages  # every table, not tool_outputs alone
    assert abs(done["bytes_after"] - database) <= 1 << 20
    people = run("gc", "--before", "now", "--db", db_url)
    assert "vacuumed: the database" in people.stdout


@pytest.mark.parametrize("width", [80, 160])
def test_replay_compare_fits(store_url: str, width: int) -> None:
    shown = terminal("replay", str(corpus_file("nimble-pixel")), "--context-limit", "24000", "--compare",
                     "--db", store_url, width=width)
    assert shown.returncode == 0, shown.stderr
    fits(shown.stdout, width)
    rows = [line.split() for line in shown.stdout.splitlines()[3:7]]  # the title, the header and its rule before
    assert [row[0] for row in rows] == ["on-compaction", "after-turn", "off", "cold-cache"]
    assert all(len(row) == 6 for row in rows)  # every number whole, on the policy's line
