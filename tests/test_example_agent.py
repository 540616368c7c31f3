"""``examples/coding_agent.py`` runs offline (the fake Messages API) and resumes its session by id."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from brutus import SessionStore

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "coding_agent.py"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_the_example_agent_runs_and_resumes(tmp_path: Path) -> None:
    db = str(tmp_path / "agent.db")
    (tmp_path / "hello.py").write_text("print('hi')\n")
    first = run("--db", db, "What is here?", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    session_id = first.stdout.splitlines()[0].removeprefix("session ")
    assert "[list_dir] {'path': '.'}" in first.stdout
    second = run("--db", db, "--session", session_id, "And again?", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    with SessionStore.open(db, read_only=True) as store:
        assert [s.id for s in store.list_sessions()] == [session_id]
        history = store.messages(session_id)
        assert [m.info.role for m in history] == ["user", "assistant", "assistant", "assistant"] * 2
        listed = history[1].parts[1]
        assert listed.tool == "list_dir" and "hello.py" in listed.state.output
