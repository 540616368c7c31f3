"""What every store in the benchmarks writes, and the timing loop: shared by brutus's benchmarks and the peer
scripts (which run in their own virtualenvs, so this module imports nothing outside the standard library).

One agent turn is four items, the unit OpenAI Agents' Runner stores per tool-using turn: the user's message,
the assistant's tool call (``bash`` with ``{"command": "ls"}``), the tool's output (``OUTPUT``, 2,000 bytes)
and the assistant's closing text. brutus stores the same turn as one agent step: a user message with a text
part, an assistant message with a tool part (pending → running → completed) and a text part, and a finish.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

OUTPUT = "x" * 2000
TOOL = "bash"
TOOL_INPUT = {"command": "ls"}
REPLY = "done"
ITEMS_PER_TURN = 4


def user_text(i: int) -> str:
    return f"please do step {i}"


def call_id(i: int) -> str:
    return f"call_{i}"


def summary(samples: list[float]) -> dict[str, Any]:
    """Median, mean, min and max of samples (milliseconds), with the samples."""
    return {
        "median": statistics.median(samples),
        "mean": statistics.mean(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": [round(s, 4) for s in samples],
    }


def serve(contenders: dict[str, Callable[[int], Any]], info: dict[str, Any], *, warmup: int = 5) -> None:
    """Append rounds on the runner's command, so its rounds of brutus and of every peer alternate.

    Prints ``info`` with the contenders' names once warmed up, then answers each ``round N`` line on stdin
    with the ms per turn of N turns of each contender, as one JSON line; stops at ``quit`` or end of input.
    """
    counter = iter(range(10**9))
    for turn in contenders.values():
        for _ in range(warmup):
            turn(next(counter))
    _say({**info, "contenders": list(contenders)})
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        turns = int(command[1])
        result = {}
        for name, turn in contenders.items():
            start = time.perf_counter()
            for _ in range(turns):
                turn(next(counter))
            result[name] = (time.perf_counter() - start) * 1000 / turns
        _say({"ms_per_turn": result})


async def serve_async(contenders: dict[str, Callable[[int], Any]], info: dict[str, Any], *, warmup: int = 5) -> None:
    """``serve`` for coroutine functions (stdin is read blocking: nothing else runs meanwhile)."""
    counter = iter(range(10**9))
    for turn in contenders.values():
        for _ in range(warmup):
            await turn(next(counter))
    _say({**info, "contenders": list(contenders)})
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        turns = int(command[1])
        result = {}
        for name, turn in contenders.items():
            start = time.perf_counter()
            for _ in range(turns):
                await turn(next(counter))
            result[name] = (time.perf_counter() - start) * 1000 / turns
        _say({"ms_per_turn": result})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def timed(fn: Callable[[], Any], *, repeats: int, warmup: int = 1) -> dict[str, Any]:
    """``fn()`` run ``warmup`` times, then ``repeats`` times (each after a garbage collection): ms per call."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return summary(samples)


def wal_normal(dbapi_connection: Any, _record: Any = None) -> None:
    """A SQLAlchemy ``connect`` listener: WAL mode and ``synchronous=NORMAL``, brutus's settings, on each new
    sqlite3 connection of a peer's engine."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def wal_kib(path: str | os.PathLike[str]) -> float:
    """KiB in the write-ahead log of the SQLite database at ``path`` since the log restarted (each frame is a
    whole page and its 24-byte header): what the commits since then wrote, whatever the page size."""
    wal = f"{os.fspath(path)}-wal"
    if not os.path.exists(wal) or os.path.getsize(wal) < 32:
        return 0.0
    return (os.path.getsize(wal) - 32) / 1024


def checkpoint_truncate(path: str | os.PathLike[str], *, tries: int = 1) -> None:
    """Checkpoint the database at ``path`` and empty its write-ahead log (no transaction may be open on it).
    With ``tries`` > 1 it tries again, 50 ms apart, while another connection is checkpointing (a brutus
    store's checkpoint thread)."""
    for attempt in range(tries):
        conn = sqlite3.connect(path)
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.close()
        if not busy:
            return
        if attempt + 1 < tries:
            time.sleep(0.05)
    raise RuntimeError(f"could not checkpoint {path}: a transaction is open")


def sqlite_bytes(path: str | os.PathLike[str]) -> int:
    """The size of a SQLite database file once its write-ahead log is checkpointed into it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    total = 0
    for suffix in ("", "-wal"):
        if os.path.exists(f"{path}{suffix}"):
            total += os.path.getsize(f"{path}{suffix}")
    return total


def peer_args() -> argparse.Namespace:
    """The command line every peer script takes (the runner drives them all the same way)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=["append", "load", "scaling"], help="append serves rounds on stdin (see serve)")
    parser.add_argument("--tmp", required=True, help="a directory for the databases")
    parser.add_argument("--items", type=int, default=4000, help="load: history length in items")
    parser.add_argument("--repeats", type=int, default=5, help="load, scaling: timed loads")
    parser.add_argument("--sizes", default="500,1000,2000,4000", help="scaling: history lengths in items")
    return parser.parse_args()


def emit(peer: str, versions: dict[str, str], stores: dict[str, Any]) -> None:
    """Print the peer's result: one JSON object on stdout (the runner reads it)."""
    json.dump({"peer": peer, "versions": versions, "python": sys.version.split()[0], "stores": stores}, sys.stdout)
    sys.stdout.write("\n")


async def timed_async(fn: Callable[[], Any], *, repeats: int, warmup: int = 1) -> dict[str, Any]:
    """``timed`` for a coroutine function ``fn``."""
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return summary(samples)
