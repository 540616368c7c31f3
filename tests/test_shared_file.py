"""Two stores on one SQLite file in one process lose no acknowledged write (issue 31), and brutus never
opens the database's files with a plain descriptor beside its connections.

The run: process A opens a store and writes 150 messages; A opens a second store on the same file (sync,
async, or the CLI's commands in process); process B opens the file, writes 300 messages and closes its
store; A writes 150 more, each acknowledged, and ends without closing anything. Before the fix, A's second
open read the file's header with ``open()``/``close()``, which released every SQLite lock A held on it; B,
closing, took itself for the last user, checkpointed and removed the WAL and ``-shm`` under A, and A's last
150 messages were gone (450 of 600 here).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from brutus import CompactionInProgress, InvalidInput, SessionStore
from brutus.compaction.locks import compaction_lock, lock_file
from brutus.importers import import_file
from cli_helpers import run


WORKER = Path(__file__).with_name("shared_file_worker.py")


def worker(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), *args], text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


@pytest.mark.parametrize("second", ["sync", "async", "cli"])
def test_a_second_store_in_the_process_loses_nothing(tmp_path: Path, second: str) -> None:
    path = tmp_path / "agent.db"
    a = worker(str(path), "first", second, "150")
    assert a.stdout is not None and a.stdin is not None
    first = json.loads(a.stdout.readline())
    assert a.stdout.readline().strip() == "ready", a.stderr.read() if a.stderr else ""
    b = subprocess.run([sys.executable, str(WORKER), str(path), "other", "300"], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    other = json.loads(b.stdout)
    a.stdin.write("go\n")
    a.stdin.flush()
    seen = json.loads(a.stdout.readline())
    assert a.wait(timeout=120) == 0, a.stderr.read() if a.stderr else ""

    assert seen == {"shm_before": True, "shm_after": True}  # B, closing, left A's shared memory alone
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        counts = dict(conn.execute("SELECT session_id, count(*) FROM messages GROUP BY session_id").fetchall())
        texts = {r[0] for r in conn.execute("SELECT json_extract(data, '$.text') FROM parts WHERE session_id = ?", (first["session"],))}
    finally:
        conn.close()
    assert counts == {first["session"]: 300, other["session"]: 300}  # 600 of 600 acknowledged
    assert texts == {f"A before {i}" for i in range(150)} | {f"A after {i}" for i in range(150)}


def test_import_and_export_refuse_the_files_of_a_database_in_use(tmp_path: Path) -> None:
    """Reading the database as an import source would drop the process's locks on it, writing an export over
    it would destroy it: both are refused before the file is opened, and the database is as it was."""
    path = tmp_path / "agent.db"
    with SessionStore.open(f"sqlite:///{path}") as store:
        session = store.create_session(title="kept")
        store.append_message(session.id, "user")
        for name in ("agent.db", "agent.db-wal", "agent.db-shm"):
            with pytest.raises(InvalidInput, match="a file of a brutus database in use"):
                import_file(store, tmp_path / name)
        link = tmp_path / "link.db"
        link.symlink_to(path)
        with pytest.raises(InvalidInput, match="in use"):
            import_file(store, link)
        result = run("export", session.id, "-o", path, "--db", path)
        assert result.returncode == 1 and "brutus will not write it" in result.stderr
        result = run("import", path, "--db", path)
        assert result.returncode == 1 and "brutus will not read it" in result.stderr
        assert len(store.messages(session.id)) == 1 and store.get_session(session.id).title == "kept"
    with SessionStore.open(f"sqlite:///{path}", read_only=True) as store:
        report = store.check()
        assert report.ok and (report.sessions, report.messages) == (1, 1)


def test_two_stores_in_one_process_share_the_compaction_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One compaction per session, whichever store (or spelling of the path) asks: the lock file is named from
    the database's real path, and ``flock`` locks of two open files exclude each other in one process too."""
    path = tmp_path / "agent.db"
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "elsewhere" / "link.db"
    link.symlink_to(path)
    one = SessionStore.open(f"sqlite:///{path}")
    monkeypatch.chdir(tmp_path)
    two = SessionStore.open("sqlite:///agent.db")  # a relative spelling
    three = SessionStore.open(f"sqlite:///{link}")
    try:
        session = one.create_session()
        assert lock_file(two.engine.url.database, session.id) == lock_file(three.engine.url.database, session.id)
        with compaction_lock(one.engine, session.id):
            for other in (two, three):
                with pytest.raises(CompactionInProgress):
                    with compaction_lock(other.engine, session.id):
                        pass
        with compaction_lock(three.engine, session.id):  # released: the next one takes it
            pass
        monkeypatch.chdir(tmp_path / "elsewhere")  # a later working directory changes nothing
        assert Path(two.engine.url.database) == path
        assert two.get_session(session.id).id == session.id
    finally:
        for store in (one, two, three):
            store.close()
