"""Run brutus's benchmark suite and print the figures and ratios; each benchmark writes
benchmarks/results/<name>.json (and scaling the plot scaling.png).

    python benchmarks/run.py [--quick | --smoke] [--only NAME[,NAME...]] [--no-peers] [--postgres URL]

Benchmarks, in order: append, load, prune, pg_writers, memory, scaling (see each ``bench_<name>.py``).
The default run takes about ten minutes on two cores, ``--quick`` about two; ``--smoke`` uses tiny sizes
(for the test suite). The peers (OpenAI Agents, LangChain, llm) run in their own virtualenvs under
/tmp/peers-<name>, created by benchmarks/peers/setup.sh when missing; ``--no-peers`` leaves them out.
PostgreSQL: ``--postgres URL`` (default $BRUTUS_BENCH_POSTGRES_URL, else the local server
postgresql+psycopg://root@127.0.0.1:5432/test); the benchmark creates its own database there and drops it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, Config, Section, machine, setup_peers  # noqa: E402

BENCHMARKS = ["append", "load", "prune", "pg_writers", "memory", "scaling"]
USES_PEERS = {"append", "load", "scaling"}
DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (about two minutes)")
    sizes.add_argument("--smoke", action="store_true", help="tiny sizes: checks that everything runs (seconds)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these ({', '.join(BENCHMARKS)}); repeat or comma-separate",
    )
    parser.add_argument("--no-peers", action="store_true", help="leave out the peers (no virtualenvs needed)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BRUTUS_BENCH_POSTGRES_URL", DEFAULT_PG),
        metavar="URL",
        help="the PostgreSQL server for pg_writers",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        metavar="DIR",
        help="where the JSON files and the plot go (default benchmarks/results)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory with the databases")
    args = parser.parse_args(argv)
    only = [name.strip() for item in args.only for name in item.split(",") if name.strip()]
    unknown = sorted(set(only) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    args.selected = [name for name in BENCHMARKS if not only or name in only]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    tmp = Path(tempfile.mkdtemp(prefix="brutus-bench-"))
    cfg = Config(mode=mode, tmp=tmp, results=args.results, peers=not args.no_peers, pg_url=args.postgres)
    info = machine()
    print(
        f"brutus benchmarks ({mode}): {', '.join(args.selected)}; python {info['python']}, SQLite {info['sqlite']}, "
        f"{info['cpus']} cpus, load average {info['loadavg'][0]}",
        flush=True,
    )
    if cfg.peers and USES_PEERS & set(args.selected):
        setup_peers(cfg)
    failed: list[str] = []
    sections: list[Section] = []
    started = time.perf_counter()
    try:
        for name in args.selected:
            print(f"\n== {name} ", "=" * (100 - len(name)), sep="", flush=True)
            cfg.notes.clear()
            began = time.perf_counter()
            try:
                section = importlib.import_module(f"bench_{name}").run(cfg)
            except Exception:  # noqa: BLE001  one benchmark failing must not hide the others
                traceback.print_exc()
                failed.append(name)
                continue
            section.seconds = time.perf_counter() - began
            section.data["notes"] = list(cfg.notes)
            sections.append(section)
            print(section.render())
            for note in cfg.notes:
                print(f"  note: {note}")
            print(f"  ({section.seconds:.1f} s) -> {section.write(cfg)}", flush=True)
    finally:
        if args.keep:
            print(f"\nscratch directory kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n== goals {'=' * 93}")
    for section in sections:
        for goal in section.goals:
            print(f"[{section.name}]{goal.render()}")
    print(
        f"\n{len(sections)} benchmark(s) in {time.perf_counter() - started:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
