"""Pages of the session list (``list_sessions(limit=..., after=...)``, migration 0007): a page deep in the list
against the first page, on SQLite and PostgreSQL, at 20,000 sessions (``--sessions``).

The sessions go in with plain SQL in one transaction (their ``updated_at`` spread over a year, one in three
sharing its millisecond with another, every tenth a child, every twentieth archived); then each page is read
through the store, ``repeats`` times (median, ms). The pages: the first; after the 10,000th session (by id:
the cursor's position looked up, then the range); the same with the ``Session`` as the cursor; the last; a
page 10,000 deep without archived sessions; and, for reference, what a page 10,000 deep cost without pages
(``limit=10,050``, the first 10,000 thrown away). Each page is one statement (by id, the cursor's
position is a subquery of it), so on PostgreSQL most of a page is the round trips of its transaction. PostgreSQL is measured right after the bulk insert (no
planner statistics yet) and again after ANALYZE. Ratios are of figures from the same run.

    python benchmarks/bench_pages.py [--sessions 20000] [--repeats 31] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import Config, Goal, Section, Table, pg_database, ratio, timed  # noqa: E402

from brutus import SessionStore  # noqa: E402

NAME = "pages"
PAGE = 50
YEAR_MS = 365 * 24 * 3600 * 1000
DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"


def fill(url: str, count: int) -> None:
    """``count`` sessions in one transaction, with plain SQL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    rng = random.Random(7)
    start = 1_764_000_000_000 - YEAR_MS
    rows = []
    for n in range(count):
        at = start + rng.randrange(YEAR_MS)
        if n % 3 == 2:
            at = rows[-1]["updated_at"]  # a tie: the order goes by id
        parent = rows[n - 1 - n % 10]["id"] if n % 10 else None
        rows.append({"id": f"ses_{n:08d}{rng.getrandbits(40):010x}", "parent_id": parent, "title": f"session {n}",
                     "created_at": at - 1000, "updated_at": at, "archived_at": at if n % 20 == 19 else None})
    engine = create_engine(make_url(url))
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO sessions (id, parent_id, title, created_at, updated_at, archived_at, last_seq, "
                 "boundary_seq) VALUES (:id, :parent_id, :title, :created_at, :updated_at, :archived_at, 0, 0)"),
            rows,
        )
    engine.dispose()


def analyze(url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(make_url(url))
    with engine.begin() as conn:
        conn.execute(text("ANALYZE sessions"))
    engine.dispose()


def pages(store: SessionStore, count: int, repeats: int) -> dict[str, dict[str, Any]]:
    """ms per page, each page checked against the whole list first."""
    whole = store.list_sessions()
    assert len(whole) == count
    deep = count // 2
    checks = {
        "first page": ({"limit": PAGE}, whole[:PAGE]),
        f"after the {deep:,}th (id)": ({"limit": PAGE, "after": whole[deep - 1].id}, whole[deep:deep + PAGE]),
        f"after the {deep:,}th (Session)": ({"limit": PAGE, "after": whole[deep - 1]}, whole[deep:deep + PAGE]),
        "last page": ({"limit": PAGE, "after": whole[-PAGE - 1].id}, whole[-PAGE:]),
        f"after the {deep:,}th, no archived": (
            {"limit": PAGE, "after": whole[deep - 1].id, "include_archived": False},
            [s for s in whole[deep:] if s.archived_at is None][:PAGE],
        ),
    }
    out = {}
    for label, (kwargs, expected) in checks.items():
        assert store.list_sessions(**kwargs) == expected, label
        out[label] = timed(lambda kwargs=kwargs: store.list_sessions(**kwargs), repeats=repeats, warmup=2)
    out[f"{deep:,} deep without pages (limit {deep + PAGE:,})"] = timed(
        lambda: store.list_sessions(limit=deep + PAGE)[deep:], repeats=max(3, repeats // 5), warmup=1
    )
    return out


def _table(backend: str, count: int, figures: dict[str, dict[str, Any]]) -> Table:
    first = figures["first page"]["median"]
    table = Table(f"{backend}: a page of {PAGE} sessions out of {count:,}", ["page", "ms (median)", "min", "vs first page"])
    for label, result in figures.items():
        table.add(label, result["median"], result["min"], ratio(result["median"], first))
    table.notes.append("the load average is in the JSON's machine figures: on two shared cores the median moves with it")
    return table


def run(cfg: Config, *, sessions: int | None = None, repeats: int | None = None) -> Section:
    count = sessions or cfg.pick(20_000, 20_000, 2_000)
    repeats = repeats or cfg.pick(31, 15, 5)
    section = Section(NAME, data={"sessions": count, "page": PAGE, "repeats": repeats})
    runs: dict[str, str] = {"sqlite": f"sqlite:///{cfg.workdir(NAME) / 'pages.db'}"}
    worst: dict[str, float] = {}
    with _pg(cfg) as pg_url:
        if pg_url:
            runs["postgresql"] = pg_url
        for backend, url in runs.items():
            SessionStore.open(url).close()
            fill(url, count)
            rounds = [("", False)] + ([(", after ANALYZE", True)] if backend == "postgresql" else [])
            for suffix, do_analyze in rounds:
                if do_analyze:
                    analyze(url)
                with SessionStore.open(url) as store:
                    figures = pages(store, count, repeats)
                label = backend + (", no planner statistics yet" if backend == "postgresql" and not suffix else suffix)
                section.tables.append(_table(label, count, figures))
                section.data[label] = figures
                paged = [r["median"] for name, r in figures.items() if "without pages" not in name]
                worst[label] = max(paged)
    for label, ms in worst.items():
        section.goals.append(Goal(f"any page at {count:,} sessions, {label}", ms, 5.0, " ms"))
    return section


def _pg(cfg: Config) -> Any:
    from contextlib import nullcontext

    return pg_database(cfg.pg_url, "bench_pages") if cfg.pg_url else nullcontext(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--pg", metavar="URL", default=DEFAULT_PG, help="the PostgreSQL server (a database is made and dropped)")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(mode="full", tmp=Path(tmp), pg_url=None if args.no_pg else args.pg)
        section = run(cfg, sessions=args.sessions, repeats=args.repeats)
        print(section.render())
        print(f"-> {section.write(cfg)}")


if __name__ == "__main__":
    main()
