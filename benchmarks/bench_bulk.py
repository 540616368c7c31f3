"""Bulk ``append_messages`` (issue 32, "PostgreSQL at SQLite's pace"): real history in 100-message calls into a
store that holds a year's worth already, SQLite against PostgreSQL, the sync and the async store.

The history is the corpus's OpenCode sessions (tests/data/corpus, 494 messages, ~2,200 parts, tool outputs
as recorded), copied over and over with fresh message and part ids given (as ``import`` gives them), in calls
of ``CALL`` messages. Each store first gets ``--prefill`` messages of the same history (in sessions of 5,000;
PostgreSQL then ANALYZEs), and every contender appends to a session of its own in it.

Each contender is a worker process (sync or async store, SQLite or PostgreSQL, and with ``--base DIR`` the
brutus found in DIR, e.g. ``git archive <commit> brutus | tar -x -C DIR``), kept running; the runner asks
each in turn for a round of calls, rounds in ABBA order (the order reversed every other round), so a noisy
neighbour hits all alike. A figure is messages per second over all rounds' calls.

    python benchmarks/bench_bulk.py [--prefill 100000] [--rounds 6] [--calls 5] [--base DIR]
        [--postgres postgresql+psycopg://root@127.0.0.1:5432/test] [--tmp DIR] [--results DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

NAME = "bulk"
CALL = 100  # messages per append_messages call
FILL_CALL = 500  # messages per call while prefilling (below BULK_MESSAGES: no settle per call)
FILL_SESSION = 5_000  # messages per prefilled session
GOAL = 1.5  # PostgreSQL's time per message at most 1.5x SQLite's


# -- the history -------------------------------------------------------------------------------------------------


def corpus_history() -> list[dict[str, Any]]:
    """The corpus's OpenCode sessions, one after another, as ``append_messages`` items (dicts)."""
    from corpus_helpers import load_export, opencode_files

    items = []
    for path in opencode_files():
        for message in load_export(path):
            item = message.model_dump(mode="json")
            for key in ("session_id", "seq"):
                item["info"].pop(key, None)
            for part in item["parts"]:
                part.pop("session_id", None)
                part.pop("message_id", None)
            items.append(item)
    return items


class Copies:
    """Copies of the history with fresh ids (``tag`` keeps those of different workers apart), ``CALL``
    messages a call; the ids a message refers to (its parent, a compaction's tail) follow it."""

    def __init__(self, history: list[dict[str, Any]], tag: str) -> None:
        self.history, self.tag = history, tag
        self.counter = itertools.count()
        self.cursor = itertools.cycle(range(0, len(history), CALL))

    def _id(self, kind: str) -> str:
        return f"{kind}_{self.tag}{next(self.counter):012d}"

    def call(self, size: int = CALL) -> list[dict[str, Any]]:
        start = next(self.cursor)
        block = [self.history[(start + n) % len(self.history)] for n in range(size)]
        ids: dict[str, str] = {}
        items = []
        for item in block:
            info = dict(item["info"], id=self._id("msg"))
            ids[item["info"]["id"]] = info["id"]
            if info.get("parent_id"):
                info["parent_id"] = ids.get(info["parent_id"], info["parent_id"])
            parts = []
            for part in item["parts"]:
                part = dict(part, id=self._id("prt"))
                if part.get("tail_start_id"):
                    part["tail_start_id"] = ids.get(part["tail_start_id"], part["tail_start_id"])
                parts.append(part)
            items.append({"info": info, "parts": parts})
        return items


# -- a worker: one store, one session, rounds on request ------------------------------------------------------


def use_code(directory: str | None) -> None:
    """Import brutus from ``directory`` (a checkout of another version) instead of the installed one."""
    if directory:
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
        sys.path.insert(0, directory)


def worker(url: str, mode: str, tag: str) -> None:
    """Answer ``round N`` with the ms of each of N calls (JSON), until ``quit``."""
    copies = Copies(corpus_history(), tag)
    if mode == "async":
        asyncio.run(_async_worker(url, copies))
        return
    from brutus import SessionStore

    store = SessionStore.open(url)
    session_id = store.create_session(title=f"bulk {tag}").id
    store.append_messages(session_id, copies.call())  # warm: statements, connections
    _serve(copies, lambda items: store.append_messages(session_id, items))
    store.close()


async def _async_worker(url: str, copies: Copies) -> None:
    from brutus import AsyncSessionStore

    store = await AsyncSessionStore.open(url)
    session_id = (await store.create_session(title=f"bulk {copies.tag}")).id
    await store.append_messages(session_id, copies.call())
    print(json.dumps({"ready": True, "brutus": _brutus_file()}), flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)  # between rounds only: nothing else runs then
        words = line.split()
        if not words or words[0] == "quit":
            break
        times = []
        for _ in range(int(words[1])):
            items = copies.call()
            start = time.perf_counter()
            await store.append_messages(session_id, items)
            times.append((time.perf_counter() - start) * 1000)
        print(json.dumps({"ms": times}), flush=True)
    await store.close()


def _serve(copies: Copies, append: Any) -> None:
    print(json.dumps({"ready": True, "brutus": _brutus_file()}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        times = []
        for _ in range(int(words[1])):
            items = copies.call()  # made before the clock starts: only the call is timed
            start = time.perf_counter()
            append(items)
            times.append((time.perf_counter() - start) * 1000)
        print(json.dumps({"ms": times}), flush=True)


def _brutus_file() -> str:
    import brutus

    return str(Path(brutus.__file__).parent)


class Worker:
    def __init__(self, name: str, url: str, mode: str, code: str | None, tag: str, stderr: Path) -> None:
        self.name = name
        command = [sys.executable, str(Path(__file__).resolve()), "worker", "--url", url, "--mode", mode, "--tag", tag]
        if code:
            command += ["--code", code]
        self.err = stderr.open("w")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"worker {self.name} stopped: see {self.err.name}")
        return json.loads(line)

    def round(self, calls: int) -> list[float]:
        self.process.stdin.write(f"round {calls}\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return self._read()["ms"]

    def close(self) -> None:
        try:
            self.process.stdin.write("quit\n")  # type: ignore[union-attr]
            self.process.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass
        self.process.wait(timeout=60)
        self.err.close()


# -- the runner ---------------------------------------------------------------------------------------------------


def prefill(url: str, history: list[dict[str, Any]], messages: int) -> float:
    """``messages`` messages of the history into the store at ``url``, in sessions of ``FILL_SESSION``; seconds."""
    from brutus import SessionStore

    copies = Copies(history, "fill")
    store = SessionStore.open(url)
    start = time.perf_counter()
    written = 0
    while written < messages:
        session_id = store.create_session(title="prefill").id
        for _ in range(0, min(FILL_SESSION, messages - written), FILL_CALL):
            written += len(store.append_messages(session_id, copies.call(FILL_CALL)))
    seconds = time.perf_counter() - start
    if store.engine.dialect.name == "postgresql":
        from sqlalchemy import text

        with store.engine.connect() as conn:
            conn.execute(text("ANALYZE"))
            conn.commit()
    store.close()
    return seconds


def measure(
    urls: dict[str, str], codes: dict[str, str | None], *, rounds: int, calls: int, workdir: Path
) -> dict[str, dict[str, Any]]:
    """Every (backend, store, code) contender's rounds, ABBA; per contender: ms per call and msg/s."""
    workers = []
    try:
        for backend, url in urls.items():
            for mode in ("sync", "async"):
                for version, code in codes.items():
                    name = f"{backend} {mode} {version}"
                    tag = f"{backend[:2]}{mode[0]}{version[0]}"
                    workers.append(Worker(name, url, mode, code, tag, workdir / f"{tag}.err"))
        samples: dict[str, list[float]] = {w.name: [] for w in workers}
        for n in range(rounds):
            for w in workers if n % 2 == 0 else workers[::-1]:
                samples[w.name] += w.round(calls)
    finally:
        for w in workers:
            w.close()
    import statistics

    return {
        name: {
            "ms_per_call_median": statistics.median(ms),
            "ms_per_call_mean": statistics.mean(ms),
            "msg_per_s": CALL * len(ms) / (sum(ms) / 1000),
            "calls": len(ms),
        }
        for name, ms in samples.items()
    }


def run(cfg: Any, *, base: str | None = None, sizes: tuple[int, int, int] | None = None) -> Any:
    """The benchmark under ``run.py`` (``cfg``: sizes, scratch directory, PostgreSQL URL), current code only
    unless ``base`` names another brutus checkout to compare with; ``sizes``: (prefill, rounds, calls)."""
    from harness import Goal, Section, Table, pg_database

    prefilled, rounds, calls = sizes or (cfg.pick(100_000, 20_000, 600), cfg.pick(6, 4, 2), cfg.pick(5, 3, 1))
    work = cfg.workdir(NAME)
    history = corpus_history()
    codes: dict[str, str | None] = {"new": None} if base is None else {"old": base, "new": None}
    for stale in work.glob("bulk.db*"):  # a fresh store every run
        stale.unlink()
    with pg_database(cfg.pg_url, "brutus_bench_bulk") as pg_url:
        urls = {"sqlite": f"sqlite:///{work / 'bulk.db'}", "postgresql": pg_url}
        fill_seconds = {backend: prefill(url, history, prefilled) for backend, url in urls.items()}
        results = measure(urls, codes, rounds=rounds, calls=calls, workdir=work)

    columns = ["backend, store, code", "msg/s", "ms/call (median)", "PG/SQLite time"] + (["new/old time"] if base else [])
    table = Table(
        f"append_messages of real history, {CALL} messages a call, into a store of {prefilled:,} messages "
        f"({len(history)} corpus messages copied with fresh ids)",
        columns,
    )
    goals = []
    for backend in urls:
        for mode in ("sync", "async"):
            for version in codes:
                name = f"{backend} {mode} {version}"
                rate = results[name]["msg_per_s"]
                sqlite_rate = results[f"sqlite {mode} {version}"]["msg_per_s"]
                row = [name, rate, results[name]["ms_per_call_median"], sqlite_rate / rate if backend == "postgresql" else None]
                if base:
                    row.append(results[f"{backend} {mode} old"]["msg_per_s"] / rate if version == "new" else None)
                table.add(*row)
                if backend == "postgresql" and version == "new":
                    goals.append(Goal(f"PostgreSQL {mode} append_messages time <= {GOAL}x SQLite's", sqlite_rate / rate, GOAL))
    table.notes.append(
        f"{rounds} rounds x {calls} calls per contender, each contender a process of its own, rounds in ABBA order; "
        f"msg/s over all calls; prefill ({prefilled:,} messages in {FILL_CALL}-message calls): "
        + ", ".join(f"{b} {s:.0f} s" for b, s in fill_seconds.items())
    )
    data = {"prefilled": prefilled, "rounds": rounds, "calls": calls, "results": results, "prefill_seconds": fill_seconds}
    return Section(NAME, [table], goals, data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("worker")
    one.add_argument("--url", required=True)
    one.add_argument("--mode", choices=("sync", "async"), required=True)
    one.add_argument("--tag", required=True)
    one.add_argument("--code")
    parser.add_argument("--prefill", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--base", help="a directory holding another brutus (its brutus/ package) to compare with")
    default_pg = os.environ.get("BRUTUS_BENCH_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test")
    parser.add_argument("--postgres", default=default_pg)
    parser.add_argument("--tmp", type=Path, help="scratch directory (default: a new one under the system's)")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="where bulk.json goes")
    args = parser.parse_args()
    if args.command == "worker":
        use_code(args.code)
        worker(args.url, args.mode, args.tag)
        return 0
    from harness import Config, machine

    tmp = args.tmp or Path(tempfile.mkdtemp(prefix="brutus-bulk-"))
    cfg = Config(mode="full", tmp=tmp, results=args.results, pg_url=args.postgres)
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    base = os.path.abspath(args.base) if args.base else None
    try:
        section = run(cfg, base=base, sizes=(args.prefill, args.rounds, args.calls))
    finally:
        shutil.rmtree(cfg.workdir(NAME))  # the SQLite store: 1.2 GB at 100,000 messages
        if args.tmp is None:
            tmp.rmdir()
    print(section.render())
    print(f"load average after: {os.getloadavg()[0]:.2f}; {machine()['time']}")
    print(f"-> {section.write(cfg)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
