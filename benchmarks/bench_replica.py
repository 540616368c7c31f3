"""What a read routed to a replica costs (``open(url, read_url=...)``), against the same read on the primary.

Makes a throw-away primary and its streaming standby on this machine (``tests/pgcluster.py``: PostgreSQL's
server binaries, run as ``postgres``), writes ``--sessions`` sessions, then times ``list_sessions(limit=20)``
through a store on the primary alone and one with the replica, alternated (direct, replica, replica, direct)
``--rounds`` times: reads alone, and each read after a write of the same store (which makes the store ask the
primary where its WAL ends before it may use the replica). Prints each side's median of medians, in us.

    python benchmarks/bench_replica.py [--rounds 2] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from pgcluster import Clusters  # noqa: E402

from brutus import SessionStore  # noqa: E402


def median_us(store: SessionStore, calls: int, *, write: bool) -> float:
    times = []
    for _ in range(calls):
        if write:
            store.create_session(title="w")
        started = time.perf_counter()
        store.list_sessions(limit=20)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    clusters = Clusters().start()
    try:
        with SessionStore.open(clusters.primary_url, index_in_background=False) as writer:
            for n in range(args.sessions):
                writer.create_session(title=f"s{n}")
        clusters.wait_caught_up()
        direct = SessionStore.open(clusters.primary_url, index_in_background=False)
        routed = SessionStore.open(clusters.primary_url, read_url=clusters.replica_url, index_in_background=False)
        sides = {"primary": direct, "replica": routed}
        for store in sides.values():
            median_us(store, 50, write=False)  # warm the pools
        for write in (False, True):
            figures: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name in ("primary", "replica", "replica", "primary"):
                    figures[name].append(median_us(sides[name], args.calls, write=write))
            label = "after a write" if write else "reads alone"
            line = ", ".join(f"{name} {statistics.median(values):.0f} us" for name, values in figures.items())
            print(f"list_sessions(limit=20), {label}: {line}")
        direct.close()
        routed.close()
    finally:
        clusters.stop()


if __name__ == "__main__":
    main()
