"""Bytes on disk against the raw text stored, two versions of brutus side by side (issue 32, "Small on disk").

Each version (a checkout with its own ``.venv``: ``--base DIR`` and this one) builds the same store in a process
of its own: copies of the corpus sessions (``year_build.build``, ``--messages`` messages written with
``append_messages``), on SQLite and on PostgreSQL, in two forms:

- **imported**: the copies as the importers read them, with what they keep beside each row (OpenCode's
  ``summary.diffs``, Claude Code's ``toolUseResult``: ``metadata``);
- **native**: the same messages with every ``metadata`` left off, as an agent writing through brutus stores them.

Then the index is brought up to date (``store.settle()``), SQLite's WAL checkpointed, and the bytes measured:
the SQLite file, or the brutus tables' ``pg_total_relation_size`` (heap, TOAST, indexes). Raw text: text
parts, tool inputs (compact JSON), tool outputs, in UTF-8 (``year_build.raw_text``). Sizes are deterministic
(no timing), so the versions are not alternated; the table gives both and their ratio.

    python benchmarks/bench_disk.py --base /path/to/old/checkout [--messages 10000] [--no-pg]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/postgres"
BRUTUS_TABLES = ("sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions", "transcripts",
                 "transcript_entries", "search_vectors", "search_state", "search_keys", "search_stale")


def _native(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        info = {k: v for k, v in message["info"].items() if k != "metadata"}
        parts = []
        for part in message["parts"]:
            part = {k: v for k, v in part.items() if k != "metadata"}
            if part["type"] == "tool":
                part["state"] = {k: v for k, v in part["state"].items() if k != "metadata"}
            parts.append(part)
        out.append({"info": info, "parts": parts})
    return out


def worker(args: argparse.Namespace) -> None:
    """In the version's own interpreter: build one store and print its figures as JSON."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    import year_build as yb
    from sqlalchemy import create_engine, text

    from brutus import SessionStore

    workdir = Path(args.workdir)
    templates = yb.load_corpus(workdir)
    if args.form == "native":
        for template in templates:
            template.messages = _native(template.messages)
    if args.backend == "sqlite":
        path = workdir / f"{args.form}.db"
        url = f"sqlite:///{path}"
    else:
        admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
        name = f"bench_disk_{os.getpid()}"
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = args.pg.rsplit("/", 1)[0] + "/" + name
    try:
        with SessionStore.open(url) as store:
            built = yb.build(store, templates, args.messages, lambda _: None)
            store.settle()
        raw = sum(built.raw.values())
        if args.backend == "sqlite":
            yb.checkpoint(path)
            total = os.path.getsize(path)
            with sqlite3.connect(path) as conn:
                tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
        else:
            engine = create_engine(url)
            with engine.connect() as conn:
                conn.execute(text("CHECKPOINT"))
                tables = {
                    t: conn.execute(text("SELECT coalesce(pg_total_relation_size(to_regclass(:t)), 0)"), {"t": t}).scalar_one()
                    for t in BRUTUS_TABLES
                }
            engine.dispose()
            total = sum(tables.values())
        print(json.dumps({"bytes": total, "raw": raw, "messages": built.messages, "sessions": built.sessions,
                          "tables": tables}))
    finally:
        if args.backend != "sqlite":
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


def run_version(tree: Path, backend: str, form: str, args: argparse.Namespace) -> dict[str, Any]:
    python = tree / ".venv" / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="bench-disk-") as workdir:
        command = [str(python), str(HERE / "bench_disk.py"), "--worker", "--backend", backend, "--form", form,
                   "--messages", str(args.messages), "--pg", args.pg, "--workdir", workdir]
        env = dict(os.environ, PYTHONPATH=str(tree))
        start = time.perf_counter()
        out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{tree} {backend} {form} failed:\n{out.stderr[-3000:]}")
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        figures["seconds"] = time.perf_counter() - start
        return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required="--worker" not in (argv or sys.argv), help="the old checkout")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--pg", default=DEFAULT_PG, help="a PostgreSQL server URL (a scratch database is made)")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--form", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return
    backends = ["sqlite"] + ([] if args.no_pg else ["postgresql"])
    print(f"bytes on disk / raw text, {args.messages:,} messages of corpus copies; base {args.base}, new {ROOT}")
    print("| backend | form | raw text | base | new | base / raw | new / raw | new / base |")
    print("|---|---|---|---|---|---|---|---|")
    for backend in backends:
        for form in ("imported", "native"):
            base = run_version(args.base.resolve(), backend, form, args)
            new = run_version(ROOT, backend, form, args)
            assert base["raw"] == new["raw"], (base, new)
            mb = 1e6
            print(f"| {backend} | {form} | {new['raw'] / mb:.1f} MB | {base['bytes'] / mb:.1f} MB | {new['bytes'] / mb:.1f} MB "
                  f"| {base['bytes'] / base['raw']:.2f}x | {new['bytes'] / new['raw']:.2f}x | {new['bytes'] / base['bytes']:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
