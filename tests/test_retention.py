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
from brutus.db.engine import WAL_SIZE_LIMIT

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
        store.compact(session_id, FakeSummarizer(), config=SMALL)  # nothing new: a failed marker
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


@pytest.mark.slow
def test_wal_stays_bounded_under_a_long_running_writer(tmp_path: Path) -> None:
    """One store writing 5,000 agent steps (a commit each): SQLite's autocheckpoint (1000 pages) keeps the
    WAL near 4 MB while the database grows past it (measured: 4.2 MB, flat from 5,000 to 20,000 steps)."""
    path = tmp_path / "long.db"
    store = SessionStore.open(f"sqlite:///{path}")
    session_id = store.create_session().id
    page_size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    sizes = []
    for step in range(5_000):
        with store.batch():
            agent_step(store, session_id, str(step))
        if step % 250 == 0:
            sizes.append(_wal(path))
    store.close()
    bound = 2 * 1000 * page_size
    assert max(sizes) <= bound, sizes
    assert max(sizes[len(sizes) // 2 :]) <= max(sizes[: len(sizes) // 2]) + 64 * 1024, sizes  # no upward trend
    assert path.stat().st_size > 2 * max(sizes)  # the database did outgrow it


@pytest.mark.slow
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
