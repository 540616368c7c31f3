"""Prune: its cost against the history's length, the outputs' size, and the tail since the last boundary.

``store.prune`` decides from stored token estimates and marks parts; it should read no output text (so its
cost does not grow with output bytes) and scan back to the last completed boundary only (so it does not
grow with the history before it). Each figure is one real prune (it marks parts), repeated after unmarking
exactly the parts it marked; every repeat must mark the same parts.

- history: sessions of growing length with the boundary 200 messages back (99 tool outputs of 4 KB after it)
- output bytes: 1,000 messages and no boundary, outputs of growing size; ``prune_protect`` and
  ``prune_minimum`` are set to 1 token so every size marks the same parts (all but the last two turns)
- tail: sessions of growing length and no boundary at all: here the cost should grow with the length
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from harness import Config, Goal, Section, Table, ratio, summary
from workload import build_compacted, build_plain, open_sqlite

from brutus import CompactionConfig, SessionStore

NAME = "prune"
EVERYTHING = CompactionConfig(prune_protect=1, prune_minimum=1)


def measure(store: SessionStore, path: Path, session_id: str, config: CompactionConfig, repeats: int) -> dict[str, Any]:
    """``repeats`` prunes of a session, each on the same unpruned state: ms, and how many parts it marked."""
    samples, marked = [], None
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            result = store.prune(session_id, config)
            samples.append((time.perf_counter() - start) * 1000)
            ids = [part.id for part in result.parts]
            if marked is not None and ids != marked:
                raise AssertionError(
                    f"a repeat marked {len(ids)} parts, the first {len(marked)}: unmarking is incomplete"
                )
            marked = ids
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("UPDATE tool_states SET compacted_at = NULL WHERE part_id = ?", [(i,) for i in ids])
            conn.execute("COMMIT")
    finally:
        conn.close()
    return {**summary(samples), "marked": len(marked or []), "pruned_tokens": result.pruned}


def run(cfg: Config) -> Section:
    repeats = cfg.pick(7, 5, 2)
    work = cfg.workdir(NAME)
    path = work / "prune.db"
    store = open_sqlite(path)
    data: dict[str, Any] = {"repeats": repeats}

    sizes = cfg.pick([1000, 10_000, 100_000], [1000, 10_000, 20_000], [400, 1000])
    history = {}
    for size in sizes:
        session_id = build_compacted(store, path, size, output_bytes=4000)
        history[size] = measure(store, path, session_id, CompactionConfig(), repeats)
    base = history[sizes[0]]["median"]
    by_history = Table(
        "prune, boundary 200 messages back (99 outputs of 4 KB after it)",
        ["messages in session", "ms", "parts marked", f"vs {sizes[0]:,}"],
    )
    for size, result in history.items():
        by_history.add(f"{size:,}", result["median"], result["marked"], ratio(result["median"], base))

    kilobytes = cfg.pick([1, 16, 128], [1, 16, 64], [1, 4])
    by_bytes = {}
    for kb in kilobytes:
        session_id = build_plain(store, path, 1000, output_bytes=kb * 1024)
        by_bytes[kb] = measure(store, path, session_id, EVERYTHING, repeats)
    base_bytes = by_bytes[kilobytes[0]]["median"]
    by_output = Table(
        "prune, 1,000 messages, 500 outputs of growing size (marks all but the last 2 turns)",
        ["output bytes", "outputs in session", "ms", "parts marked", f"vs {kilobytes[0]} KB"],
    )
    for kb, result in by_bytes.items():
        by_output.add(
            f"{kb} KB",
            f"{500 * kb / 1024:,.1f} MB",
            result["median"],
            result["marked"],
            ratio(result["median"], base_bytes),
        )

    tails = cfg.pick([1000, 4000, 10_000], [1000, 4000], [400, 1000])
    by_tail = {}
    for size in tails:
        session_id = build_plain(store, path, size, output_bytes=4000)
        by_tail[size] = measure(store, path, session_id, CompactionConfig(), repeats)
    base_tail = by_tail[tails[0]]["median"]
    no_boundary = Table(
        "prune, no boundary at all (the whole session is the tail)",
        ["messages in session", "ms", "parts marked", f"vs {tails[0]:,}"],
    )
    for size, result in by_tail.items():
        no_boundary.add(f"{size:,}", result["median"], result["marked"], ratio(result["median"], base_tail))
    no_boundary.notes.append(
        f"median of {repeats} prunes each, each marking the same parts of the same unpruned session"
    )
    store.close()

    goals = [
        Goal(
            f"prune of {sizes[-1]:,} messages <= 2x prune of {sizes[0]:,} (bounded by the last boundary)",
            ratio(history[sizes[-1]]["median"], base),
            2.0,
        ),
        Goal(
            f"prune with {kilobytes[-1]} KB outputs <= 2x with {kilobytes[0]} KB (reads no output text)",
            ratio(by_bytes[kilobytes[-1]]["median"], base_bytes),
            2.0,
        ),
    ]
    data.update(history=history, output_kb=by_bytes, no_boundary=by_tail)
    return Section(NAME, [by_history, by_output, no_boundary], goals, data)
