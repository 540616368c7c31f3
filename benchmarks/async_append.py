"""Async append and load: ``AsyncSessionStore`` against ``SessionStore`` and OpenAI Agents' ``SQLAlchemySession``.

Append: one agent step (user message + text part, assistant message, tool part pending → running →
completed, text part, finish), with a commit per call and with the step inside ``batch()``. The peer stores
the same step as its four Responses items (user message, function_call, function_call_output, assistant
message): one ``add_items`` call per item, and all four in one call (what its Runner does per turn). Load:
the whole history of a session of ``--load-steps`` steps (``messages()`` / ``get_items()``).

SQLite in WAL mode; brutus sets ``synchronous=NORMAL``, the peer ships with SQLite's default (FULL), so it
is measured both as shipped and with ``synchronous=NORMAL`` added. The peer runs in its own virtualenv
(``openai-agents`` is no dependency of brutus): this script runs itself there with ``--peer-only``.

    python benchmarks/async_append.py [--steps N] [--load-steps N] [--rounds N]
        [--peers-python /tmp/peers/bin/python] [--postgres postgresql+psycopg://root@127.0.0.1:5432/test]

With ``--postgres`` the sync and async stores are measured on PostgreSQL too, in a database of their own
that is dropped afterwards. Prints a table of ms/step and ratios; writes JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

OUTPUT = "x" * 2000
RESULTS = Path(__file__).resolve().parent / "results"
PEER = "OpenAI Agents SQLAlchemySession (aiosqlite)"


# -- brutus -----------------------------------------------------------------------------------------------


def tool_part(i: int) -> dict[str, Any]:
    return {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending", "input": {"command": "ls"}}}


def sync_step(store: Any, session_id: str, i: int) -> None:
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": f"please do step {i}"})
    reply = store.append_message(session_id, "assistant", parent_id=user.id, model_id="claude-sonnet-4-5")
    tool = store.append_part(reply.id, tool_part(i))
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output=OUTPUT)
    store.append_part(reply.id, {"type": "text", "text": "done"})
    store.finish_message(reply.id, finish="stop", tokens={"input": 100, "output": 20})


async def async_step(store: Any, session_id: str, i: int) -> None:
    user = await store.append_message(session_id, "user")
    await store.append_part(user.id, {"type": "text", "text": f"please do step {i}"})
    reply = await store.append_message(session_id, "assistant", parent_id=user.id, model_id="claude-sonnet-4-5")
    tool = await store.append_part(reply.id, tool_part(i))
    await store.update_tool(tool.id, status="running")
    await store.update_tool(tool.id, status="completed", output=OUTPUT)
    await store.append_part(reply.id, {"type": "text", "text": "done"})
    await store.finish_message(reply.id, finish="stop", tokens={"input": 100, "output": 20})


def timed_sync(fn: Callable[[int], Any], steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        fn(i)
    return (time.perf_counter() - start) / steps * 1000


async def timed_async(fn: Callable[[int], Awaitable[Any]], steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        await fn(i)
    return (time.perf_counter() - start) / steps * 1000


def bench_sync(url: str, steps: int, load_steps: int, loads: int) -> dict[str, float]:
    from brutus import SessionStore

    store = SessionStore.open(url)
    per_call, batched, big = (store.create_session() for _ in range(3))
    sync_step(store, per_call.id, -1)  # warm up statement caches

    def in_batch(i: int) -> None:
        with store.batch():
            sync_step(store, batched.id, i)

    out = {
        "append, commit per call": timed_sync(lambda i: sync_step(store, per_call.id, i), steps),
        "append, step in batch": timed_sync(in_batch, steps),
    }
    for i in range(load_steps):
        with store.batch():
            sync_step(store, big.id, i)
    out["load"] = min(timed_sync(lambda _: store.messages(big.id), 1) for _ in range(loads))
    store.close()
    return out


async def bench_async(url: str, steps: int, load_steps: int, loads: int) -> dict[str, float]:
    from brutus import AsyncSessionStore

    store = await AsyncSessionStore.open(url)
    per_call, batched, big = [await store.create_session() for _ in range(3)]
    await async_step(store, per_call.id, -1)

    async def in_batch(i: int) -> None:
        async with store.batch():
            await async_step(store, batched.id, i)

    out = {
        "append, commit per call": await timed_async(lambda i: async_step(store, per_call.id, i), steps),
        "append, step in batch": await timed_async(in_batch, steps),
    }
    for i in range(load_steps):
        async with store.batch():
            await async_step(store, big.id, i)
    out["load"] = min([await timed_async(lambda _: store.messages(big.id), 1) for _ in range(loads)])
    await store.close()
    return out


class Threaded:
    """The sync store called from asyncio through ``asyncio.to_thread``, one thread hop per call: the other way
    an asyncio agent could use brutus on SQLite, measured to put the async store's figures in context."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.store, name)
        return lambda *args, **kwargs: asyncio.to_thread(method, *args, **kwargs)


async def bench_threaded(url: str, steps: int, load_steps: int, loads: int) -> dict[str, float]:
    from brutus import SessionStore

    sync_store = await asyncio.to_thread(SessionStore.open, url)
    store = Threaded(sync_store)
    per_call, big = [await store.create_session() for _ in range(2)]
    await async_step(store, per_call.id, -1)
    out = {"append, commit per call": await timed_async(lambda i: async_step(store, per_call.id, i), steps)}
    for i in range(load_steps):
        with sync_store.batch():
            sync_step(sync_store, big.id, i)
    out["load"] = min([await timed_async(lambda _: store.messages(big.id), 1) for _ in range(loads)])
    sync_store.close()
    return out


# -- the peer (runs in its own virtualenv; imports nothing from brutus) ----------------------------------------


def peer_items(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"please do step {i}"},
        {"type": "function_call", "call_id": f"c{i}", "name": "bash", "arguments": json.dumps({"command": "ls"})},
        {"type": "function_call_output", "call_id": f"c{i}", "output": OUTPUT},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done", "annotations": []}]},
    ]


async def bench_peer(path: str, steps: int, load_steps: int, loads: int, synchronous_normal: bool) -> dict[str, float]:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    if synchronous_normal:

        @event.listens_for(engine.sync_engine, "connect")
        def _normal(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.close()

    per_call, batched, big = (SQLAlchemySession(name, engine=engine, create_tables=True) for name in ("per_call", "batched", "big"))
    await per_call.add_items(peer_items(-1))

    async def one_by_one(i: int) -> None:
        for item in peer_items(i):
            await per_call.add_items([item])

    out = {
        "append, commit per call": await timed_async(one_by_one, steps),
        "append, step in batch": await timed_async(lambda i: batched.add_items(peer_items(i)), steps),
    }
    for i in range(load_steps):
        await big.add_items(peer_items(i))
    assert len(await big.get_items()) == 4 * load_steps
    out["load"] = min([await timed_async(lambda _: big.get_items(), 1) for _ in range(loads)])
    await engine.dispose()
    return out


def run_peer(python: str, args: argparse.Namespace, tmp: str, synchronous_normal: bool) -> dict[str, float]:
    path = Path(tmp) / f"peer-{uuid.uuid4().hex[:6]}.db"
    command = [python, __file__, "--peer-only", str(path), "--steps", str(args.steps), "--load-steps", str(args.load_steps), "--loads", str(args.loads)]
    if synchronous_normal:
        command.append("--synchronous-normal")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def peer_version(python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('openai-agents'), m.version('sqlalchemy'), m.version('aiosqlite'))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


# -- PostgreSQL -------------------------------------------------------------------------------------------------


def pg_database(url: str) -> tuple[str, Callable[[], None]]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from brutus.db.engine import normalize_url

    base = make_url(normalize_url(url))
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    name = f"brutus_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return base.set(database=name).render_as_string(hide_password=False), drop


# -- report -----------------------------------------------------------------------------------------------------


def summarize(rounds: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per store and measure: the median ms, and the medians of the per-round ratios to the sync store on the
    same backend and to the peer as shipped (ratios within a round are steadier on a busy machine)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, values in rounds.items():
        backend = "PostgreSQL" if "PostgreSQL" in name else "SQLite"
        refs = {"vs_sync": rounds.get(f"sync SessionStore ({backend})"), "vs_peer": rounds.get(PEER) if backend == "SQLite" else None}
        out[name] = {}
        for measure in values[0]:
            row = {"ms": statistics.median(v[measure] for v in values)}
            for key, ref in refs.items():
                if ref and measure in ref[0]:
                    row[key] = statistics.median(v[measure] / r[measure] for v, r in zip(values, ref))
            out[name][measure] = row
    return out


def print_table(summary: dict[str, dict[str, dict[str, float]]], load_steps: int) -> None:
    print(f"ms per agent step; load: ms to read the whole history of a {load_steps}-step session")
    print(f"{'store':<64} {'measure':<24} {'ms':>9} {'/ sync':>7} {'/ peer':>7}")
    for name, measures in summary.items():
        for measure, row in measures.items():
            ratios = [f"{row[k]:6.2f}x" if k in row else "" for k in ("vs_sync", "vs_peer")]
            print(f"{name:<64} {measure:<24} {row['ms']:>9.3f} {ratios[0]:>7} {ratios[1]:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--load-steps", type=int, default=1000, help="steps in the session that is loaded (4 peer items each)")
    parser.add_argument("--loads", type=int, default=5, help="loads timed, the best one counts")
    parser.add_argument("--rounds", type=int, default=3, help="rounds run, the median counts")
    parser.add_argument("--peers-python", default=os.environ.get("BRUTUS_PEERS_PYTHON", "/tmp/peers/bin/python"))
    parser.add_argument("--postgres", default=None, help="also measure on this PostgreSQL server")
    parser.add_argument("--json", type=Path, default=RESULTS / "async_append.json")
    parser.add_argument("--peer-only", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--synchronous-normal", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.peer_only:
        print(json.dumps(asyncio.run(bench_peer(args.peer_only, args.steps, args.load_steps, args.loads, args.synchronous_normal))))
        return

    has_peer = Path(args.peers_python).exists()
    rounds: dict[str, list[dict[str, float]]] = {}

    def record(name: str, value: dict[str, float]) -> None:
        rounds.setdefault(name, []).append(value)

    sizes = (args.steps, args.load_steps, args.loads)
    stores = {
        "sync SessionStore": lambda url: bench_sync(url, *sizes),
        "async AsyncSessionStore": lambda url: asyncio.run(bench_async(url, *sizes)),
    }
    threaded = "sync SessionStore via asyncio.to_thread (SQLite)"
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            for name, run in stores.items():
                record(f"{name} (SQLite)", run(f"sqlite:///{tmp}/{uuid.uuid4().hex[:6]}.db"))
            record(threaded, asyncio.run(bench_threaded(f"sqlite:///{tmp}/threaded.db", *sizes)))
            if has_peer:
                record(PEER, run_peer(args.peers_python, args, tmp, False))
                record(f"{PEER}, synchronous=NORMAL", run_peer(args.peers_python, args, tmp, True))
        if args.postgres:
            for name, run in stores.items():
                url, drop = pg_database(args.postgres)
                try:
                    record(f"{name} (PostgreSQL)", run(url))
                finally:
                    drop()
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    summary = summarize(rounds)
    print_table(summary, args.load_steps)
    if not has_peer:
        print(f"(peer skipped: no {args.peers_python}; pip install 'openai-agents[sqlalchemy]' aiosqlite into a separate virtualenv)")
    import sqlalchemy

    report = {
        "benchmark": "async_append",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "sqlalchemy": sqlalchemy.__version__},
        "peer": peer_version(args.peers_python) if has_peer else None,
        "steps": args.steps,
        "load_steps": args.load_steps,
        "rounds": args.rounds,
        "results": summary,
        "all_rounds": rounds,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
