"""What tenants cost on PostgreSQL's hot paths: the schema before them (0010), after them untenanted, and a
tenant's store, call for call, interleaved in one process.

Three stores on one server, each on a database of its own made for the run (``--db-prefix`` and the pid) and
dropped afterwards, all connected as ``--role`` (no superuser, so row-level security applies to it): one on
a database migrated to 0010 (no tenant column, no policies), one on a database at head untenanted (tenant
'': every statement carries the policy's filter), one on that database in a tenant (the policy, and the
``SET LOCAL`` that begins each transaction). The calls go round the three stores one at a time (each first
in turn), so what
the other processes on the machine do falls on all three alike; ``bench_calls.py --postgres`` compares
whole processes, base against this checkout, and is at the mercy of that noise. Prints the median of each
store's per-round medians in microseconds, and its ratio to the 0010 store.

    python benchmarks/bench_tenants.py --postgres postgresql+psycopg://root@127.0.0.1/postgres --role app
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import agent_step, whole_turn  # noqa: E402

from brutus import SessionStore  # noqa: E402
from brutus.db import migrate  # noqa: E402
from brutus.db.engine import make_engine  # noqa: E402

SIDES = ("0010", "head, untenanted", "head, tenant")


def _database(server: str, name: str, revision: str, role: str) -> str:
    """A new database at ``revision``, its tables granted to ``role``; its URL as ``role``."""
    admin = create_engine(make_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    url = make_url(server).set(database=name)
    engine = make_engine(url.render_as_string(hide_password=False))
    migrate.upgrade(engine, revision)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    engine.dispose()
    return url.set(username=role, password=None).render_as_string(hide_password=False)


def _drop(server: str, names: list[str]) -> None:
    admin = create_engine(make_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for name in names:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def _round(stores: list[SessionStore], sessions: list[str], call: Callable[[SessionStore, str, int], object], count: int, start: int) -> list[float]:
    """``call`` ``count`` times on each store in turn; each store's median, in microseconds."""
    times: list[list[float]] = [[] for _ in stores]
    for i in range(count):
        for step in range(len(stores)):
            n = (i + step) % len(stores)  # each store first in turn: no store always follows the same one
            began = time.perf_counter()
            call(stores[n], sessions[n], start + i)
            times[n].append(time.perf_counter() - began)
    return [statistics.median(t) * 1e6 for t in times]


def _batched(store: SessionStore, session: str, i: int) -> None:
    with store.batch():
        agent_step(store, session, i)


CALLS: dict[str, tuple[Callable[[SessionStore, str, int], object], int]] = {
    "get_session": (lambda store, session, i: store.get_session(session), 1000),
    "append_messages turn": (whole_turn, 200),
    "step, commit per call": (agent_step, 150),
    "step in batch()": (_batched, 200),
    "messages(), the history so far": (lambda store, session, i: store.messages(session), 30),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, metavar="URL", help="the server, as a role that may create databases")
    parser.add_argument("--role", required=True, help="the role the stores connect as (no superuser)")
    parser.add_argument("--db-prefix", default="brutus_bench_tenants_")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    names = [f"{args.db_prefix}{os.getpid()}_{n}" for n in ("before", "after")]
    try:
        before = _database(args.postgres, names[0], "0010", args.role)
        after = _database(args.postgres, names[1], "head", args.role)
        stores = [
            SessionStore(make_engine(before), index_in_background=False),  # open() would migrate it to head
            SessionStore.open(after, auto_migrate=False, index_in_background=False),
            SessionStore.open(after, auto_migrate=False, index_in_background=False, tenant="acme"),
        ]
        sessions = [store.create_session().id for store in stores]
        rounds: dict[str, list[list[float]]] = {name: [] for name in CALLS}
        offset = 0
        for _ in range(args.rounds):
            for name, (call, count) in CALLS.items():
                rounds[name].append(_round(stores, sessions, call, count, offset))
                offset += count
        for store in stores:
            store.close()
    finally:
        _drop(args.postgres, names)
    print(f"{'call':34}" + "".join(f"{side:>20}" for side in SIDES))
    for name, runs in rounds.items():
        medians = [statistics.median(run[n] for run in runs) for n in range(len(SIDES))]
        cells = [f"{medians[0]:12.1f} us"] + [f"{m:10.1f} {m / medians[0]:5.2f}x" for m in medians[1:]]
        print(f"{name:34}" + "".join(f"{cell:>20}" for cell in cells))


if __name__ == "__main__":
    main()
