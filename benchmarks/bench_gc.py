"""gc on SQLite against the gc before issue 32, on one database built from the corpus, in one run.

The database: every corpus session imported, then each copied onto itself (``workload.copy_messages``: the
rows as stored, new ids) until the file reaches ``--mb``; the search index filled; then the oldest tool
outputs, about ``--drop`` (5%) of the file, marked pruned long ago, so a gc drops them. Each run gets a
copy of that file (closed: no WAL) and times ``store.gc``, while a thread samples the file and its WAL with
``os.path.getsize`` (a stat: never ``open()``, see ``brutus/db/files.py``) every 5 ms: the peak extra disk is
the largest file + WAL seen less the file before.

- ``old``: the gc before (reconstructed from the same operations: the pending documents indexed, every output
  dropped in one transaction, FTS5 ``optimize``, VACUUM, the keyless documents indexed again).
- ``new``: ``store.gc(before)``: chunks of ``CHUNK_BYTES`` with a TRUNCATE checkpoint after each, no rewrite.
- ``new, incremental file``: the same on a copy switched to ``auto_vacuum = INCREMENTAL`` (one VACUUM at
  build time, not timed): the free pages go back to the system in steps.

Order old, new, incremental, incremental, new, old (ABBA): each figure is the mean of its two runs.

    python benchmarks/bench_gc.py [--mb 400] [--drop 0.05] [--workdir /tmp/h-gc]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import Config, Goal, Section, Table  # noqa: E402
from workload import copy_messages  # noqa: E402

from brutus import SessionStore  # noqa: E402
from brutus.db.gc_ops import drop_pruned_outputs  # noqa: E402
from brutus.db.search_ops import index_pending, optimize_index  # noqa: E402
from brutus.flows import StorageBytes, Tx, Vacuum, drive_flow  # noqa: E402
from brutus.importers import import_files  # noqa: E402

NAME = "gc"
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus"
MB = 1 << 20
BEFORE = 1_000  # the prune mark given to the outputs to drop (epoch ms): gc drops what was pruned before 2000
PRUNED_AT = 1


def old_gc_flow(before: int) -> Any:
    """gc as it was before issue 32 (``brutus/db/gc_ops.py`` at 0adbe80)."""
    yield Tx(index_pending("sqlite"))
    size_before = yield StorageBytes()
    dropped = yield Tx(drop_pruned_outputs(before, dry_run=False))
    yield Tx(optimize_index())
    yield Vacuum(full=True)
    yield Tx(index_pending("sqlite", keyless=True))
    size_after = yield StorageBytes()
    return dropped.model_copy(update={"vacuumed": True, "bytes_before": size_before, "bytes_after": size_after})


def build(path: Path, megabytes: int, drop: float) -> dict[str, Any]:
    """The database described in the module docstring; what it holds."""
    store = SessionStore.open(f"sqlite:///{path}")
    files = sorted(CORPUS.glob("*/*.gz"))
    import_files(store, files)
    sessions = [(s.id, s.message_count) for s in store.list_sessions()]
    store.close()
    conn = sqlite3.connect(path)
    starts = {
        sid: conn.execute("SELECT role FROM messages WHERE session_id = ? AND seq = 1", (sid,)).fetchone()
        for sid, _ in sessions
    }
    conn.close()
    blocks = [(sid, count) for sid, count in sessions if count >= 2 and starts[sid] == ("user",)]
    rounds = 0
    while os.path.getsize(path) < megabytes * MB * 0.8:  # the search index adds the rest
        for sid, count in blocks:
            copy_messages(path, sid, first_seq=1, block_messages=count, count=count)
        rounds += 1
    store = SessionStore.open(f"sqlite:///{path}")
    store.search("function")  # fills the search index, as a store that was searched has it
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    size = os.path.getsize(path)
    target, total, chosen = drop * size, 0, []
    for part_id, length in conn.execute(
        "SELECT o.part_id, length(CAST(o.output AS BLOB)) FROM tool_outputs o ORDER BY o.rowid"
    ):
        if total >= target:
            break
        chosen.append((part_id,))
        total += length
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(f"UPDATE tool_states SET compacted_at = {PRUNED_AT} WHERE part_id = ?", chosen)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages", "parts")}
    conn.close()
    return {"bytes": os.path.getsize(path), "copies": rounds, "drop_parts": len(chosen), "drop_bytes": total, **counts}


def incremental_copy(source: Path, target: Path) -> None:
    shutil.copy(source, target)
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")  # switches the file; build time, not measured
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


class DiskSampler:
    """The largest file + WAL size seen, from another thread (stat only)."""

    def __init__(self, path: Path) -> None:
        self.files = (str(path), f"{path}-wal")
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _size(self) -> int:
        total = 0
        for name in self.files:
            try:
                total += os.path.getsize(name)
            except FileNotFoundError:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._size())
            self._stop.wait(0.005)

    def __enter__(self) -> DiskSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._size())


def problems(path: Path) -> list[Any]:
    """What ``brutus check`` finds (the bulk copies leave the sessions' message counters stale: gc must
    change nothing there)."""
    store = SessionStore.open(f"sqlite:///{path}", auto_migrate=False)
    try:
        return [p.model_dump() for p in store.check().problems]
    finally:
        store.close()


def one_run(kind: str, source: Path, work: Path) -> dict[str, Any]:
    path = work / f"{kind}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(source, path)
    size = os.path.getsize(path)
    store = SessionStore.open(f"sqlite:///{path}")
    with DiskSampler(path) as sampler:
        started = time.perf_counter()
        if kind == "old":
            result = drive_flow(old_gc_flow(BEFORE), store.run)
        else:
            result = store.gc(BEFORE)
        seconds = time.perf_counter() - started
    store.close()
    ok = problems(path) == problems(source)
    return {
        "kind": kind,
        "seconds": seconds,
        "db_bytes": size,
        "peak_extra": sampler.peak - size,
        "parts": result.parts,
        "output_bytes": result.output_bytes,
        "reclaimed": result.bytes_reclaimed,
        "reusable": result.bytes_reusable,
        "check_same": ok,
    }


def run(cfg: Config, megabytes: int | None = None, drop: float = 0.05) -> Section:
    megabytes = megabytes or cfg.pick(400, 120, 20)
    work = cfg.workdir(NAME)
    base = work / "base.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    built = build(base, megabytes, drop)
    incremental = work / "base-incremental.db"
    incremental_copy(base, incremental)
    print(f"built {built['bytes'] / MB:.0f} MB in {time.perf_counter() - started:.0f} s: {built}", flush=True)
    sources = {"old": base, "new": base, "new, incremental file": incremental}
    runs = []
    for kind in ("old", "new", "new, incremental file", "new, incremental file", "new", "old"):
        runs.append(one_run(kind, sources[kind], work))
        print(f"  {kind}: {runs[-1]}", flush=True)
    section = Section(NAME, data={"built": built, "runs": runs, "loadavg": os.getloadavg()})
    table = Table(
        f"gc on SQLite, {built['bytes'] / MB:.0f} MB database ({built['messages']:,} messages, {built['parts']:,} parts), "
        f"dropping {built['drop_parts']:,} outputs, {built['drop_bytes'] / MB:.1f} MB of text",
        ["gc", "time s", "vs old", "peak extra disk MB", "% of database", "file shrank MB", "freed inside MB"],
    )
    mean: dict[str, dict[str, float]] = {}
    for kind in sources:
        mine = [r for r in runs if r["kind"] == kind]
        mean[kind] = {key: sum(r[key] or 0 for r in mine) / len(mine) for key in ("seconds", "peak_extra", "reclaimed", "reusable")}
        mean[kind]["db"] = mine[0]["db_bytes"]
    for kind, m in mean.items():
        table.add(kind, round(m["seconds"], 2), round(m["seconds"] / mean["old"]["seconds"], 3),
                  round(m["peak_extra"] / MB, 1), round(100 * m["peak_extra"] / m["db"], 1),
                  round(m["reclaimed"] / MB, 1), round(m["reusable"] / MB, 1))
    table.notes.append(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; after every run brutus check finds what it "
                       f"found before: {all(r['check_same'] for r in runs)}")
    section.tables.append(table)
    for kind in ("new", "new, incremental file"):
        section.goals.append(Goal(f"{kind}: extra disk during gc / database", 100 * mean[kind]["peak_extra"] / mean[kind]["db"], 25, "%"))
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--drop", type=float, default=0.05)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    tmp = args.workdir or Path(tempfile.mkdtemp(prefix="bench-gc-"))
    cfg = Config(mode="full", tmp=tmp)
    section = run(cfg, args.mb, args.drop)
    print(section.render())
    print(f"results: {section.write(cfg)}")
    shutil.rmtree(tmp / NAME, ignore_errors=True)


if __name__ == "__main__":
    main()
