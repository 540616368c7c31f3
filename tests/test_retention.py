"""Retention: ``delete_session`` removes a session and everything in it (its sub-agent sessions too) and
nothing else, on both backends; on SQLite the WAL file stays bounded under a long-running writer and gives
back what a long reader made it grow.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import func, select

from brutus import CompactionStalled, SessionStore
from brutus.db.engine import PAGE_SIZE, WAL_CHECKPOINT, WAL_CHECKPOINT_BYTES, WAL_SIZE_LIMIT

from builders import Msg, Tool, write_history
from crash_writer import SMALL, FakeSummarizer
from integrity import TABLES, dump, integrity_problems
from race_worker import agent_step


def _rich_session(store: SessionStore, title: str) -> str:
    """A session with every kind of row: parts, tool states and outputs (some pruned), a completed and a
    failed compaction, and a sub-agent session with its own messages."""
    spec = []
    for i in range(5):
        spec += [Msg("user", text=f"{title} {i}"), Msg("assistant", text="ok", tools=[Tool("read", output_bytes=6000), Tool("bash", status="error")])]
    session_id = write_history(store, spec, title=title)
    store.prune(session_id, SMALL)
    store.compact(session_id, FakeSummarizer(), config=SMALL)
    with pytest.raises(CompactionStalled):
        store.compact(session_id, FakeSummarizer(), config=SMALL)  # nothing new: refused, no row written
    child = store.create_session(title=f"{title} child", parent_id=session_id)
    agent_step(store, child.id, "sub-agent work")
    return session_id


def _rows_of(store: SessionStore, session_ids: list[str]) -> dict[str, int]:
    counts = {}
    with store.engine.connect() as conn:
        for name, table in TABLES.items():
            if name == "tool_outputs":
                parts = select(TABLES["parts"].c.id).where(TABLES["parts"].c.session_id.in_(session_ids))
                where = table.c.part_id.in_(parts)
            else:
                where = (table.c.id if name == "sessions" else table.c.session_id).in_(session_ids)
            counts[name] = conn.execute(select(func.count()).select_from(table).where(where)).scalar_one()
    return counts


def test_delete_session_cascades_and_touches_nothing_else(store: SessionStore) -> None:
    doomed, kept = _rich_session(store, "doomed"), _rich_session(store, "kept")
    doomed_child = store.list_sessions(parent_id=doomed)[0].id
    kept_child = store.list_sessions(parent_id=kept)[0].id
    assert all(_rows_of(store, [doomed]).values())  # every table holds rows of it
    before = {sid: dump(store.engine, sid) for sid in (kept, kept_child)}
    view = [m.model_dump() for m in store.filter_compacted(kept)]

    store.delete_session(doomed)

    assert _rows_of(store, [doomed, doomed_child]) == {name: 0 for name in TABLES}
    assert {sid: dump(store.engine, sid) for sid in (kept, kept_child)} == before
    assert [m.model_dump() for m in store.filter_compacted(kept)] == view
    assert [s.id for s in store.list_sessions()] and doomed not in [s.id for s in store.list_sessions()]
    assert integrity_problems(store) == []


def test_deleting_a_sub_agent_session_leaves_its_parent(store: SessionStore) -> None:
    parent = _rich_session(store, "parent")
    child = store.list_sessions(parent_id=parent)[0].id
    before = dump(store.engine, parent)
    store.delete_session(child)
    assert _rows_of(store, [child]) == {name: 0 for name in TABLES}
    assert dump(store.engine, parent) == before
    assert integrity_problems(store) == []


def _wal(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _settings(path: Path) -> dict[str, int]:
    store = SessionStore.open(f"sqlite:///{path}")
    store.create_session()
    conn = store._driver_connection()
    found = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_size", "wal_autocheckpoint")}
    store.close()
    return found


def test_a_new_database_has_small_pages_and_a_16_mb_backstop(tmp_path: Path) -> None:
    """A file brutus creates has 2 KB pages (a commit writes whole pages to the WAL); a file created before
    keeps its page size, and the automatic checkpoint (the backstop of the store's checkpoint thread) follows
    it, so a commit checkpoints itself at 16 MB either way."""
    assert _settings(tmp_path / "new.db") == {"page_size": 2048, "wal_autocheckpoint": 8192}
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE made_before (x)")
    conn.close()
    assert _settings(old) == {"page_size": 4096, "wal_autocheckpoint": 4096}
    assert _settings(tmp_path / "new.db")["page_size"] == 2048  # reopened: still what it was made with
    assert PAGE_SIZE * 8192 == WAL_CHECKPOINT_BYTES
    for page_size, statement in WAL_CHECKPOINT.items():  # every size SQLite allows, each at 16 MB
        assert statement == f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_BYTES // page_size}"
    assert sorted(WAL_CHECKPOINT) == [512 << k for k in range(8)]


@pytest.mark.slow
@pytest.mark.usefixtures("plain_outputs")
def test_wal_stays_bounded_under_a_long_running_writer(tmp_path: Path) -> None:
    """One store writing 3,000 agent steps without a pause: the store's thread checkpoints behind the writer,
    and the commit that finds 16 MB in the WAL checkpoints the rest and lets the log start over, so the WAL
    stays at 16 MB (``journal_size_limit`` cuts the file back to it) while the database grows past it."""
    path = tmp_path / "long.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    page_size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    sizes = []
    for step in range(3_000):
        with store.batch():
            agent_step(store, session_id, str(step), output_bytes=12_000)
        if step % 150 == 0:
            sizes.append(_wal(path))
    store.close()
    assert page_size == PAGE_SIZE
    assert max(sizes) <= WAL_CHECKPOINT_BYTES + 1024 * 1024, sizes
    assert max(sizes[len(sizes) // 2 :]) <= max(sizes[: len(sizes) // 2]) + 64 * 1024, sizes  # no upward trend
    assert path.stat().st_size > 2 * max(sizes)  # the database did outgrow it


@pytest.mark.slow
@pytest.mark.usefixtures("plain_outputs")
def test_wal_grown_by_a_reader_is_given_back(tmp_path: Path) -> None:
    """A reader that holds a snapshot keeps checkpoints from restarting the WAL, so it grows while the writer
    goes on. Once the reader is done, the next restart truncates it to ``WAL_SIZE_LIMIT`` (without
    ``journal_size_limit`` the file stayed at its peak: 145 MB after a 12 s polling reader)."""
    path = tmp_path / "reader.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()  # holds its snapshot until COMMIT
    step = 0
    while _wal(path) <= WAL_SIZE_LIMIT * 1.25:
        with store.batch():
            agent_step(store, session_id, str(step), output_bytes=20_000)
        step += 1
    peak = _wal(path)
    reader.execute("COMMIT")
    reader.close()
    for more in range(600):  # past the next autocheckpoint, which can now restart the log
        with store.batch():
            agent_step(store, session_id, f"after {more}", output_bytes=20_000)
    after = _wal(path)  # measured with the store open: closing the last connection removes the file
    store.close()
    assert peak > WAL_SIZE_LIMIT
    assert after <= WAL_SIZE_LIMIT, (peak, after)
    assert os.path.getsize(path) > WAL_SIZE_LIMIT  # the rows went to the database
