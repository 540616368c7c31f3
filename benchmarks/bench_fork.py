"""Forking against loading: ``store.fork(session)`` beside ``store.messages(session)`` (issue 35: a fork takes
at most 1.5x the time of ``messages()`` on the same session, whatever its size).

Sessions: the corpus's largest (by messages, imported with ``import_files``) and one of ``--messages``
(default 50,000) built from copies of it with ``append_messages`` (its messages and parts, metadata included,
as the importer keeps them). Each round times ``messages()`` and ``fork()`` alternated, in the order A B B A;
each fork is deleted after it is timed (not timed). Medians of ``--rounds`` rounds, on SQLite and PostgreSQL.

    python benchmarks/bench_fork.py [--messages 50000] [--rounds 5] [--no-pg]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from brutus import SessionStore  # noqa: E402
from brutus.importers import import_files  # noqa: E402
from corpus_helpers import all_files  # noqa: E402

DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/postgres"


def _copy(entry: Any) -> dict[str, Any]:
    """A message as ``append_messages`` takes it, its ids left for the store to assign."""
    dumped = entry.model_dump()
    info = {k: v for k, v in dumped["info"].items() if k not in ("id", "session_id", "seq", "parent_id")}
    parts = [{k: v for k, v in p.items() if k not in ("id", "session_id", "message_id")} for p in dumped["parts"]]
    return {"info": info, "parts": parts}


def build(store: SessionStore, messages: int) -> tuple[str, str]:
    """The corpus's largest session, and a session of ``messages`` messages made of copies of it."""
    import_files(store, all_files())
    largest = max(store.list_sessions(), key=lambda s: s.message_count)
    source = [_copy(m) for m in store.messages(largest.id)]
    big = store.create_session(title=f"{messages} messages").id
    written = 0
    while written < messages:
        chunk = source[: min(len(source), messages - written)]
        store.append_messages(big, chunk)
        written += len(chunk)
    store.settle()
    return largest.id, big


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(store: SessionStore, session_id: str, rounds: int) -> dict[str, float]:
    load: list[float] = []
    fork: list[float] = []

    def one_fork() -> None:
        made: list[str] = []
        fork.append(timed(lambda: made.append(store.fork(session_id).id)))
        store.delete_session(made[0])

    store.messages(session_id)  # warm
    for _ in range(rounds):
        load.append(timed(lambda: store.messages(session_id)))
        one_fork()
        one_fork()
        load.append(timed(lambda: store.messages(session_id)))
    return {"messages_s": statistics.median(load), "fork_s": statistics.median(fork)}


def run(url: str, label: str, messages: int, rounds: int) -> list[str]:
    rows = []
    with SessionStore.open(url) as store:
        largest, big = build(store, messages)
        for name, session_id in (("corpus's largest", largest), (f"{messages:,} messages", big)):
            count = store.get_session(session_id).message_count
            figures = measure(store, session_id, rounds)
            ratio = figures["fork_s"] / figures["messages_s"]
            rows.append(
                f"| {label} | {name} ({count:,} messages) | {figures['messages_s'] * 1000:,.0f} ms | "
                f"{figures['fork_s'] * 1000:,.0f} ms | {ratio:.2f}x |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--postgres", default=DEFAULT_PG, help="a server URL; the benchmark makes its own database")
    args = parser.parse_args()
    rows = ["| store | session | messages() | fork() | fork / messages() |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        rows += run(f"sqlite:///{Path(tmp) / 'fork.db'}", "SQLite", args.messages, args.rounds)
    if not args.no_pg:
        from sqlalchemy import create_engine, text

        name = f"brutus_bench_fork_{uuid.uuid4().hex[:8]}"
        admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        try:
            rows += run(args.postgres.rsplit("/", 1)[0] + f"/{name}", "PostgreSQL", args.messages, args.rounds)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
            admin.dispose()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
