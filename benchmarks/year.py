"""A year of history (issue 32): every figure of the issue's table at two sizes 4x apart, on SQLite and
PostgreSQL, each against its goal.

The stores are copies of the real corpus sessions (``year_build``: imported with ``brutus.importers``, read
back, appended again with new ids through ``append_messages`` in 100-message calls), ``--messages`` N and 4N
messages each, plus a 50,000-message session for export (``--export-messages``). Everything goes through
the public API (``SessionStore``, ``brutus.importers``, the ``brutus export`` command), so the harness
measures whatever the code does; an API that is not there is reported "n/a". Per store, in this order:

1. the first search after the bulk writes (what they left pending for the index), then the view
   (``filter_compacted``) of a session whose last boundary is 200 messages back, right after the load and,
   on PostgreSQL, again after ANALYZE;
2. a common word (in about a tenth of the text and tool parts) and a rare one, ``limit=50`` (median);
3. ``list_sessions(limit=50)``: the first page and a page deep in the list (after the 10,000th session, or
   the middle one in a smaller store);
4. bytes on disk against the raw text stored (text parts, tool inputs, tool outputs), and where they go
   (SQLite ``dbstat``; PostgreSQL ``pg_total_relation_size`` / ``pg_relation_size`` / ``pg_indexes_size``);
5. (large stores, the two backends alternated A B B A) ``append_messages`` of history in 100-message calls;
6. gc dropping about 5% of the outputs (whole sessions pruned through ``store.prune`` first): its time and
   the peak extra disk, sampled from a thread (SQLite: the file and its WAL, by ``os.path.getsize``, never
   ``open()``; PostgreSQL: ``pg_database_size``), and the figures gc reports.

Then ``brutus export`` and ``messages()`` of the 50,000-message session, each in a child process: time and
peak RSS (VmHWM).

SQLite stores are cached under ``--cache`` (default /tmp/h-year), keyed by size and a hash of the code, and
copied (SQLite's backup API) for each run. PostgreSQL's are built in a database of their own every run and
dropped after: the build is the bulk load whose planner statistics and search backlog are measured (a
``pg_restore`` would leave other statistics than brutus's writes do), except the long session's, kept as a
``pg_dump`` file. The corpus's messages are heavy (about 2.6 KB of raw text each, and what the importers keep
beside it), so the 50,000-message session is a 0.9 GB SQLite file; the export probes run with their address
space capped (``--rss-cap``, 1,500 MB) and report "over the cap" rather than take the machine's memory.

Time on two cores shared with other work: the first run at the default sizes (10,000 / 40,000 messages) about
20 minutes, a rerun about 6 (PostgreSQL's builds, at 180-440 msg/s, and its first search are most of it);
``--quick`` (300 / 1,200 messages, a 200-message session) under a minute without its cache. The
issue's scale (``--messages 250000``: 250K / 1M messages, about 17,000 sessions) takes hours at these
write rates (each build's msg/s is printed).

    python benchmarks/year.py [--messages N] [--export-messages N] [--quick] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import year_build as yb  # noqa: E402
from harness import RESULTS, Config, Section, machine, pg_database  # noqa: E402
from year_report import BACKENDS, LIMIT, report  # noqa: E402

from brutus import CompactionConfig, SessionStore  # noqa: E402

NAME = "year"
PAGE = 50
DEFAULT_PG = os.environ.get("BRUTUS_BENCH_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test")
GC_SHARE = 0.05


@dataclass
class Store:
    """One built store being measured."""

    backend: str
    size: str  # "small" | "large"
    url: str
    built: yb.Built
    path: Path | None = None  # SQLite
    cached: bool = False
    figures: dict[str, Any] = field(default_factory=dict)

    def open(self) -> SessionStore:
        return SessionStore.open(self.url)

    @property
    def label(self) -> str:
        return f"{BACKENDS[self.backend]} {self.built.messages:,} msgs"


def ms(seconds: float) -> float:
    return seconds * 1000


def median_ms(call: Any, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return ms(statistics.median(samples))


# -- 1-3: search, the view, pages ------------------------------------------------------------------------------


def measure_reads(store: Store, words: dict[str, str], repeats: int) -> None:
    f = store.figures
    with store.open() as s:
        start = time.perf_counter()
        hits = s.search(words["rare"], limit=LIMIT)
        f["first_search_ms"] = ms(time.perf_counter() - start)
        f["first_search_hits"] = len(hits)
        view = s.filter_compacted(store.built.tail_session)
        f["view_messages"] = len(view)
        f["stats_before"] = pg_stats(store.url) if store.backend == "postgresql" else None
        f["view_ms"] = median_ms(lambda: s.filter_compacted(store.built.tail_session), repeats)
        if store.backend == "postgresql":
            analyze(store.url)
            f["view_analyzed_ms"] = median_ms(lambda: s.filter_compacted(store.built.tail_session), repeats)
        f["search"] = {}
        for kind, word in words.items():
            found = len(s.search(word, limit=LIMIT))
            f["search"][kind] = {"word": word, "hits": found,
                                 "ms": median_ms(lambda word=word: s.search(word, limit=LIMIT), repeats)}
        f["pages"] = measure_pages(s, repeats)


def measure_pages(s: SessionStore, repeats: int) -> dict[str, Any]:
    whole = s.list_sessions()
    deep = min(10_000, len(whole) // 2)
    out: dict[str, Any] = {"sessions": len(whole), "deep": deep}
    out["first_ms"] = median_ms(lambda: s.list_sessions(limit=PAGE), repeats * 3)
    if "after" not in inspect.signature(s.list_sessions).parameters:
        out["deep_ms"] = None
        return out
    cursor = whole[deep - 1].id
    if s.list_sessions(limit=PAGE, after=cursor) != whole[deep : deep + PAGE]:
        raise AssertionError(f"the page after the {deep}th session is not the list's")
    out["deep_ms"] = median_ms(lambda: s.list_sessions(limit=PAGE, after=cursor), repeats * 3)
    return out


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine

    return create_engine(url, isolation_level="AUTOCOMMIT")


def analyze(url: str) -> None:
    engine = _engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
    engine.dispose()


def pg_stats(url: str) -> dict[str, Any]:
    """When ``parts`` was last analyzed (by anyone) and how many rows the planner believes it holds."""
    engine = _engine(url)
    with engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL, c.reltuples "
            "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = 'parts'"
        ).first()
    engine.dispose()
    return {"parts_analyzed": bool(row[0]), "parts_reltuples": float(row[1])} if row else {}


# -- 4: bytes on disk -------------------------------------------------------------------------------------------


def sqlite_files(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def measure_disk(store: Store) -> None:
    if store.backend == "sqlite":
        assert store.path is not None
        yb.checkpoint(store.path)
        total = sqlite_files(store.path)
        breakdown = sqlite_breakdown(store.path)
    else:
        total, breakdown = pg_breakdown(store.url)
    raw = sum(store.built.raw.values())
    store.figures["disk"] = {"bytes": total, "raw": raw, "ratio": total / raw, "breakdown": breakdown}


def sqlite_breakdown(path: Path) -> list[dict[str, Any]]:
    """Bytes per table with its indexes (``dbstat``), largest first; FTS5's shadow tables under their table."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_schema").fetchall())
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError as exc:
        return [{"table": f"n/a: {exc} (SQLite without SQLITE_ENABLE_DBSTAT_VTAB)", "total": 0}]
    finally:
        conn.close()
    tables: dict[str, dict[str, int]] = {}
    for name, size in rows:
        table = owner.get(name, name)
        entry = tables.setdefault(table, {"table": 0, "indexes": 0})
        entry["table" if name == table else "indexes"] += size
    shadows = [t for t in tables if any(t.startswith(f"{v}_") for v in tables if v != t)]
    for shadow in shadows:  # search_index_data etc. → search_index
        base = next(v for v in tables if shadow.startswith(f"{v}_") and v != shadow)
        tables[base]["table"] += tables[shadow].pop("table")
        tables[base]["indexes"] += tables.pop(shadow)["indexes"]
    out = [{"table": t, "total": v["table"] + v["indexes"], "heap": v["table"], "indexes": v["indexes"]}
           for t, v in tables.items()]
    return sorted(out, key=lambda r: -r["total"])


def pg_breakdown(url: str) -> tuple[int, list[dict[str, Any]]]:
    """The database's brutus tables (total, heap, TOAST, indexes), largest first, and their sum."""
    engine = _engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql("CHECKPOINT")
        rows = conn.exec_driver_sql(
            "SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid), pg_indexes_size(c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname = current_schema()"
        ).fetchall()
        database = conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
    engine.dispose()
    out = [{"table": name, "total": total, "heap": heap, "toast": total - heap - indexes, "indexes": indexes}
           for name, total, heap, indexes in rows]
    out.sort(key=lambda r: -r["total"])
    out.append({"table": "(whole database, catalogs included)", "total": int(database)})
    return sum(r["total"] for r in out[:-1]), out


# -- 5: append_messages, the backends alternated -----------------------------------------------------------------


def measure_appends(stores: list[Store], templates: list[yb.Template], per_round: int) -> dict[str, float]:
    """msg/s of ``append_messages`` in 100-message calls into a new session of each store, A B B A."""
    order = stores + stores[::-1]
    elapsed = {s.backend: 0.0 for s in stores}
    count = {s.backend: 0 for s in stores}
    opened = {s.backend: s.open() for s in stores}
    try:
        for store in order:
            history = yb.history_of(templates, per_round)
            db = opened[store.backend]
            session = db.create_session(title="appended in 100-message calls")
            start = time.perf_counter()
            yb.append_in_calls(db, session.id, history)
            elapsed[store.backend] += time.perf_counter() - start
            count[store.backend] += len(history)
    finally:
        for db in opened.values():
            db.close()
    return {backend: count[backend] / elapsed[backend] for backend in elapsed}


# -- 6: gc ------------------------------------------------------------------------------------------------------


class DiskSampler:
    """The database's size sampled from a thread while gc runs: the peak and the size at the start."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = _engine(store.url) if store.backend == "postgresql" else None
        self.start = self.size()
        self.peak = self.start
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def size(self) -> int:
        if self.engine is None:
            assert self.store.path is not None
            return sqlite_files(self.store.path)
        with self.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one())

    def run(self) -> None:
        pause = 0.002 if self.engine is None else 0.02
        while not self.stop.wait(pause):
            self.peak = max(self.peak, self.size())
            self.samples += 1

    def __enter__(self) -> DiskSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.size())
        if self.engine is not None:
            self.engine.dispose()


def measure_gc(store: Store) -> None:
    """Prune whole sessions (protecting nothing) until about 5% of the raw output is pruned, then gc. The
    sessions are taken in list order, passing over one that would overshoot by a fifth (the smallest one when
    every one would)."""
    target = GC_SHARE * store.built.raw["output"]
    config = CompactionConfig(prune_protect=0, prune_minimum=0, protected_turns=0)
    with store.open() as s:
        chosen, total, smallest = [], 0, (float("inf"), "")
        for session in s.list_sessions():
            if total >= target:
                break
            if session.id == store.built.tail_session:
                continue
            size = s.prune(session.id, config, dry_run=True).pruned * 4  # tokens are a quarter of the bytes
            if size and total + size <= 1.2 * target:
                chosen.append(session.id)
                total += size
            elif size:
                smallest = min(smallest, (size, session.id))
        chosen = chosen or ([smallest[1]] if smallest[1] else [])
        for session_id in chosen:
            s.prune(session_id, config)
        if store.backend == "sqlite":
            yb.checkpoint(store.path)  # type: ignore[arg-type]
        vacuum_option = "vacuum" in inspect.signature(s.gc).parameters
        before = s.clock() + 1
        with DiskSampler(store) as disk:
            start = time.perf_counter()
            result = s.gc(before)
            seconds = time.perf_counter() - start
    dumped = result.model_dump()
    store.figures["gc"] = {
        "seconds": seconds,
        "dropped_bytes": result.output_bytes,
        "dropped_share": result.output_bytes / store.built.raw["output"],
        "parts": result.parts,
        "size_before": disk.start,
        "peak_extra": disk.peak - disk.start,
        "peak_extra_share": (disk.peak - disk.start) / disk.start,
        "samples": disk.samples,
        "vacuumed": dumped.get("vacuumed"),
        "vacuum_option": vacuum_option,
        "bytes_reclaimed": dumped.get("bytes_reclaimed"),
        "bytes_reusable": dumped.get("bytes_reusable"),
    }


# -- export and messages() of one long session, in child processes -----------------------------------------------

PROBE = """
import json, resource, sys, time
def peak_kb():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
what, url, session_id, output, cap_mb = sys.argv[1:6]
if int(cap_mb):  # address space, so a probe that would take the machine's memory stops with MemoryError
    resource.setrlimit(resource.RLIMIT_AS, (int(cap_mb) * 1024 * 1024,) * 2)
from brutus import SessionStore
from brutus.cli.app import main
with SessionStore.open(url) as store:
    store.get_session(session_id)
base = peak_kb()
start = time.perf_counter()
if what == "export":
    code = main(["export", session_id, "-o", output, "--db", url])
    assert code in (0, None), code
    count = None
else:
    with SessionStore.open(url) as store:
        count = len(store.messages(session_id))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "base_kb": base, "peak_kb": peak_kb(), "messages": count}))
"""


def probe(what: str, url: str, session_id: str, workdir: Path, cap_mb: int) -> dict[str, Any]:
    """Run ``what`` in a child process whose address space is capped at ``cap_mb`` (0: no cap); a probe
    that runs out of it reports ``capped`` (its peak RSS is then more than the cap allows; on PostgreSQL libpq
    says "out of memory for query result"), one that fails otherwise ``failed`` with its last line."""
    output = workdir / "export.json"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, what, url, session_id, str(output), str(cap_mb)],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        output.unlink(missing_ok=True)
        seconds = time.perf_counter() - start
        if any(sign in done.stderr for sign in ("MemoryError", "Cannot allocate memory", "out of memory")):
            return {"capped": cap_mb, "seconds": seconds, "peak_kb": None, "base_kb": None}
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"failed": lines[-1][:300], "seconds": seconds, "peak_kb": None, "base_kb": None}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if what == "export":
        result["bytes"] = output.stat().st_size
        output.unlink()
    return result


def measure_export(url: str, session_id: str, workdir: Path, cap_mb: int) -> dict[str, Any]:
    return {what: probe(what, url, session_id, workdir, cap_mb) for what in ("export", "messages")}


def pg_dump_cached(url: str, dump: Path, make: Any) -> None:
    """Restore ``dump`` into the (empty) database at ``url``, or ``make`` the store there and dump it."""
    from sqlalchemy.engine import make_url

    libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    if dump.exists():
        subprocess.run(["pg_restore", "--no-owner", "-d", libpq, str(dump)], check=True, capture_output=True)
        analyze(url)
        return
    make()
    scratch = dump.with_suffix(".tmp")
    subprocess.run(["pg_dump", "-Fc", "-f", str(scratch), libpq], check=True, capture_output=True)
    os.replace(scratch, dump)


# -- the run ----------------------------------------------------------------------------------------------------


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def prepare(backend: str, size: str, count: int, templates: list[yb.Template], cache: Path, workdir: Path,
            stack: ExitStack, pg_url: str | None) -> Store:
    if backend == "sqlite":
        def make(s: SessionStore) -> yb.Built:
            say(f"building the SQLite store of {count:,} messages (cached after)")
            return yb.build(s, templates, count, say)

        got = yb.cached_sqlite(cache, f"store-{count}", workdir, make)
        return Store(backend, size, f"sqlite:///{got.path}", got.built, got.path, got.hit)
    assert pg_url is not None
    url = stack.enter_context(pg_database(pg_url, "h_year"))
    say(f"building the PostgreSQL store of {count:,} messages")
    with SessionStore.open(url) as s:
        built = yb.build(s, templates, count, say)
    return Store(backend, size, url, built)


def export_session(backend: str, count: int, templates: list[yb.Template], cache: Path, workdir: Path,
                   pg_url: str | None, cap_mb: int) -> dict[str, Any]:
    meta = cache / f"export-{count}.session"
    if backend == "sqlite":
        def make(s: SessionStore) -> yb.Built:
            say(f"building a session of {count:,} messages (cached after)")
            built = yb.Built(messages=count, sessions=1)
            built.tail_session = yb.build_long(s, templates, count)
            return built

        got = yb.cached_sqlite(cache, f"export-{count}", workdir, make)
        try:
            return measure_export(f"sqlite:///{got.path}", got.built.tail_session, workdir, cap_mb)
        finally:
            yb.remove_sqlite(got.path)
    assert pg_url is not None
    with pg_database(pg_url, "h_year_export") as url:
        found: dict[str, str] = {}

        def make() -> None:
            say(f"building a PostgreSQL session of {count:,} messages (kept as a pg_dump after)")
            with SessionStore.open(url) as s:
                found["id"] = yb.build_long(s, templates, count)
            meta.write_text(found["id"])

        pg_dump_cached(url, cache / f"export-{count}.pgdump", make)
        return measure_export(url, found.get("id") or meta.read_text(), workdir, cap_mb)


def run(args: argparse.Namespace) -> Section:
    started = time.perf_counter()
    small = args.messages
    sizes = {"small": small, "large": 4 * small}
    repeats = args.repeats
    cache = args.cache / yb.code_key()
    workdir = args.cache / f"run-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    backends = ["sqlite"] + ([] if args.no_pg else ["postgresql"])
    section = Section(NAME, data={"commit": yb.commit(), "code_key": yb.code_key(), "sizes": sizes,
                                  "export_messages": args.export_messages, "repeats": repeats,
                                  "machine_at_start": machine()})
    try:
        say("reading the corpus")
        templates = yb.cached_corpus(cache, workdir)
        (common, common_share), (rare, rare_share) = yb.pick_words(templates)
        words = {"common": common, "rare": rare}
        section.data["words"] = {"common": [common, common_share], "rare": [rare, rare_share]}
        stores: list[Store] = []
        with ExitStack() as stack:
            for size, count in sizes.items():
                for backend in backends:
                    store = prepare(backend, size, count, templates, cache, workdir, stack, args.pg)
                    say(f"{store.label}: reads, pages, disk")
                    measure_reads(store, words, repeats)
                    measure_disk(store)
                    stores.append(store)
                    if size == "small":
                        say(f"{store.label}: gc")
                        measure_gc(store)
                        if store.path is not None:
                            yb.remove_sqlite(store.path)
            large = [s for s in stores if s.size == "large"]
            say("append_messages, the backends alternated")
            section.data["append_msg_s"] = measure_appends(large, templates, args.append_round)
            for store in large:
                say(f"{store.label}: gc")
                measure_gc(store)
                if store.path is not None:
                    yb.remove_sqlite(store.path)
        exports = {}
        for backend in backends:
            say(f"{BACKENDS[backend]}: export and messages() of {args.export_messages:,} messages")
            exports[backend] = export_session(backend, args.export_messages, templates, cache, workdir, args.pg,
                                              args.rss_cap)
        section.data["stores"] = [{"backend": s.backend, "size": s.size, "built": s.built.as_json(),
                                   "cached": s.cached, "figures": s.figures} for s in stores]
        section.data["export"] = exports
        report(section, stores, exports, words, section.data["words"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    section.seconds = time.perf_counter() - started
    section.data["machine_at_end"] = machine()
    return section


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None, help="the small store (the large is 4x): 10,000")
    parser.add_argument("--export-messages", type=int, default=None, help="the long session's length: 50,000")
    parser.add_argument("--repeats", type=int, default=None, help="per timed read (median): 7")
    parser.add_argument("--append-round", type=int, default=None, help="messages per append round: 2,000")
    parser.add_argument("--rss-cap", type=int, default=1_500, metavar="MB", help="address space of the export "
                        "and messages() probes (0: none): 1,500, ten times the goal")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check that it runs (seconds)")
    parser.add_argument("--pg", metavar="URL", default=DEFAULT_PG, help="the PostgreSQL server (a database is "
                        "made and dropped per store)")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/h-year"), help="where built stores are kept")
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR", help="where year.json goes")
    args = parser.parse_args(argv)
    quick = args.quick
    args.messages = args.messages or (300 if quick else 10_000)
    args.export_messages = args.export_messages or (200 if quick else 50_000)
    args.repeats = args.repeats or (1 if quick else 7)
    args.append_round = args.append_round or (100 if quick else 2_000)
    if args.messages < 300:
        parser.error("--messages must be at least 300 (the view's session alone takes more than 200)")
    section = run(args)
    print()
    print(f"year: sizes {args.messages:,} / {4 * args.messages:,} messages, commit {section.data['commit']}, "
          f"load average {section.data['machine_at_start']['loadavg']} at the start, "
          f"{section.data['machine_at_end']['loadavg']} at the end, {section.seconds:,.0f} s")
    print(section.render())
    cfg = Config(mode="quick" if quick else "full", tmp=args.cache, results=args.results)
    print(f"-> {section.write(cfg)}")


if __name__ == "__main__":
    main()
