"""The single-session hot paths, per call, this checkout against another (DESIGN §5's guards, ABBA).

Each side runs in a process of its own (``--base DIR``'s brutus on ``PYTHONPATH``, this checkout's
otherwise), in the order base, new, new, base, ``--rounds`` times; each process times, on a SQLite file of
its own: the finished turn in one ``append_messages``, an agent step of eight calls with a commit each and
the same in ``batch()`` (``workload``), ``messages()`` of 4,000 items, ``get_session``, and three calls on
``AsyncSessionStore``. Prints the median of each side's medians, in microseconds, and new / base.

    python benchmarks/bench_calls.py --base /path/to/old/checkout [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _median_us(call, count: int) -> float:
    times = []
    for i in range(count):
        started = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def measure() -> dict[str, float]:
    """One side's figures, in this process's brutus."""
    sys.path.insert(0, str(HERE))
    from workload import agent_step, whole_turn, write_turns

    from brutus import AsyncSessionStore, SessionStore

    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore.open(f"sqlite:///{tmp}/calls.db", index_in_background=False)
        session = store.create_session().id
        figures["append_messages turn"] = _median_us(lambda i: whole_turn(store, session, i), 300)
        figures["step, commit per call"] = _median_us(lambda i: agent_step(store, session, 1000 + i), 300)

        def batched(i: int) -> None:
            with store.batch():
                agent_step(store, session, 5000 + i)

        figures["step in batch()"] = _median_us(batched, 300)
        long = store.create_session().id
        write_turns(store, long, 0, 1000)
        figures["messages() of 4,000 items"] = _median_us(lambda i: store.messages(long), 30)
        figures["get_session"] = _median_us(lambda i: store.get_session(session), 2000)
        store.close()

        async def three_calls() -> float:
            astore = await AsyncSessionStore.open(f"sqlite:///{tmp}/async.db", index_in_background=False)
            asession = (await astore.create_session()).id
            times = []
            for _ in range(600):
                started = time.perf_counter()
                user = await astore.append_message(asession, "user")
                await astore.append_part(user.id, {"type": "text", "text": "hi"})
                await astore.get_session(asession)
                times.append(time.perf_counter() - started)
            await astore.close()
            return statistics.median(times[100:]) * 1e6

        figures["async, three calls"] = asyncio.run(three_calls())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the code to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one side, in this process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return
    sides: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for _ in range(args.rounds):
        for side in ("base", "new", "new", "base"):
            env = {**os.environ, "PYTHONPATH": str(args.base.resolve())} if side == "base" else dict(os.environ)
            command = [sys.executable, __file__, "--base", str(args.base), "--measure"]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            sides[side].append(json.loads(done.stdout))
    print(f"{'call':28} {'base us':>10} {'new us':>10} {'new/base':>9}")
    for name in sides["base"][0]:
        base = statistics.median(run[name] for run in sides["base"])
        new = statistics.median(run[name] for run in sides["new"])
        print(f"{name:28} {base:10.1f} {new:10.1f} {new / base:8.2f}x")


if __name__ == "__main__":
    main()
