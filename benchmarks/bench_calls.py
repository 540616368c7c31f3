"""The single-session hot paths, per call, this checkout against another (DESIGN §5's guards, ABBA).

Each side runs in a process of its own (``--base DIR``'s brutus on ``PYTHONPATH``, this checkout's
otherwise), in the order base, new, new, base, ``--rounds`` times; each process times, on a SQLite file of
its own: the finished turn in one ``append_messages``, an agent step of eight calls with a commit each and
the same in ``batch()`` (``workload``), ``messages()`` of 4,000 items, ``get_session``, and three calls on
``AsyncSessionStore``. Prints the median of each side's medians, in microseconds, and new / base.

    python benchmarks/bench_calls.py --base /path/to/old/checkout [--rounds 3]

``--postgres URL`` (a server, as a role that may create databases): the same on PostgreSQL, each process on
databases of its own (``--db-prefix`` and its pid), made and migrated as that role and dropped afterwards.
``--role NAME``: the stores connect as that role (no superuser: row-level security applies to it, migration
0011), granted on the tables. ``--tenant NAME``: the new side opens its stores in that tenant (the base side,
which may not know tenants, stays untenanted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _median_us(call, count: int) -> float:
    times = []
    for i in range(count):
        started = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


class Databases:
    """Where one side's stores live: SQLite files in a temporary directory, or PostgreSQL databases of this
    process's own (``--postgres``), made and migrated as the server's role, used as ``role``."""

    def __init__(self, tmp: str, postgres: str | None, prefix: str, role: str | None) -> None:
        self.tmp, self.postgres, self.prefix, self.role = tmp, postgres, prefix, role
        self.made: list[str] = []

    def url(self, name: str) -> str:
        if self.postgres is None:
            return f"sqlite:///{self.tmp}/{name}.db"
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        from brutus import SessionStore

        server = make_url(self.postgres)
        database = f"{self.prefix}{os.getpid()}_{name}"
        admin = create_engine(server, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
        admin.dispose()
        self.made.append(database)
        url = server.set(database=database)
        SessionStore.open(url.render_as_string(hide_password=False)).close()
        if self.role is None:
            return url.render_as_string(hide_password=False)
        owner = create_engine(url)
        with owner.begin() as conn:
            conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {self.role}")
        owner.dispose()
        return url.set(username=self.role, password=None).render_as_string(hide_password=False)

    def drop(self) -> None:
        if not self.made:
            return
        from sqlalchemy import create_engine

        admin = create_engine(self.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            for database in self.made:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.dispose()


def measure(postgres: str | None = None, prefix: str = "", role: str | None = None, tenant: str | None = None) -> dict[str, float]:
    """One side's figures, in this process's brutus."""
    options = {"tenant": tenant} if tenant else {}  # the base side may not know tenants
    with tempfile.TemporaryDirectory() as tmp:
        databases = Databases(tmp, postgres, prefix, role)
        try:
            return _measure(databases, options)
        finally:
            databases.drop()


def _measure(databases: Databases, options: dict[str, str]) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from workload import agent_step, whole_turn, write_turns

    from brutus import AsyncSessionStore, SessionStore

    figures = {}
    store = SessionStore.open(databases.url("calls"), index_in_background=False, **options)
    session = store.create_session().id
    figures["append_messages turn"] = _median_us(lambda i: whole_turn(store, session, i), 300)
    figures["step, commit per call"] = _median_us(lambda i: agent_step(store, session, 1000 + i), 300)

    def batched(i: int) -> None:
        with store.batch():
            agent_step(store, session, 5000 + i)

    figures["step in batch()"] = _median_us(batched, 300)
    long = store.create_session().id
    write_turns(store, long, 0, 1000)
    figures["messages() of 4,000 items"] = _median_us(lambda i: store.messages(long), 30)
    figures["get_session"] = _median_us(lambda i: store.get_session(session), 2000)
    store.close()
    async_url = databases.url("async")

    async def three_calls() -> float:
        astore = await AsyncSessionStore.open(async_url, index_in_background=False, **options)
        asession = (await astore.create_session()).id
        times = []
        for _ in range(600):
            started = time.perf_counter()
            user = await astore.append_message(asession, "user")
            await astore.append_part(user.id, {"type": "text", "text": "hi"})
            await astore.get_session(asession)
            times.append(time.perf_counter() - started)
        await astore.close()
        return statistics.median(times[100:]) * 1e6

    figures["async, three calls"] = asyncio.run(three_calls())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the code to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server to run on instead of SQLite files")
    parser.add_argument("--db-prefix", default="brutus_bench_calls_", help="the names of the databases made there")
    parser.add_argument("--role", help="the role the stores connect as (granted on the tables)")
    parser.add_argument("--tenant", help="the new side's stores open in this tenant")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one side, in this process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.postgres, args.db_prefix, args.role, args.tenant)))
        return
    sides: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    place = ["--db-prefix", args.db_prefix] + [f"--{k}={v}" for k in ("postgres", "role") if (v := getattr(args, k))]
    for _ in range(args.rounds):
        for side in ("base", "new", "new", "base"):
            env = {**os.environ, "PYTHONPATH": str(args.base.resolve())} if side == "base" else dict(os.environ)
            tenant = ["--tenant", args.tenant] if args.tenant and side == "new" else []
            command = [sys.executable, __file__, "--base", str(args.base), "--measure", *place, *tenant]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            sides[side].append(json.loads(done.stdout))
    print(f"{'call':28} {'base us':>10} {'new us':>10} {'new/base':>9}")
    for name in sides["base"][0]:
        base = statistics.median(run[name] for run in sides["base"])
        new = statistics.median(run[name] for run in sides["new"])
        print(f"{name:28} {base:10.1f} {new:10.1f} {new / base:8.2f}x")


if __name__ == "__main__":
    main()
