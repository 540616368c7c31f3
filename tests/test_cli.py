"""The CLI through its real entry point: demo, sessions list, show, db commands, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from brutus.cli.app import cli

from cli_helpers import run


def run_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``python -m brutus``: the smoke test of the installed entry point."""
    env = {k: v for k, v in os.environ.items() if k != "BRUTUS_DEBUG"}
    return subprocess.run([sys.executable, "-m", "brutus", *args], capture_output=True, text=True, env=env, timeout=120)


def test_demo_show_and_list(store_url: str) -> None:
    demo = run("demo", "--db", store_url, "--json")
    assert demo.returncode == 0, demo.stderr
    report = json.loads(demo.stdout)
    session_id = report["session_id"]
    assert report["steps"] == 23 and report["limits"]["context"] == 36_000
    assert report["policy"] == "on-compaction" and report["compact_at"] == 21_600  # 0.8 of 36,000 less the output reserve
    assert report["prunes"] == [] and [c["step"] for c in report["compactions"]] == [7, 17]
    assert report["max_view_tokens"] < report["max_original_tokens"]

    listed = run("sessions", "list", "--db", store_url, "--json")
    assert [s["id"] for s in json.loads(listed.stdout)] == [session_id]

    view = json.loads(run("show", session_id, "--db", store_url, "--json").stdout)
    assert len(view) == report["final_view_messages"]
    assert [p["type"] for p in view[0]["parts"]] == ["compaction"] and view[1]["info"]["summary"] is True
    people = run("show", session_id, "--db", store_url, "--full")
    assert people.returncode == 0 and "tool glob [completed]" in people.stdout


def test_demo_runs_on_a_temporary_database(tmp_path) -> None:
    result = run("demo", env={"BRUTUS_DATABASE_URL": f"sqlite:///{tmp_path / 'default.db'}", "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "stored in" in result.stdout and not (tmp_path / "default.db").exists()
    assert "2 compactions, 0 stalls; no tool output pruned" in result.stdout and "36.0K ┤───" in result.stdout


def test_db_commands(db_url: str, backend: str) -> None:
    current = run("db", "current", "--db", db_url, "--json")
    behind = run("db", "check", "--db", db_url)
    if backend == "sqlite":  # no file yet: nothing is created to answer
        assert current.returncode == 1 and "no brutus database at" in current.stderr
        assert behind.returncode == 1 and "no brutus database at" in behind.stderr
    else:  # an empty PostgreSQL database
        assert json.loads(current.stdout)["current"] is None
        assert behind.returncode == 1 and "brutus db upgrade" in behind.stderr
    assert run("db", "upgrade", "--db", db_url).returncode == 0
    assert run("db", "check", "--db", db_url).returncode == 0
    assert run("db", "downgrade", "base", "--db", db_url).returncode == 0
    assert json.loads(run("db", "current", "--db", db_url, "--json").stdout)["current"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (("show", "ses_missing"), "no brutus database at"),
        (("show", "ses_x", "--db", "mysql://nowhere/db"), "supports SQLite and PostgreSQL"),
        (("show", "ses_x", "--db", "postgresql://nobody@127.0.0.1:1/none"), "cannot open postgresql://nobody@127.0.0.1:1/none: Connection refused"),
        (("sessions", "list", "--limit", "0"), "Invalid value"),
        (("nonsense",), "No such command"),
    ],
)
def test_errors_are_one_line_without_traceback(args, message, tmp_path) -> None:
    result = run(*args, env={"BRUTUS_DATABASE_URL": f"sqlite:///{tmp_path / 'e.db'}"})
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "sqlalchemy" not in result.stderr.lower()


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found += _commands(command, prefix + name + " ")
    return found


def test_every_command_has_help() -> None:
    for name, command in _commands(cli):
        assert command.help, f"`brutus {name}` has no help text"
        result = run(*name.split(), "--help")
        assert result.returncode == 0 and "Usage" in result.stdout


def test_sessions_delete(store_url: str) -> None:
    from corpus_helpers import corpus_file

    created = json.loads(run("import", str(corpus_file("0a725fb5")), "--db", store_url, "--json").stdout)["created"]
    main, child = created  # the main session and its sub-agent's
    refused = run("sessions", "delete", main, "--db", store_url)  # no terminal to ask on, no --yes
    assert refused.returncode == 1 and "needs --yes" in refused.stderr
    assert len(json.loads(run("sessions", "list", "--db", store_url, "--json").stdout)) == 2
    done = run("sessions", "delete", main, "--yes", "--db", store_url)
    assert done.returncode == 0 and done.stdout.strip() == f"deleted {main} and 1 child session"
    assert json.loads(run("sessions", "list", "--db", store_url, "--json").stdout) == []
    assert run("check", "--db", store_url).returncode == 0  # nothing orphaned
    again = run("sessions", "delete", main, "--yes", "--db", store_url)
    assert again.returncode == 1 and "session not found" in again.stderr


def test_the_installed_entry_point_runs_in_a_process_of_its_own(tmp_path) -> None:
    """The one CLI test that starts ``python -m brutus`` (the others run ``main`` in-process): a command,
    its output, a one-line error and the exit codes, as a shell sees them."""
    db = f"sqlite:///{tmp_path / 'smoke.db'}"
    made = run_process("db", "upgrade", "--db", db)
    assert made.returncode == 0, made.stderr
    assert json.loads(run_process("sessions", "list", "--db", db, "--json").stdout) == []
    missing = run_process("show", "ses_missing", "--db", db)
    assert missing.returncode == 1 and missing.stderr == "brutus: error: session not found: 'ses_missing'\n"
