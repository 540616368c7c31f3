"""Search: what the full-text index (migrations 0004, 0005) costs the write path, and what a query costs.

The same code writes the same turns to two databases, one at revision 0003 (no index) and one at head
(SQLite: FTS5 filled by searches, with update and delete triggers; PostgreSQL: GIN expression indexes),
rounds alternating so a noisy neighbour hits both alike: a live agent step (``workload.agent_step``: 8 calls,
a commit each) and a finished turn in one ``append_messages`` call. Then query latency: the corpus's sessions
imported into the head database; the first search, which indexes all of it on SQLite; then a few searches
(a common word, a rare one, two words, a filtered one), median of repeats.

    python benchmarks/bench_search.py [--turns 200] [--rounds 7] [--pg URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from workload import agent_step, whole_turn

from brutus import SessionStore
from brutus.db import migrate
from brutus.db.engine import make_engine

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus"


def _store(url: str, revision: str) -> SessionStore:
    engine = make_engine(url)
    migrate.upgrade(engine, revision)
    return SessionStore(engine)  # the constructor does not migrate


def write_path(urls: dict[str, str], *, turns: int, rounds: int) -> dict[str, dict[str, float]]:
    """ms per turn (mean of each round's turns, median over rounds) per revision, for both ways of writing."""
    stores = {revision: _store(url, revision) for revision, url in urls.items()}
    sessions = {revision: store.create_session().id for revision, store in stores.items()}
    counter = iter(range(10**9))
    results: dict[str, dict[str, list[float]]] = {r: {"agent step": [], "whole turn": []} for r in stores}
    for revision, store in stores.items():  # warm-up
        for _ in range(20):
            agent_step(store, sessions[revision], next(counter))
    for _ in range(rounds):
        for kind, write in (("agent step", agent_step), ("whole turn", whole_turn)):
            for revision, store in stores.items():
                start = time.perf_counter()
                for _ in range(turns):
                    write(store, sessions[revision], next(counter))
                results[revision][kind].append((time.perf_counter() - start) * 1000 / turns)
    for store in stores.values():
        store.close()
    return {r: {k: statistics.median(v) for k, v in kinds.items()} for r, kinds in results.items()}


def query_latency(url: str, repeats: int = 15) -> dict[str, float]:
    from brutus import import_file

    store = SessionStore.open(url)
    for path in sorted(CORPUS.rglob("*")):
        if path.name.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")):
            try:
                import_file(store, path)
            except Exception:  # noqa: BLE001, S110  a file the importers refuse is not this benchmark's business
                pass
    queries = {"common word (the)": {"query": "the"}, "rare word (sqlite)": {"query": "sqlite"},
               "two words (test failed)": {"query": "test failed"},
               "filtered (error, --role assistant)": {"query": "error", "role": "assistant"}}
    start = time.perf_counter()
    store.search("anything")
    out = {"first search (indexes what the import wrote)": (time.perf_counter() - start) * 1000}
    for name, kwargs in queries.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            hits = store.search(limit=20, **kwargs)
            times.append((time.perf_counter() - start) * 1000)
        out[f"{name}: {len(hits)} hits"] = statistics.median(times)
    parts = store.engine.connect().exec_driver_sql("SELECT count(*) FROM parts").scalar()
    store.close()
    out["(parts searched)"] = float(parts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pg", metavar="URL", default=None, help="also PostgreSQL: two fresh databases made here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        backends = {"sqlite": {"0003": f"sqlite:///{tmp}/old.db", "head": f"sqlite:///{tmp}/head.db"}}
        if args.pg:
            backends["postgresql"] = {rev: _pg_database(args.pg, f"bench_search_{rev}") for rev in ("0003", "head")}
        for backend, urls in backends.items():
            figures = write_path(urls, turns=args.turns, rounds=args.rounds)
            print(f"\n{backend}: write path, ms per turn (median of {args.rounds} rounds of {args.turns} turns)")
            for kind in ("agent step", "whole turn"):
                old, new = figures["0003"][kind], figures["head"][kind]
                print(f"  {kind:<11} 0003 {old:7.3f}   head (indexed) {new:7.3f}   ratio {new / old:5.2f}")
            print(f"{backend}: query latency, ms (median), corpus imported")
            for name, ms in query_latency(urls["head"] if backend == "sqlite" else _pg_database(args.pg, "bench_search_q")).items():
                print(f"  {name:<45} {ms:8.2f}")


def _pg_database(url: str, name: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


if __name__ == "__main__":
    main()
