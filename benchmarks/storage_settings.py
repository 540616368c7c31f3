"""SQLite storage settings: brutus's (2 KiB pages, checkpoints in a thread of their own, the commit's own
checkpoint at 16 MiB) against SQLite's defaults.

The same agent step as the append benchmark (``workload.agent_step``: 8 calls), with a commit per call and
inside ``store.batch()``, on database files that differ only in how they store:

- SQLite's defaults: 4 KiB pages, a checkpoint every 1000 pages, run by the commit that crosses it;
- 2 KiB pages, the same checkpoints;
- 2 KiB pages, the store's thread checkpoints shortly after each commit (``brutus.db.checkpoint``), the
  commit's own checkpoint at 4 MiB (2048 pages);
- brutus's settings: the same with the commit's own checkpoint at 16 MiB (8192 pages), so a writer that
  never pauses rarely runs one itself.

The rounds alternate, so a noisy neighbour hits all alike. A figure is the mean over rounds (a checkpoint
comes every few dozen steps and counts wherever it falls), as wall time and as the process's CPU time (of
all its threads: with the checkpoint thread it can exceed the wall time; without, the difference is mostly
the checkpoints' syncs). The steps follow each other without a pause, so
the thread checkpoints while the writer goes on; an agent that waits for its model between steps leaves it
the pause.

    python benchmarks/storage_settings.py [--rounds 41] [--steps 50]

Prints a table; writes ``benchmarks/results/storage_settings.json``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import agent_step

from brutus import SessionStore

RESULTS = Path(__file__).resolve().parent / "results"
SETTINGS = {  # name: (page size, the commit's own checkpoint every N pages, checkpoints in the store's thread)
    "SQLite's defaults (4 KiB pages, checkpoint every 1000 pages)": (4096, 1000, False),
    "2 KiB pages, checkpoint every 1000 pages": (2048, 1000, False),
    "2 KiB pages, a thread checkpoints, the commit's own at 4 MiB": (2048, 2048, True),
    "brutus's settings: 2 KiB pages, a thread, the commit's own at 16 MiB": (2048, 8192, True),
}


def open_with(path: Path, page_size: int, checkpoint: int, background: bool) -> SessionStore:
    """A store on a new file made with ``page_size``, its connection checkpointing every ``checkpoint`` pages
    (brutus would set its own: the file is made first, the interval set after brutus's pragmas), with or
    without its checkpoint thread."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = WAL")  # fixes the page size: the file is written
    conn.close()
    store = SessionStore.open(f"sqlite:///{path}")
    connection = store._driver_connection()  # the connection this thread writes on
    connection.execute(f"PRAGMA wal_autocheckpoint = {checkpoint}")
    found = connection.execute("PRAGMA page_size").fetchone()[0]
    if found != page_size:
        raise AssertionError(f"{path} has {found}-byte pages, wanted {page_size}")
    if not background:
        store._checkpointer.committed = lambda: None  # the thread never starts: commits checkpoint inline
    return store


def measure(rounds: int, steps: int, batch: bool) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for n, (name, (page_size, checkpoint, background)) in enumerate(SETTINGS.items()):
            store = open_with(Path(tmp) / f"{n}.db", page_size, checkpoint, background)
            session_id = store.create_session().id
            for i in range(300):  # warm: the tables and indexes exist past their first pages
                agent_step(store, session_id, i)
            stores[name] = (store, session_id)
        wall: dict[str, list[float]] = {name: [] for name in stores}
        cpu: dict[str, list[float]] = {name: [] for name in stores}
        counter = iter(range(1000, 10**9))
        for _ in range(rounds):
            for name, (store, session_id) in stores.items():
                started, used = time.perf_counter(), time.process_time()
                for _ in range(steps):
                    if batch:
                        with store.batch():
                            agent_step(store, session_id, next(counter))
                    else:
                        agent_step(store, session_id, next(counter))
                wall[name].append((time.perf_counter() - started) * 1000 / steps)
                cpu[name].append((time.process_time() - used) * 1000 / steps)
        for store, _ in stores.values():
            store.close()
    base = statistics.mean(wall[next(iter(SETTINGS))])
    return {
        name: {
            "wall_ms": statistics.mean(wall[name]),
            "cpu_ms": statistics.mean(cpu[name]),
            "vs_defaults": statistics.mean(wall[name]) / base,
            "wall_samples": [round(x, 4) for x in wall[name]],
        }
        for name in stores
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--steps", type=int, default=50, help="agent steps per round and file")
    parser.add_argument("--json", type=Path, default=RESULTS / "storage_settings.json")
    args = parser.parse_args()
    results = {}
    print(f"ms per agent step (8 calls), mean of {args.rounds} rounds x {args.steps} steps, rounds alternating")
    print(f"{'how':<28} {'settings':<70} {'wall ms':>8} {'cpu ms':>8} {'vs defaults':>12}")
    for how, batch in (("commit per call", False), ("store.batch(), one commit", True)):
        results[how] = measure(args.rounds, args.steps, batch)
        for name, row in results[how].items():
            print(f"{how:<28} {name:<70} {row['wall_ms']:>8.3f} {row['cpu_ms']:>8.3f} {row['vs_defaults']:>11.2f}x")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rounds": args.rounds, "steps": args.steps, "results": results}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
