"""Search bounded by its limit (issue 32, migration 0008): the newest 50 hits of a common word (in about a tenth
of all documents) and of a rare one, at two sizes 4x apart, on SQLite and PostgreSQL, the old query against
the new, and how flat the new one is (time at the large size / time at the small).

The stores are copies of the real corpus (tests/data/corpus): its sessions imported once, tool outputs cut
to 2,000 characters (the corpus's are large: whole files; a year of agent history averages about 2.6 KB a
message), then copied with plain SQL (ids suffixed, each copy's times shifted by its share of the corpus's
span, so the copies interleave over about a year) until the size is reached. SQLite indexes the copies (``settle``); PostgreSQL copies
the seed's vectors with the rows (the same text) and takes its statistics. Built databases are cached under
``--cache`` (default /tmp/h-search, never in the repository) and reused: delete the folder to rebuild.

The old query is the one before 0008 (every match joined to its message and sorted by time, then ``limit``),
run on the same database: the index's keys do not change what it returns. The new figure is
``store.search`` as a user calls it (snippets included), and its query alone. Median of ``--repeats``, the
old and the new alternated.

    python benchmarks/bench_search_limit.py [--sizes 250000,1000000] [--pg URL | --no-pg] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import bindparam, create_engine, func, literal_column, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from brutus import SessionStore  # noqa: E402
from brutus.db import search_ops  # noqa: E402
from brutus.db.convert import text_out  # noqa: E402
from brutus.db.engine import make_engine  # noqa: E402
from brutus.db.statements import M, P  # noqa: E402
from brutus.importers import import_file  # noqa: E402
from brutus.flows import Tx  # noqa: E402
from tests.corpus_helpers import all_files  # noqa: E402

DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"
OUTPUT_CHARS = 2_000
LIMIT = 50
TIMES = ("created_at", "updated_at", "completed_at", "archived_at", "started_at", "ended_at", "compacted_at")
KEEP = {"provider_id", "model_id"}  # columns named *_id that are not row ids
TABLES = ("sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions")


def _copy_sql(conn: Any, table: str, dialect: str) -> str:
    """INSERT … SELECT copying the seed's rows of ``table`` with ids suffixed by :sfx and times moved by :dt."""
    if dialect == "sqlite":
        names = [row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table})")]
    else:
        names = [r[0] for r in conn.exec_driver_sql(
            f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position")]
    names = [n for n in names if n != "search_xid"]
    values = []
    for name in names:
        if name in TIMES:
            values.append(f"{name} + :dt")
        elif (name == "id" or name.endswith("_id")) and name not in KEEP:
            values.append(f"{name} || :sfx")
        elif name == "call_id":
            values.append(f"call_id || :sfx")
        else:
            values.append(name)
    seed = {"sessions": "id", "tool_states": "session_id", "tool_outputs": None}.get(table, "session_id")
    where = (f"WHERE {seed} IN (SELECT id FROM seed_sessions)" if seed else
             "WHERE part_id IN (SELECT id FROM parts WHERE session_id IN (SELECT id FROM seed_sessions))")
    return f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)} FROM {table} {where}"


def _suffix(k: int) -> str:
    """Four characters (the corpus's longest ids leave room for four in 64)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "_" + "".join(digits[k // 36**i % 36] for i in (2, 1, 0))


def build(url: str, messages: int) -> dict[str, Any]:
    """The store at ``url``: the corpus, then copies of it up to ``messages`` messages, indexed."""
    store = SessionStore.open(url, index_in_background=False)
    dialect = store.engine.dialect.name
    for path in all_files():
        import_file(store, path)
    store.close()
    engine = make_engine(url)  # brutus's engine: its SQLite connections have sqlar_uncompress (the triggers' function)
    with engine.begin() as conn:
        # cut in Python: on SQLite a large output is packed (0009), its text read through brutus
        cut = [{"p": part_id, "o": text_out(output)[:OUTPUT_CHARS]}
               for part_id, output in conn.exec_driver_sql("SELECT part_id, output FROM tool_outputs")]
        conn.execute(text("UPDATE tool_outputs SET output = :o, output_size = NULL WHERE part_id = :p"), cut)
        conn.exec_driver_sql("CREATE TABLE seed_sessions AS SELECT id FROM sessions")
        per_copy = conn.exec_driver_sql("SELECT count(*) FROM messages").scalar()
        first, last = conn.exec_driver_sql("SELECT min(created_at), max(created_at) FROM messages").one()
    with SessionStore.open(url, index_in_background=False) as store:
        store.settle()  # the seed indexed (PostgreSQL: its vectors, copied below)
    span = last - first + 1
    statements = None
    copies = -(-messages // per_copy)
    started = time.perf_counter()
    for k in range(1, copies):
        with engine.begin() as conn:
            if statements is None:
                statements = [_copy_sql(conn, t, dialect) for t in TABLES]
                if dialect == "postgresql":
                    statements.append(
                        "INSERT INTO search_vectors (part_id, kind, vector, created_at) SELECT part_id || :sfx, kind, "
                        "vector, created_at + :dt FROM search_vectors WHERE part_id IN "
                        "(SELECT id FROM parts WHERE session_id IN (SELECT id FROM seed_sessions))")
            for sql in statements:  # copies interleave over the corpus's span and as long again
                conn.execute(text(sql), {"sfx": _suffix(k), "dt": k * (span // copies) + k})
        if k % 50 == 0:
            print(f"  {k}/{copies} copies, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    with engine.begin() as conn:
        if dialect == "postgresql":  # every copy committed: nothing pending
            conn.exec_driver_sql("UPDATE search_state SET indexed = pg_current_snapshot()")
    engine.dispose()
    started = time.perf_counter()
    with SessionStore.open(url, index_in_background=False) as store:
        store.settle()  # SQLite: FTS5 takes in the copies; PostgreSQL: ANALYZE
    with create_engine(make_url(url)).connect() as conn:
        counts = {t: conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() for t in ("messages", "parts")}
    return {**counts, "copies": copies, "index_s": time.perf_counter() - started}


def pick_words(url: str) -> tuple[str, float, str, float]:
    """A word in about a tenth of the documents and a rare one (in about 1 in 20,000), by their counts in the
    store (PostgreSQL's ``ts_stat`` would read every vector: the SQLite store's counts are the same text)."""
    raw = __import__("sqlite3").connect(url.removeprefix("sqlite:///"))
    raw.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, search_index, row)")
    total = raw.execute("SELECT count(*) FROM search_keys").fetchone()[0]
    common = raw.execute("SELECT term, doc FROM temp.vocab WHERE length(term) > 3 AND term GLOB '[a-z]*' "
                         "ORDER BY abs(doc - ?) LIMIT 1", (total // 10,)).fetchone()
    rare = raw.execute("SELECT term, doc FROM temp.vocab WHERE length(term) > 5 AND term NOT GLOB '*[^a-z]*' "
                       "ORDER BY abs(doc - ?), term LIMIT 1", (max(1, total // 20_000),)).fetchone()
    raw.close()
    return common[0], common[1] / total, rare[0], rare[1] / total


def old_query(dialect: str, word: str) -> tuple[Any, dict[str, Any]]:
    """The query before 0008: every match joined and sorted by its message's time, then the limit."""
    filters = {"session_id": None, "role": None, "tool": None, "since": None}
    if dialect == "sqlite":
        match = literal_column("search_index").op("MATCH")(bindparam("b_match"))
        keys = search_ops._KEYS
        hits = select(keys.c.part_id, keys.c.kind).select_from(
            search_ops._FTS.join(keys, keys.c.key == search_ops._FTS.c.rowid)).where(match).subquery("hits")
        params: dict[str, Any] = {"b_match": search_ops._fts_phrase(word)}
    else:
        vectors = search_ops._VECTORS
        tsquery = func.phraseto_tsquery(literal_column("'simple'::regconfig"), func.regexp_replace(
            bindparam("b_w0"), "[[:punct:]]+", " ", "g"))
        hits = select(vectors.c.part_id, vectors.c.kind).where(vectors.c.vector.op("@@")(tsquery)).subquery("hits")
        params = {"b_w0": word}
    statement = search_ops._hit_rows(hits, hits.c.part_id, hits.c.kind, filters).order_by(
        M.c.created_at.desc(), M.c.id.desc(), P.c.position.desc(), hits.c.kind).limit(LIMIT)
    return statement, params


def new_query(store: SessionStore, word: str) -> Any:
    """The new statements alone (no snippets): as ``search_ops.search`` runs them with nothing pending."""
    filters = {"session_id": None, "role": None, "tool": None, "since": None}
    if store.engine.dialect.name == "sqlite":
        return search_ops._sqlite_search([word], [], filters, LIMIT)
    return search_ops._pg_search([word], [], [], filters, LIMIT)


def measure(url: str, words: dict[str, str], repeats: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with SessionStore.open(url, index_in_background=False) as store:
        dialect = store.engine.dialect.name
        for label, word in words.items():
            statement, params = old_query(dialect, word)
            old_ids = None
            times: dict[str, list[float]] = {"old query": [], "new query": [], "new store.search": []}
            for round_ in range(repeats + 1):  # the first round warms the caches, not counted
                start = time.perf_counter()
                with store.engine.connect() as conn:
                    old = conn.execute(statement, params).fetchall()
                old_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                rows = store.run(Tx(new_query(store, word), write=False))
                new_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                hits = store.search(word, limit=LIMIT)
                search_ms = (time.perf_counter() - start) * 1000
                old_ids = [(r.part_id, r.kind) for r in old]
                assert old_ids == [(r.part_id, r.kind) for r in rows], f"{label}: the new query differs from the old"
                assert [h.part_id for h in hits] == [r.part_id for r in old]
                if round_ > 0:
                    times["old query"].append(old_ms)
                    times["new query"].append(new_ms)
                    times["new store.search"].append(search_ms)
            out[label] = {k: statistics.median(v) for k, v in times.items()}
            out[label]["hits"] = float(len(old_ids or []))
    return out


def _pg_url(base: str, name: str) -> str:
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        exists = conn.exec_driver_sql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").first()
    engine.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False), exists is not None


def _pg_create(base: str, name: str) -> None:
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,1000000", help="messages, comma separated (two, 4x apart)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cache", default="/tmp/h-search", help="where the built databases stay between runs")
    parser.add_argument("--pg", metavar="URL", default=DEFAULT_PG)
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[int, Any]] = {}
    words: dict[str, str] | None = None
    for size in sizes:
        urls = {"sqlite": f"sqlite:///{cache / f'search-{size}.db'}"}
        if not args.no_pg:
            urls["postgresql"] = f"pg:brutus_scratch_h_search_{size}"
        for backend, url in urls.items():
            if backend == "sqlite":
                fresh = not Path(url.removeprefix("sqlite:///")).exists()
            else:
                url, exists = _pg_url(args.pg, url.removeprefix("pg:"))
                fresh = not exists
                if fresh:
                    _pg_create(args.pg, make_url(url).database)
            if fresh:
                print(f"building {backend} at {size:,} messages …", file=sys.stderr, flush=True)
                started = time.perf_counter()
                info = build(url, size)
                print(f"  built in {time.perf_counter() - started:.0f} s: {info}", file=sys.stderr, flush=True)
            if words is None:
                common, c_share, rare, r_share = pick_words(urls["sqlite"])
                words = {f"common word ({common!r}, {c_share:.1%} of documents)": common,
                         f"rare word ({rare!r}, {r_share:.3%} of documents)": rare}
            results.setdefault(backend, {})[size] = measure(url, words, args.repeats)
    load = os.getloadavg()
    print(f"\nsearch, limit {LIMIT}, newest first; ms, median of {args.repeats}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    small, large = sizes[0], sizes[-1]
    for backend, by_size in results.items():
        print(f"\n{backend}")
        for label in words or {}:
            print(f"  {label}")
            for size in sizes:
                f = by_size[size][label]
                print(f"    {size:>9,} messages: old query {f['old query']:9.1f}   new query {f['new query']:7.1f}   "
                      f"new store.search {f['new store.search']:7.1f}   ({int(f['hits'])} hits, old/new {f['old query'] / f['new query']:6.1f}x)")
            flat = by_size[large][label]["new store.search"] / by_size[small][label]["new store.search"]
            old_flat = by_size[large][label]["old query"] / by_size[small][label]["old query"]
            print(f"    flatness ({large // small}x the data): new {flat:.2f}x the time (goal <= 1.5), old {old_flat:.2f}x")


if __name__ == "__main__":
    main()
