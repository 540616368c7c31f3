"""Profile brutus's hot paths with cProfile, on the same workloads as the benchmarks.

    python benchmarks/hotspots.py append [--turns 300]        # the agent step, commit per call and in batch()
    python benchmarks/hotspots.py load [--turns 1000]         # messages() of the full history (4 items a turn)
    python benchmarks/hotspots.py view [--messages 100000]    # filter_compacted + to_anthropic, boundary 200 back
        [--top 25] [--sort tottime|cumulative] [--save FILE.prof]

Prints the top functions of each profile; ``--save`` keeps the raw profile (snakeviz, pstats).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import agent_step, build_compacted, open_sqlite, write_turns  # noqa: E402

from brutus import to_anthropic  # noqa: E402


def profile(label: str, fn: Callable[[], object], args: argparse.Namespace) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    print(f"\n=== {label} " + "=" * max(0, 96 - len(label)))
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats(args.sort)
    stats.print_stats(args.top)
    if args.save:
        target = Path(args.save).with_suffix(f".{label.split()[0]}.prof")
        stats.dump_stats(target)
        print(f"saved {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["append", "load", "view"])
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    parser.add_argument("--save", default=None, metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="brutus-profile-") as tmp:
        path = Path(tmp) / "profile.db"
        store = open_sqlite(path)
        if args.what == "append":
            turns = args.turns or 300
            per_call, batched = store.create_session().id, store.create_session().id
            agent_step(store, per_call, -1)

            def in_batch() -> None:
                for i in range(turns):
                    with store.batch():
                        agent_step(store, batched, i)

            profile(
                f"append {turns} turns, commit per call",
                lambda: [agent_step(store, per_call, i) for i in range(turns)],
                args,
            )
            profile(f"append {turns} turns, in batch()", in_batch, args)
        elif args.what == "load":
            turns = args.turns or 1000
            session_id = store.create_session().id
            write_turns(store, session_id, 0, turns)
            store.messages(session_id)
            profile(f"load messages() x5, {turns} turns", lambda: [store.messages(session_id) for _ in range(5)], args)
        else:
            session_id = build_compacted(store, path, args.messages)
            store.filter_compacted(session_id)

            def view() -> None:
                for _ in range(20):
                    to_anthropic(store.filter_compacted(session_id))

            profile(f"view x20, {args.messages:,} messages", view, args)
        store.close()


if __name__ == "__main__":
    main()
