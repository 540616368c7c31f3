"""PostgreSQL: 16 writer processes appending agent turns at once, then an exact count of what they wrote.

Two phases on a throw-away database: each writer appends to a session of its own with a commit per call,
then all sixteen append to one shared session, a turn per ``store.batch()``. Reported: calls (appends) per
second over the phase's wall time, p50 / p99 latency of a call (of a turn in the batch phase), and the
check afterwards, in SQL: every message, part, tool state and output there, seqs gapless, and in the shared
session each turn's assistant message right after its user message (no interleaving inside a batch).
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from harness import Config, Goal, Section, Table, percentile, pg_database
from workload import agent_step

NAME = "pg_writers"
CALLS_PER_TURN = 8


class TimedStore:
    """Times every call made on the store it wraps (the writers' latency samples)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.samples: list[float] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.samples.append((time.perf_counter() - start) * 1000)

        return timed


def writer(url: str, index: int, tasks: Any, barrier: Any, results: Any) -> None:
    """One writer process, kept for both phases. A task is ``(turns, shared_id)``: with no shared session it
    appends to a session of its own with a commit per call, else to the shared one a batch per turn."""
    from brutus import SessionStore

    store = SessionStore.open(url, auto_migrate=False)
    for turns, shared_id in iter(tasks.get, None):
        session_id = shared_id or store.create_session(title=f"writer {index}").id
        timed = TimedStore(store)
        samples: list[float] = []
        errors = 0
        barrier.wait()
        began = time.time()
        for i in range(turns):
            try:
                if shared_id is None:
                    agent_step(timed, session_id, i)
                else:
                    start = time.perf_counter()
                    with store.batch():
                        agent_step(store, session_id, i)
                    samples.append((time.perf_counter() - start) * 1000)
            except Exception:  # noqa: BLE001  counted: a failed call is a lost write
                errors += 1
        ended = time.time()
        results.put(
            {
                "index": index,
                "session_id": session_id,
                "began": began,
                "ended": ended,
                "samples": timed.samples if shared_id is None else samples,
                "errors": errors,
            }
        )
    store.close()


class Writers:
    """``count`` writer processes, started once for both phases. They are forked where the platform can
    (sixteen fresh interpreters importing brutus take ~13 s on two cores); each opens its own store."""

    def __init__(self, url: str, count: int) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.barrier, self.results = context.Barrier(count), context.Queue()
        self.tasks = [context.Queue() for _ in range(count)]
        self.processes = [
            context.Process(target=writer, args=(url, n, self.tasks[n], self.barrier, self.results))
            for n in range(count)
        ]
        for process in self.processes:
            process.start()

    def phase(self, turns: int, shared_id: str | None) -> list[dict[str, Any]]:
        for queue in self.tasks:
            queue.put((turns, shared_id))
        return [self.results.get(timeout=600) for _ in self.processes]

    def close(self) -> None:
        for queue in self.tasks:
            queue.put(None)
        for process in self.processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()


def check(url: str, sessions: list[str], turns: int, *, shared: bool) -> dict[str, int]:
    """Exact counts, in SQL: what is missing (lost) and, in the shared session, turns split apart."""
    from sqlalchemy import create_engine, text

    from brutus.db.engine import normalize_url

    engine = create_engine(normalize_url(url))
    lost = interleaved = 0
    with engine.connect() as conn:
        for session_id in sessions:
            args = {"s": session_id}
            messages, top, distinct = conn.execute(
                text("SELECT count(*), coalesce(max(seq), 0), count(DISTINCT seq) FROM messages WHERE session_id = :s"),
                args,
            ).one()
            parts = conn.execute(text("SELECT count(*) FROM parts WHERE session_id = :s"), args).scalar_one()
            done = conn.execute(
                text("SELECT count(*) FROM tool_states WHERE session_id = :s AND status = 'completed'"), args
            ).scalar_one()
            outputs = conn.execute(
                text("SELECT count(*) FROM tool_outputs o JOIN parts p ON p.id = o.part_id WHERE p.session_id = :s"),
                args,
            ).scalar_one()
            lost += (2 * turns - messages) + (3 * turns - parts) + (turns - done) + (turns - outputs)
            lost += (top - messages) + (messages - distinct)  # gaps and duplicate seqs
            if shared:
                interleaved += conn.execute(
                    text(
                        "SELECT count(*) FROM messages a JOIN messages u ON u.id = a.parent_id "
                        "WHERE a.session_id = :s AND a.role = 'assistant' AND u.seq <> a.seq - 1"
                    ),
                    args,
                ).scalar_one()
    engine.dispose()
    return {"lost": lost, "interleaved": interleaved}


def run(cfg: Config) -> Section:
    writers = cfg.pick(16, 16, 4)
    own_turns, shared_turns = cfg.pick((60, 30), (20, 10), (3, 2))
    table = Table(
        f"PostgreSQL, {writers} writer processes at once (2 cores, the server on the same machine)",
        ["phase", "turns", "calls", "wall s", "calls/s", "turns/s", "p50 ms", "p99 ms", "lost", "interleaved"],
    )
    if not cfg.pg_url:
        table.notes.append("skipped: no PostgreSQL URL")
        return Section(NAME, [table])
    try:
        database = pg_database(cfg.pg_url, "brutus_bench")
        url = database.__enter__()
    except Exception as exc:  # noqa: BLE001  an unreachable server skips this benchmark
        table.notes.append(f"skipped: PostgreSQL not reachable ({str(exc).splitlines()[0]})")
        return Section(NAME, [table])
    data: dict[str, Any] = {"writers": writers}
    goals = []
    try:
        from brutus import SessionStore

        setup = SessionStore.open(url)
        shared_id = setup.create_session(title="shared by every writer").id
        setup.close()
        pool = Writers(url, writers)
        phases = (
            ("own session each, commit per call", own_turns, None),
            ("one shared session, batch per turn", shared_turns, shared_id),
        )
        try:
            found_by_phase = [pool.phase(turns, shared) for _, turns, shared in phases]
        finally:
            pool.close()
        for (name, turns, shared), found in zip(phases, found_by_phase, strict=True):
            sessions = [shared_id] if shared else [r["session_id"] for r in found]
            total_turns = turns * writers
            verdict = check(url, sessions, total_turns if shared else turns, shared=bool(shared))
            errors = sum(r["errors"] for r in found)
            wall = max(r["ended"] for r in found) - min(r["began"] for r in found)
            samples = [s for r in found for s in r["samples"]]
            calls = total_turns * CALLS_PER_TURN
            p50, p99 = percentile(samples, 50), percentile(samples, 99)
            table.add(
                name,
                total_turns,
                calls,
                wall,
                calls / wall,
                total_turns / wall,
                p50,
                p99,
                verdict["lost"] + errors,
                verdict["interleaved"] if shared else None,
            )
            data[name] = {
                "turns": total_turns,
                "calls": calls,
                "wall_s": wall,
                "calls_per_s": calls / wall,
                "p50_ms": p50,
                "p99_ms": p99,
                "errors": errors,
                **verdict,
                "latency_of": "a turn in batch()" if shared else "a call",
            }
            goals.append(Goal(f"{name}: lost or failed writes", float(verdict["lost"] + errors), 0.0, ""))
            if shared:
                goals.append(Goal(f"{name}: turns split apart", float(verdict["interleaved"]), 0.0, ""))
    finally:
        database.__exit__(None, None, None)
    table.notes.append(
        "latency: of one call with a commit each; in the shared phase, of one turn (8 calls) inside batch()"
    )
    return Section(NAME, [table], goals, data)
