"""gc drops in chunks: each chunk of outputs is a transaction of its own and, on SQLite, the WAL is checkpointed
empty after each, so the extra disk gc needs follows a chunk, not the database. A file with
``auto_vacuum = INCREMENTAL`` gets its free pages back in steps. A gc killed (SIGKILL, a real process:
tests/crash_writer.py) at any point leaves a database ``brutus check`` passes, every row as it was but the
outputs gc was asked to drop, whole chunks of which are gone; the next gc drops the rest."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from brutus import SessionStore
from brutus.db import gc_ops
from brutus.db.convert import text_out
from brutus.flows import StorageBytes, Vacuum, drive_flow

from crash_writer import GC_CHUNK_BYTES
from integrity import dump, integrity_problems
from conftest import plain_url

WRITER = str(Path(__file__).with_name("crash_writer.py"))
OLD, NEW, BEFORE = 5, 10**13, 10  # prune marks: long ago, recently; gc drops what was pruned before BEFORE
OLD_OUTPUTS = 8


def _output(name: str) -> str:
    rng = random.Random(name)
    return "".join(f"{name} {i:06d} {rng.getrandbits(64):016x}\n" for i in range(1_800))  # ~50 KB


def _fill(url: str) -> None:
    """Eight outputs pruned long ago, one pruned recently, one not pruned, each named by its call id; the
    search index holds them in one segment (indexed by one search, not in the background indexer's small
    transactions), so what a chunk writes is its own and not FTS5 merging many segments."""
    store = SessionStore.open(url, index_in_background=False)
    session = store.create_session(title="gc")
    user = store.append_message(session.id, "user")
    store.append_part(user.id, {"type": "text", "text": "go"})
    reply = store.append_message(session.id, "assistant", parent_id=user.id)
    for name, compacted in [(f"old{i}", OLD) for i in range(OLD_OUTPUTS)] + [("new", NEW), ("kept", None)]:
        state = {"status": "completed", "input": {"name": name}, "output": _output(name), "title": name,
                 "metadata": {}, "time": {"start": 1, "end": 2, "compacted": compacted}}
        store.append_part(reply.id, {"type": "tool", "call_id": name, "tool": "read", "state": state})
    store.finish_message(reply.id, finish="stop")
    store.search("old0")  # the search index holds the outputs, so a drop takes them out of FTS5 too
    store.close()


def _outputs(url: str) -> dict[str, str]:
    engine = create_engine(plain_url(url))
    try:
        with engine.connect() as conn:
            return {p: text_out(o) for p, o in conn.execute(text("SELECT part_id, output FROM tool_outputs"))}
    finally:
        engine.dispose()


def _search_index_bytes(path: str) -> int:
    """The pages of the FTS5 index's data (what a merge of its segments rewrites at most)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'search_index_data'").fetchone()[0]
    finally:
        conn.close()


def _incremental_file(path: Path) -> None:
    """A new SQLite file set to auto_vacuum = INCREMENTAL before brutus creates its tables."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("DROP TABLE t")
    conn.close()


@pytest.mark.usefixtures("plain_outputs")
def test_gc_commits_chunk_by_chunk_and_keeps_the_wal_to_one_chunk(store_url: str, backend: str, monkeypatch) -> None:
    _fill(store_url)
    names = _names(store_url)
    monkeypatch.setattr(gc_ops, "CHUNK_BYTES", GC_CHUNK_BYTES)
    store = SessionStore.open(store_url)
    path = store.engine.url.database if backend == "sqlite" else None
    seen: list[tuple[str, int]] = []

    def handle(action: Any) -> Any:  # the store's own handler; what each action leaves in the WAL
        outcome = store.run(action)
        wal = os.path.getsize(f"{path}-wal") if path and os.path.exists(f"{path}-wal") else 0
        seen.append((type(action).__name__, wal))
        return outcome

    index_bytes = _search_index_bytes(path) if path else 0
    result = drive_flow(gc_ops.gc_flow(BEFORE, dry_run=False, dialect=backend), handle)
    store.close()
    assert result.parts == OLD_OUTPUTS and result.output_bytes == sum(len(_output(f"old{i}")) for i in range(8))
    left = _outputs(store_url)
    assert {names[p]: o for p, o in left.items()} == {"new": _output("new"), "kept": _output("kept")}
    actions = [name for name, _ in seen]
    if backend == "postgresql":  # the size, 8 chunks and the empty one, VACUUM, the size
        assert actions == ["StorageBytes", *["Tx"] * 9, "Vacuum", "StorageBytes"]
        return
    # the size and free pages, each chunk then a checkpoint, the empty chunk, the size and free pages
    assert actions == ["StorageBytes", "Tx", *["Tx", "StorageBytes"] * 8, "Tx", "StorageBytes", "Tx"]
    chunks = [wal for _, wal in seen[2:18:2]]  # what each chunk's transaction left in the WAL
    # a chunk's own writes (its rows, FTS5's delete markers), but for those where FTS5 merged its segments
    # (automerge, twice at most here; in so small a database a merge rewrites about the whole index, never
    # more: benchmarks/bench_gc.py measures a large one)
    assert len(chunks) == 8 and all(wal > 0 for wal in chunks), seen
    assert sorted(chunks)[-3] < 4 * GC_CHUNK_BYTES, seen
    assert max(chunks) < 4 * GC_CHUNK_BYTES + index_bytes, (index_bytes, seen)
    assert all(wal == 0 for name, wal in seen if name == "StorageBytes")  # checkpointed empty each time
    assert result.bytes_reusable >= 0.9 * result.output_bytes and result.vacuumed is False


@pytest.mark.usefixtures("plain_outputs")
def test_gc_gives_free_pages_back_on_an_incremental_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "incremental.db"
    _incremental_file(path)
    url = f"sqlite:///{path}"
    _fill(url)
    names = _names(url)
    monkeypatch.setattr(gc_ops, "CHUNK_BYTES", GC_CHUNK_BYTES)
    store = SessionStore.open(url)
    index_before = _search_index_bytes(str(path))
    steps: list[Any] = []
    result = drive_flow(
        gc_ops.gc_flow(BEFORE, dry_run=False, dialect="sqlite"),
        lambda action: steps.append(action) or store.run(action),
    )
    store.close()
    assert (result.parts, result.vacuumed, result.bytes_free, result.bytes_reusable) == (8, False, 0, 0)
    # the file shrank without a VACUUM: by the outputs' pages, less what FTS5 wrote to record their deletion
    # (its delete markers and merges: a term a line in these outputs, so about as much as it drops)
    index_growth = _search_index_bytes(str(path)) - index_before
    assert result.bytes_reclaimed + index_growth >= 0.9 * result.output_bytes, (index_growth, result)
    assert result.bytes_after == path.stat().st_size
    vacuums = [i for i, action in enumerate(steps) if isinstance(action, Vacuum)]
    pages = GC_CHUNK_BYTES // sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    assert len(vacuums) >= 2 and all(steps[i] == Vacuum(full=False, pages=pages) for i in vacuums)  # no VACUUM
    assert all(isinstance(steps[i + 1], StorageBytes) for i in vacuums)  # each step checkpointed
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2 and conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    conn.close()
    assert {names[p] for p in _outputs(url)} == {"new", "kept"}


# -- kill -9 ----------------------------------------------------------------------------------------------------

# (file kind, vacuum, statement pattern, nth): die just before that statement
KILLS = {
    "sqlite": [
        ("plain", "0", "DELETE FROM tool_outputs", 1),
        ("plain", "0", "DELETE FROM tool_outputs", 4),
        ("plain", "0", "COMMIT", 3),
        ("plain", "0", "PRAGMA wal_checkpoint", 5),
        ("incremental", "0", "PRAGMA incremental_vacuum", 2),
        ("incremental", "0", "COMMIT", 11),
        ("plain", "1", r"INSERT INTO search_index\(search_index\)", 1),  # the optimize before VACUUM
        ("plain", "1", "VACUUM", 1),
        ("plain", "1", r"INSERT INTO search_keys", 1),  # indexing again after VACUUM
    ],
    "postgresql": [
        ("plain", "0", "DELETE FROM tool_outputs", 2),
        ("plain", "0", "COMMIT", 4),
        ("plain", "0", "VACUUM", 1),
        ("plain", "1", "VACUUM", 1),
    ],
}
KILLS["sqlite"] += [("plain", "0", "", n) for n in random.Random(20261127).sample(range(1, 80), 3)]  # any statement


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A filled SQLite file of each kind, copied (closed) for every kill."""
    found = {}
    for kind in ("plain", "incremental"):
        path = tmp_path_factory.mktemp(f"gc-{kind}") / "brutus.db"
        if kind == "incremental":
            _incremental_file(path)
        _fill(f"sqlite:///{path}")
        found[kind] = path
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("on", "point"), [(on, point) for on, points in KILLS.items() for point in points])
def test_gc_killed_at_any_point_loses_nothing_it_was_not_asked_to_drop(
    on: str, point: tuple[str, str, str, int], originals: dict[str, Path], tmp_path: Path, pg_server: Any
) -> None:
    kind, vacuum, pattern, nth = point
    if on == "sqlite":
        url = f"sqlite:///{tmp_path / 'brutus.db'}"
        shutil.copy(originals[kind], tmp_path / "brutus.db")
    else:
        url = pg_server.new_database()
        _fill(url)
    names = _names(url)
    before_outputs = _outputs(url)
    engine = create_engine(plain_url(url))
    rows = dump(engine, exclude=("tool_outputs",))
    engine.dispose()

    run = subprocess.run([sys.executable, WRITER, url, "gc", "gc", str(BEFORE), vacuum, pattern, str(nth)],
                         capture_output=True, text=True, timeout=300)
    finished = run.stdout.strip() == "gc done"
    assert finished or run.returncode == -signal.SIGKILL, (run.returncode, run.stdout, run.stderr)
    if pattern:  # a named point is reached before gc ends
        assert not finished, f"the kill point {pattern!r} #{nth} never came"

    store = SessionStore.open(url)
    left = _outputs(url)
    dropped = set(before_outputs) - set(left)
    assert store.check().ok
    # the test suite's own stricter rules hold too, but for the outputs gc dropped
    assert sorted(integrity_problems(store)) == sorted(f"tool state {p}: completed without an output" for p in dropped)
    engine = create_engine(plain_url(url))
    assert dump(engine, exclude=("tool_outputs",)) == rows  # every other row as it was
    engine.dispose()
    assert all(before_outputs[p] == o for p, o in left.items())  # no output changed
    gone = {names[p] for p in dropped}
    assert gone <= {f"old{i}" for i in range(OLD_OUTPUTS)}  # only what gc was asked to drop
    again = store.gc(BEFORE)  # the next gc drops the rest
    assert again.parts == OLD_OUTPUTS - len(gone)
    assert store.check().ok
    store.close()
    assert {names[p] for p in _outputs(url)} == {"new", "kept"}


def _names(url: str) -> dict[str, str]:
    engine = create_engine(plain_url(url))
    try:
        with engine.connect() as conn:
            return dict(conn.execute(text("SELECT part_id, call_id FROM tool_states")).all())
    finally:
        engine.dispose()
