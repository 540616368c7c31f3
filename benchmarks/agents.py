"""Many agents on one PostgreSQL: the most agents held with p99 step latency <= 100 ms (DESIGN §5, issue 37).

Each simulated agent drives a live ``Conversation`` on a session of its own. Its "model" thinks 1-3 s
(seeded random) and answers with a response dict shaped like the Messages API's: some text and one or two
``tool_use`` blocks, or an ``end_turn``. A **step** is what the agent waits for brutus between two answers:
``record(response)``, then ``tool_results(...)`` (the tools answer at once, ~2 KB each) or, after an
``end_turn``, the next ``user(...)`` turn, then ``request()``. A small model window (``ModelLimits``) makes
``request()`` compact now and then (the offline ``ExtractiveSummarizer``), inside the step that crosses it. A
session starts part way through that cycle (a random number of steps written at once, in a batch), so the
compactions of a level's agents spread out as in a fleet that has run a while (``--no-phase``: all empty, all
compacting in one wave). Half way through each level's warm-up the tables are analyzed, so the planner's
statistics are current, as autovacuum keeps them in a fleet that has run a while (``--no-analyze``: left to
autovacuum; the fresh database grows tenfold in a run's first minutes, faster than its analyze follows, and
the view's query of a session's tail then reads every part: 6-11 ms a call instead of 0.9).

Agents run as ``--processes`` processes, each with one store: asyncio tasks on an ``AsyncSessionStore``
(``--store async``) or threads on a ``SessionStore`` (``--store sync``). The run steps the number of agents
up (``--levels``), each level ``--warmup`` s then a measured ``--window`` s, and stops after two levels in a
row whose p99 is over ``--p99`` ms or that had errors; the most agents held is the largest level that kept
both. Per level: steps/s, p50 / p99 of the steps without a compaction (the steps whose ``request()``
compacted are counted apart: their p50, and the p99 of all steps), errors, the client's CPU per step (every
agent process, ``time.process_time``), the server's (``/proc`` of the database's backends), statements and
round trips per step (SQLAlchemy's cursor, pool and commit events: statements + BEGIN and COMMIT per
transaction, and a pre-ping per checkout where a pool pings), and how many sampled backends were running or
waiting on a lock (and on what, in the JSON). Afterwards it checks, in SQL, that every acknowledged write is there (each message whose
call returned, each tool call whose result was acknowledged, completed) and that every session's seqs are
1..n without a gap, and exits 1 otherwise.

    python benchmarks/agents.py                         # both stores, each on a fresh database on 127.0.0.1:5432
    python benchmarks/agents.py --store async --url postgresql+psycopg://root@127.0.0.1:6432/db   # a pooler
    python benchmarks/agents.py --quick                 # a few agents, seconds per level (the smoke test)
    PYTHONPATH=/other/checkout python benchmarks/agents.py --step-cpu 150   # one agent's CPU a step, no thinking
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, Table, machine, percentile, pg_database  # noqa: E402

NAME = "agents"
DEFAULT_URL = "postgresql+psycopg://root@127.0.0.1:5432/postgres"
MODEL = "claude-sonnet-4-5"
SYSTEM = "You are a coding agent. Work in the repository you are given; run the tests before you answer."
TOOLS = [
    {"name": "bash", "description": "Run a shell command", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "read_file", "description": "Read a file", "input_schema": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]
WINDOW_TOKENS = 40_000  # the model's context: a compaction every ~40 steps at ~2 KB of tool output a step
OUTPUT_LINE = "tests/test_sync.py::test_{n} PASSED  [{p:3d}%]  elapsed {t:.3f}s  worker gw{w}\n"
OUTPUTS = ["".join(OUTPUT_LINE.format(n=n, p=100 * n // lines, t=n / 7, w=n % 4) for n in range(lines))
           for lines in range(15, 36, 4)]


@dataclass
class Options:
    url: str
    store: str  # "async" | "sync"
    processes: int
    levels: list[int]
    warmup: float
    window: float
    p99: float
    think: tuple[float, float] = (1.0, 3.0)
    seed: int = 37
    pool_size: int = 8
    indexer: bool = True  # the store's background search indexer (``brutus.db.indexer``)
    phased: bool = True  # each session starts part way through a compaction cycle (``_history_steps``)
    analyze: bool = True  # the tables analyzed in each level's warm-up
    switch_interval: float | None = None  # the agent processes' ``sys.setswitchinterval`` (None: Python's 5 ms)


# -- the model: what each agent is told and answers, seeded ------------------------------------------------------


class Model:
    """One agent's fake model: prompts, responses (text + tool calls, or an end of turn) and tool results."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0

    def think(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)

    def prompt(self) -> str:
        return self.rng.choice(("Why does test_sync fail?", "Add a --verbose flag to the CLI.",
                                "Refactor the store's retry loop.", "Make the flaky test deterministic.")) + (
            f" (ticket {self.rng.randrange(10_000)})")

    def response(self, tokens_in: int) -> dict[str, Any]:
        """A response: one or two tool calls, or (one time in five) the end of the turn."""
        ends = self.rng.random() < 0.2
        text = "Let me look at the failing test first. " * self.rng.randint(1, 4)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if not ends:
            for _ in range(self.rng.choice((1, 1, 2))):
                self.calls += 1
                command = f"pytest -x tests/test_sync.py -k case_{self.calls}"
                content.append({"type": "tool_use", "id": f"toolu_{self.rng.getrandbits(64):016x}{self.calls:05d}",
                                "name": "bash", "input": {"command": command}})
        output = self.rng.randint(60, 400)
        return {"id": f"msg_{self.rng.getrandbits(64):016x}", "type": "message", "role": "assistant", "model": MODEL,
                "content": content, "stop_reason": "end_turn" if ends else "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 40, "output_tokens": output, "cache_read_input_tokens": max(0, tokens_in - 40),
                          "cache_creation_input_tokens": 0}}

    def results(self, response: dict[str, Any]) -> list[dict[str, Any]]:
        """~2 KB of output per call (one of a few made once: the harness's own CPU stays out of the figures);
        one in ten fails."""
        return [{"tool_use_id": block["id"], "content": self.rng.choice(OUTPUTS), "is_error": self.rng.random() < 0.1}
                for block in response["content"] if block["type"] == "tool_use"]


def tool_calls(response: dict[str, Any]) -> list[str]:
    return [b["id"] for b in response["content"] if b["type"] == "tool_use"]


@dataclass
class Ledger:
    """What one agent's calls acknowledged (returned without error): to find in the database afterwards."""

    session_id: str
    messages: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # tool_use ids whose results were acknowledged


@dataclass
class Counters:
    """A process's samples and counts, reset at the start of each measured window."""

    samples: list[float] = field(default_factory=list)  # ms of each step without a compaction
    compacting: list[float] = field(default_factory=list)  # ms of each step whose request() compacted
    errors: int = 0
    unstarted: int = 0  # agents that failed to start (never reset: they are missing from every later window)
    last_error: str = ""

    def add(self, ms: float, compacted: bool) -> None:
        (self.compacting if compacted else self.samples).append(ms)


# -- one agent, either store --------------------------------------------------------------------------------------


def conversation(store: Any, session_id: str) -> Any:
    from brutus import ContextPolicy, ModelLimits
    from brutus.summarizers import ExtractiveSummarizer

    return store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=4096,
                              limits=ModelLimits(context=WINDOW_TOKENS, output=4096),
                              policy=ContextPolicy(), summarizer=ExtractiveSummarizer())


def _acknowledge(ledger: Ledger, response: dict[str, Any], recorded: Any, answered: Any) -> None:
    ledger.messages.append(recorded.id)
    if tool_calls(response):
        ledger.calls += tool_calls(response)
    else:
        ledger.messages.append(answered.id)


PHASE_STEPS = 40  # about the steps between two compactions at WINDOW_TOKENS
STEP_TOKENS = 700  # about what a step adds to the context (``request()`` measures it; the history has none)


def _history_steps(model: Model, opts: Options) -> int:
    """How many steps a new session starts with: a random share of a compaction cycle (``--no-phase``: none).
    A fleet that has run a while has its compactions spread out; sessions all started empty would compact
    in one wave about ``PHASE_STEPS`` steps in (the first level's agents together, a few levels later)."""
    return model.rng.randrange(PHASE_STEPS) if opts.phased else 0


def _history(conv: Any, model: Model, ledger: Ledger, steps: int) -> None:
    """``steps`` steps without thinking and without requests, into ``ledger`` (the caller's batch commits
    them: a scratch ledger, merged once it did)."""
    for n in range(steps):
        _answer(conv, model, ledger, model.response(STEP_TOKENS * (n + 1)))  # the usage a request would have had


async def _ahistory(conv: Any, model: Model, ledger: Ledger, steps: int) -> None:
    for n in range(steps):
        await _aanswer(conv, model, ledger, model.response(STEP_TOKENS * (n + 1)))


def _answer(conv: Any, model: Model, ledger: Ledger, response: dict[str, Any]) -> None:
    """A step's writes: ``record(response)``, then its tool results or the next user turn; acknowledged."""
    recorded = conv.record(response)
    answered = conv.tool_results(model.results(response)) if tool_calls(response) else conv.user(model.prompt())
    _acknowledge(ledger, response, recorded, answered)


async def _aanswer(conv: Any, model: Model, ledger: Ledger, response: dict[str, Any]) -> None:
    recorded = await conv.record(response)
    if tool_calls(response):
        answered = await conv.tool_results(model.results(response))
    else:
        answered = await conv.user(model.prompt())
    _acknowledge(ledger, response, recorded, answered)


def sync_agent(store: Any, model: Model, opts: Options, counters: Counters, stop: threading.Event, ledgers: list[Ledger]) -> None:
    """An agent on a thread: think, then a step, until ``stop``."""
    try:
        session_id = store.create_session(title="agent").id
        ledger = Ledger(session_id)
        ledgers.append(ledger)
        conv = conversation(store, session_id)
        ledger.messages.append(conv.user(model.prompt()).id)
        history = Ledger(session_id)
        with store.batch():
            _history(conv, model, history, _history_steps(model, opts))
        ledger.messages += history.messages
        ledger.calls += history.calls
        conv.request()
    except Exception as exc:  # noqa: BLE001  an agent that could not start is an error of every window after
        counters.unstarted += 1
        counters.last_error = repr(exc)[:300]
        return
    while not stop.wait(model.think(*opts.think)):
        response = model.response(conv.last.tokens_after)
        started = time.perf_counter()
        try:
            _answer(conv, model, ledger, response)
            conv.request()
        except Exception as exc:  # noqa: BLE001  counted; the agent goes on from what the store holds
            counters.errors += 1
            counters.last_error = repr(exc)[:300]
            conv = _resume(store, session_id, conv, model, ledger)
            continue
        counters.add((time.perf_counter() - started) * 1000, conv.last.compacted)


def _resume(store: Any, session_id: str, conv: Any, model: Model, ledger: Ledger) -> Any:
    """After a failed step (sync): a new conversation answers what is left waiting, or starts a new turn (the
    old one is kept if even that fails: the next step tries again)."""
    try:
        conv = conversation(store, session_id)
        if calls := conv.pending_calls():
            conv.tool_results(model.results({"content": calls}))
            ledger.calls += [c["id"] for c in calls]
        else:
            ledger.messages.append(conv.user(model.prompt()).id)
        conv.request()
    except Exception:  # noqa: BLE001  the next step tries again
        pass
    return conv


async def async_agent(store: Any, model: Model, opts: Options, counters: Counters, stop: asyncio.Event, ledgers: list[Ledger]) -> None:
    """An agent as an asyncio task: ``sync_agent`` awaited."""
    try:
        session_id = (await store.create_session(title="agent")).id
        ledger = Ledger(session_id)
        ledgers.append(ledger)
        conv = conversation(store, session_id)
        ledger.messages.append((await conv.user(model.prompt())).id)
        history = Ledger(session_id)
        async with store.batch():
            await _ahistory(conv, model, history, _history_steps(model, opts))
        ledger.messages += history.messages
        ledger.calls += history.calls
        await conv.request()
    except Exception as exc:  # noqa: BLE001
        counters.unstarted += 1
        counters.last_error = repr(exc)[:300]
        return
    while not await _stopped(stop, model.think(*opts.think)):
        response = model.response(conv.last.tokens_after)
        started = time.perf_counter()
        try:
            await _aanswer(conv, model, ledger, response)
            await conv.request()
        except Exception as exc:  # noqa: BLE001
            counters.errors += 1
            counters.last_error = repr(exc)[:300]
            conv = await _aresume(store, session_id, conv, model, ledger)
            continue
        counters.add((time.perf_counter() - started) * 1000, conv.last.compacted)


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    """Think for ``seconds`` (a plain sleep: one timer, no task), then whether the run is over."""
    await asyncio.sleep(seconds)
    return stop.is_set()


async def _aresume(store: Any, session_id: str, conv: Any, model: Model, ledger: Ledger) -> Any:
    try:
        conv = conversation(store, session_id)
        if calls := await conv.pending_calls():
            await conv.tool_results(model.results({"content": calls}))
            ledger.calls += [c["id"] for c in calls]
        else:
            ledger.messages.append((await conv.user(model.prompt())).id)
        await conv.request()
    except Exception:  # noqa: BLE001
        pass
    return conv


# -- a process of agents ------------------------------------------------------------------------------------------


class Wire:
    """Statements, pool checkouts (each one a pre-ping when the pool pings) and transactions of one engine.
    Round trips: a statement each, but one for a run of statements psycopg pipelines (``runner.drive``), and
    a BEGIN and a COMMIT (or ROLLBACK) each for a transaction, none for a connection in autocommit.

    Statements on psycopg's sync connections are counted by their cursors (a ``cursor_factory`` set as a
    connection is checked out), not by a ``before_cursor_execute`` listener: with one installed, brutus runs
    every statement through SQLAlchemy Core (``brutus.db.pg_driver``), and the benchmark would measure that
    path instead. An async engine's (a batch, the compaction lock) run through Core anyway: a listener counts
    those."""

    def __init__(self, *engines: Any) -> None:
        import psycopg
        from sqlalchemy import event

        self.statements = self.checkouts = self.commits = self.rollbacks = self.connects = 0
        self.piped = self.autocommitted = 0  # statements sent in a pipeline after the run's first; ends in autocommit
        self.pings = any(getattr(engine.pool, "_pre_ping", False) for engine in engines)  # brutus's engines: none
        wire = self

        class Counted(psycopg.Cursor):  # type: ignore[type-arg]
            def execute(self, *args: Any, **kwargs: Any) -> Any:
                wire._statement(self.connection)
                return super().execute(*args, **kwargs)

            def executemany(self, *args: Any, **kwargs: Any) -> Any:
                wire._statement(self.connection)
                return super().executemany(*args, **kwargs)

        self._cursor, self._sync = Counted, psycopg.Connection
        for engine in engines:
            event.listen(engine, "connect", self._connect)
            if engine.dialect.is_async:
                event.listen(engine, "before_cursor_execute", self._executed)
            event.listen(engine, "commit", self._commit)
            event.listen(engine, "rollback", self._rollback)
            event.listen(engine.pool, "checkout", self._checkout)

    def _executed(self, conn: Any, *args: Any) -> None:
        self._statement(conn.connection.driver_connection)

    def _statement(self, driver: Any) -> None:
        self.statements += 1
        piped = bool(getattr(getattr(driver, "pgconn", None), "pipeline_status", 0))
        if piped and getattr(driver, "brutus_piped", False):
            self.piped += 1
        driver.brutus_piped = piped

    def _ended(self, conn: Any) -> bool:
        """Whether the transaction that ended was one on the wire (not a connection in autocommit)."""
        driver = conn.connection.driver_connection
        driver.brutus_piped = False
        if getattr(driver, "autocommit", False):
            self.autocommitted += 1
            return False
        return True

    def _commit(self, conn: Any, *args: Any) -> None:
        self.commits += self._ended(conn)

    def _rollback(self, conn: Any, *args: Any) -> None:
        self.rollbacks += self._ended(conn)

    def _checkout(self, dbapi_connection: Any, *args: Any) -> None:
        self.checkouts += 1
        if isinstance(dbapi_connection, self._sync):  # psycopg's sync one (an async engine's is an adapter)
            dbapi_connection.cursor_factory = self._cursor

    def _connect(self, *args: Any) -> None:
        self.connects += 1

    def snapshot(self) -> dict[str, int]:
        transactions = self.commits + self.rollbacks
        trips = self.statements - self.piped + 2 * transactions + (self.checkouts if self.pings else 0)
        return {"statements": self.statements, "transactions": transactions, "checkouts": self.checkouts,
                "round_trips": trips, "connects": self.connects}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}


class Reporter:
    """A process's side of the window protocol: ``mark`` starts a window, ``collect`` ends it."""

    def __init__(self, counters: Counters, wire: Wire) -> None:
        self.counters, self.wire = counters, wire
        self.cpu, self.at = time.process_time(), wire.snapshot()

    def mark(self) -> None:
        self.counters.samples.clear()
        self.counters.compacting.clear()
        self.counters.errors = 0
        self.cpu, self.at = time.process_time(), self.wire.snapshot()

    def collect(self) -> dict[str, Any]:
        c = self.counters
        return {"samples": list(c.samples), "compacting": list(c.compacting), "errors": c.errors + c.unstarted,
                "last_error": c.last_error,
                "cpu_s": time.process_time() - self.cpu, "wire": _delta(self.wire.snapshot(), self.at)}


# ``--pool-size`` by default: POOLS / processes. With the overflow and the async store's second pool (batches),
# the processes may hold three times as many connections: within PostgreSQL's default max_connections of 100.
POOLS = 32


def _engine_options(opts: Options) -> dict[str, Any]:
    """Each process's pool: ``pool_size`` connections and half as many more (the server's ``max_connections``
    is shared with whatever else runs there). The pool closes an overflow connection as it is given back, so
    one too small for the calls at once opens connections all the time, and its steps wait for them: at 200
    agents through pgbouncer, 8 + 4 opened 9-13 connections a window and had p99 79-96 ms where 16 + 8 opened
    none and had 49-70 ms (benchmarks/RESULTS.md)."""
    return {"pool_size": opts.pool_size, "max_overflow": opts.pool_size // 2}


def sync_process(opts: Options, index: int, commands: Any, replies: Any) -> None:
    """Agents on threads over one ``SessionStore``, run by the parent's commands."""
    if opts.switch_interval:
        sys.setswitchinterval(opts.switch_interval)
    from brutus import SessionStore
    from brutus.db.engine import make_engine

    store = SessionStore(make_engine(opts.url, **_engine_options(opts)), url=opts.url, index_in_background=opts.indexer)
    counters, stop, ledgers, threads = Counters(), threading.Event(), [], []
    reporter = Reporter(counters, Wire(store.engine))
    for command, arg in iter(commands.get, None):
        if command == "add":
            for n in range(arg):
                model = Model(opts.seed * 1_000_003 + index * 10_007 + len(threads))
                thread = threading.Thread(target=sync_agent, args=(store, model, opts, counters, stop, ledgers), daemon=True)
                thread.start()
                threads.append(thread)
            replies.put(("added", index))
        elif command == "mark":
            reporter.mark()
            replies.put(("marked", index))
        elif command == "collect":
            replies.put(("collected", reporter.collect()))
        elif command == "stop":
            stop.set()
            for thread in threads:
                thread.join(60)
            replies.put(("ledgers", [asdict(ledger) for ledger in ledgers]))
    store.close()


def async_process(opts: Options, index: int, commands: Any, replies: Any) -> None:
    if opts.switch_interval:
        sys.setswitchinterval(opts.switch_interval)
    asyncio.run(_async_process(opts, index, commands, replies))


async def _async_process(opts: Options, index: int, commands: Any, replies: Any) -> None:
    from brutus import AsyncSessionStore
    from brutus.db.async_engine import make_async_engine, twin_engine

    store = AsyncSessionStore(make_async_engine(opts.url, **_engine_options(opts)), url=opts.url,
                              index_in_background=opts.indexer)
    counters, stop, ledgers, tasks = Counters(), asyncio.Event(), [], []
    reporter = Reporter(counters, Wire(store.engine.sync_engine, twin_engine(store.engine)))  # the calls: the twin's
    while (message := await asyncio.to_thread(commands.get)) is not None:
        command, arg = message
        if command == "add":
            for n in range(arg):
                model = Model(opts.seed * 1_000_003 + index * 10_007 + len(tasks))
                tasks.append(asyncio.create_task(async_agent(store, model, opts, counters, stop, ledgers)))
            replies.put(("added", index))
        elif command == "mark":
            reporter.mark()
            replies.put(("marked", index))
        elif command == "collect":
            replies.put(("collected", reporter.collect()))
        elif command == "stop":
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            replies.put(("ledgers", [asdict(ledger) for ledger in ledgers]))
    await store.close()


class Fleet:
    """The agent processes (forked, each with its own store and command queue)."""

    def __init__(self, opts: Options) -> None:
        context = multiprocessing.get_context("fork")
        self.replies = context.Queue()
        self.commands = [context.Queue() for _ in range(opts.processes)]
        target = async_process if opts.store == "async" else sync_process
        self.processes = [context.Process(target=target, args=(opts, n, self.commands[n], self.replies), daemon=True)
                          for n in range(opts.processes)]
        for process in self.processes:
            process.start()

    def ask(self, command: str, args: list[Any]) -> list[Any]:
        for queue, arg in zip(self.commands, args, strict=True):
            queue.put((command, arg))
        return [self.replies.get(timeout=300)[1] for _ in self.processes]

    def close(self) -> None:
        for queue in self.commands:
            queue.put(None)
        for process in self.processes:
            process.join(30)
            if process.is_alive():
                process.kill()


# -- the server's side ---------------------------------------------------------------------------------------------


def _libpq(url: str) -> str:
    """``url`` for psycopg itself: libpq's scheme, without brutus's ``?pooler=`` (libpq refuses it); its
    connections prepare nothing (``prepare_threshold=None``), so they work through a transaction pooler too."""
    from sqlalchemy.engine import make_url

    plain = make_url(url).difference_update_query(["pooler"]).set(drivername="postgresql")
    return plain.render_as_string(hide_password=False)


class Server:
    """The database's backends: their CPU (``/proc/<pid>/stat``) and, sampled every 50 ms on a thread, how
    many were running a statement and how many of those waited on a lock."""

    def __init__(self, url: str) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        self.database = parsed.database
        self.conninfo = _libpq(url)
        self.conn = psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None)
        self.tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self.samples: list[tuple[int, int, int]] = []
        self.waits: dict[str, int] = {}  # what the waiting backends waited on, by wait_event_type:wait_event

    def analyze(self) -> None:
        self.conn.execute("ANALYZE sessions, messages, parts, tool_states, tool_outputs, search_vectors")

    def pids(self) -> list[int]:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                                 (self.database,)).fetchall()
        return [pid for (pid,) in rows]

    def cpu(self) -> dict[int, float]:
        seconds = {}
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            seconds[pid] = (int(fields[11]) + int(fields[12])) / self.tick
        return seconds

    def start_sampling(self) -> None:
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop_sampling(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        n = max(1, len(self.samples))
        top = sorted(self.waits.items(), key=lambda item: -item[1])[:3]
        return {"active": sum(s[0] for s in self.samples) / n, "lock_waits": sum(s[1] for s in self.samples) / n,
                "lwlock_waits": sum(s[2] for s in self.samples) / n,
                "waits": {name: round(count / n, 3) for name, count in top}}

    def _sample(self) -> None:
        import psycopg

        self.waits = {}
        with psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None) as conn:
            while not self._stop.wait(0.05):
                rows = conn.execute(
                    "SELECT wait_event_type, wait_event, CASE WHEN wait_event_type = 'Lock' THEN left(query, 50) || ' <- ' || "
                    "(SELECT left(b.query, 50) FROM pg_stat_activity b WHERE b.pid = any(pg_blocking_pids(a.pid)) LIMIT 1) END "
                    "FROM pg_stat_activity a WHERE datname = %s AND state = 'active' AND pid <> pg_backend_pid()",
                    (self.database,)).fetchall()
                self.samples.append((len(rows), sum(kind == "Lock" for kind, _, _ in rows), sum(kind == "LWLock" for kind, _, _ in rows)))
                for kind, event, blocked in rows:
                    if kind is not None:
                        name = f"{kind}:{event}" + (f" ({blocked})" if blocked else "")
                        self.waits[name] = self.waits.get(name, 0) + 1

    def close(self) -> None:
        self.conn.close()


def _spent(after: dict[int, float], before: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# -- a run ---------------------------------------------------------------------------------------------------------


def measure_level(fleet: Fleet, server: Server, opts: Options, agents: int) -> dict[str, Any]:
    """Warm up (the tables analyzed half way), then one measured window at ``agents`` agents: the row of the
    table."""
    time.sleep(opts.warmup / 2)
    if opts.analyze:
        server.analyze()
    time.sleep(opts.warmup / 2)
    fleet.ask("mark", [None] * opts.processes)
    cpu, began = server.cpu(), time.perf_counter()
    server.start_sampling()
    time.sleep(opts.window)
    found = fleet.ask("collect", [None] * opts.processes)
    wall = time.perf_counter() - began
    backends = server.stop_sampling()
    server_s = _spent(server.cpu(), cpu)
    samples = [s for f in found for s in f["samples"]]
    compacting = [s for f in found for s in f["compacting"]]
    steps = max(1, len(samples) + len(compacting))
    wire = {key: sum(f["wire"][key] for f in found) for key in found[0]["wire"]}
    return {
        "agents": agents, "steps": steps, "steps_s": steps / wall,
        "p50_ms": percentile(samples, 50) if samples else None, "p99_ms": percentile(samples, 99) if samples else None,
        "errors": sum(f["errors"] for f in found), "compactions": len(compacting),
        "compaction_p50_ms": percentile(compacting, 50) if compacting else None,
        "p99_all_ms": percentile(samples + compacting, 99) if samples else None,
        "client_cpu_ms": 1000 * sum(f["cpu_s"] for f in found) / steps, "server_cpu_ms": 1000 * server_s / steps,
        "statements": wire["statements"] / steps, "round_trips": wire["round_trips"] / steps,
        "transactions": wire["transactions"] / steps, "connects": wire["connects"],
        "active_backends": backends["active"], "lock_waits": backends["lock_waits"],
        "lwlock_waits": backends["lwlock_waits"], "waits": backends["waits"], "last_error": next((f["last_error"] for f in found if f["last_error"]), ""),
    }


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


def run_store(opts: Options) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Step the agents up until a level misses the p99 (or errs); then stop them and check their writes."""
    fleet = Fleet(opts)  # forked before the parent opens a connection of its own
    server = Server(opts.url)
    rows: list[dict[str, Any]] = []
    try:
        running = 0
        for level in opts.levels:
            fleet.ask("add", split(level - running, opts.processes))
            running = level
            row = measure_level(fleet, server, opts, level)
            rows.append(row)
            print(_row_line(opts.store, row), flush=True)
            missed = [r["errors"] or r["p99_ms"] is None or r["p99_ms"] > opts.p99 for r in rows]
            if missed[-2:] == [True, True]:  # two levels in a row: one can be a spike of the machine's other work
                break
        ledgers = [Ledger(**ledger) for found in fleet.ask("stop", [None] * opts.processes) for ledger in found]
    finally:
        fleet.close()
        server.close()
    return rows, check(opts.url, ledgers)


def check(url: str, ledgers: list[Ledger]) -> dict[str, int]:
    """In SQL: acknowledged messages missing, acknowledged tool calls not completed or errored, seq gaps."""
    import psycopg

    conninfo = _libpq(url)
    sessions = [ledger.session_id for ledger in ledgers]
    with psycopg.connect(conninfo, prepare_threshold=None) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM messages WHERE session_id = ANY(%s)", (sessions,))}
        answered = {row[0] for row in conn.execute(
            "SELECT call_id FROM tool_states WHERE session_id = ANY(%s) AND status IN ('completed', 'error')", (sessions,))}
        gaps = conn.execute(
            "SELECT count(*) FROM (SELECT session_id FROM messages WHERE session_id = ANY(%s) GROUP BY session_id "
            "HAVING min(seq) <> 1 OR max(seq) <> count(*) OR count(DISTINCT seq) <> count(*)) g", (sessions,)).fetchone()[0]
        stored = conn.execute("SELECT count(*) FROM messages WHERE session_id = ANY(%s)", (sessions,)).fetchone()[0]
    acknowledged = sum(len(ledger.messages) for ledger in ledgers)
    return {
        "sessions": len(ledgers),
        "acknowledged_messages": acknowledged,
        "stored_messages": stored,
        "acknowledged_calls": sum(len(ledger.calls) for ledger in ledgers),
        "lost_messages": sum(m not in present for ledger in ledgers for m in ledger.messages),
        "lost_calls": sum(c not in answered for ledger in ledgers for c in ledger.calls),
        "sessions_with_gaps": gaps,
    }


COLUMNS = ["agents", "steps/s", "p50 ms", "p99 ms", "errors", "compactions", "their p50 ms", "p99 all ms", "client CPU ms/step",
           "server CPU ms/step", "statements/step", "round trips/step", "connections opened", "active backends",
           "waiting on a lock"]


def _cells(row: dict[str, Any]) -> list[Any]:
    return [row["agents"], row["steps_s"], row["p50_ms"], row["p99_ms"], row["errors"], row["compactions"],
            row["compaction_p50_ms"], row["p99_all_ms"],
            row["client_cpu_ms"], row["server_cpu_ms"], row["statements"], row["round_trips"], row["connects"],
            row["active_backends"], row["lock_waits"]]


def _row_line(store: str, row: dict[str, Any]) -> str:
    table = Table("", COLUMNS)
    table.add(*_cells(row))
    return f"  {store}: " + table.render().splitlines()[-1] + (f"  ({row['last_error']})" if row["errors"] else "")


def step_cpu(url: str, store: str, steps: int) -> dict[str, float]:
    """One agent, ``steps`` steps without thinking, on a new session: the client's CPU and the wall time a step
    (in this process: run it in one of its own per checkout to compare two, alternating)."""
    from brutus import AsyncSessionStore, SessionStore

    def take(before: tuple[float, float]) -> dict[str, float]:
        return {"cpu_ms": 1000 * (time.process_time() - before[0]) / steps,
                "wall_ms": 1000 * (time.perf_counter() - before[1]) / steps}

    model = Model(1)
    if store == "sync":
        with SessionStore.open(url) as sync_store:
            conv = conversation(sync_store, sync_store.create_session().id)
            conv.user(model.prompt())
            conv.request()
            before = (time.process_time(), time.perf_counter())
            for _ in range(steps):
                response = model.response(conv.last.tokens_after)
                conv.record(response)
                conv.tool_results(model.results(response)) if tool_calls(response) else conv.user(model.prompt())
                conv.request()
            return take(before)

    async def run() -> dict[str, float]:
        async_store = await AsyncSessionStore.open(url)
        conv = conversation(async_store, (await async_store.create_session()).id)
        await conv.user(model.prompt())
        await conv.request()
        before = (time.process_time(), time.perf_counter())
        for _ in range(steps):
            response = model.response(conv.last.tokens_after)
            await conv.record(response)
            await (conv.tool_results(model.results(response)) if tool_calls(response) else conv.user(model.prompt()))
            await conv.request()
        found = take(before)
        await async_store.close()
        return found

    return asyncio.run(run())


def held(rows: list[dict[str, Any]], p99: float) -> int:
    """The most agents of a level with p99 within the goal and no errors (0: none)."""
    return max((r["agents"] for r in rows if not r["errors"] and r["p99_ms"] is not None and r["p99_ms"] <= p99), default=0)


def run_and_report(opts: Options, report: dict[str, Any]) -> bool:
    """One store's run on ``opts.url`` (migrated first), printed and put in ``report``; False if a write was lost."""
    from brutus import SessionStore

    SessionStore.open(opts.url, index_in_background=False).close()  # the schema
    print(f"{opts.store} store, {opts.processes} processes, levels {opts.levels}", flush=True)
    rows, verdict = run_store(opts)
    report["stores"][opts.store] = {"rows": rows, "check": verdict, "held": held(rows, opts.p99)}
    table = Table(f"{opts.store} store: agents thinking 1-3 s between live steps, {opts.processes} processes, "
                  f"{opts.window:.0f} s measured a level (load average {os.getloadavg()[0]:.2f})", COLUMNS)
    for row in rows:
        table.add(*_cells(row))
    table.notes.append(f"held with p99 <= {opts.p99:.0f} ms: {held(rows, opts.p99)} agents (p50 / p99: steps without a "
                       "compaction; the steps whose request() compacted are counted apart, and in 'p99 all')")
    table.notes.append("check: " + ", ".join(f"{k} {v}" for k, v in verdict.items()))
    print(table.render(), flush=True)
    lost = verdict["lost_messages"] + verdict["lost_calls"] + verdict["sessions_with_gaps"]
    if lost:
        print(f"FAILED: {lost} acknowledged writes missing or sessions with gaps", file=sys.stderr)
    return not lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the PostgreSQL database to use as it is (default: a fresh database on "
                        f"{DEFAULT_URL.rsplit('/', 1)[0]}, dropped afterwards)")
    parser.add_argument("--server", default=DEFAULT_URL, help="where the fresh database is made (default %(default)s)")
    parser.add_argument("--store", choices=("async", "sync", "both"), default="both")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--levels", default="25,50,75,100,150,200,250,300,350,400", help="agents at each level, comma-separated")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds at each level before its window")
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured at each level")
    parser.add_argument("--p99", type=float, default=100.0, help="the p99 step latency (ms) a level must keep")
    parser.add_argument("--pool-size", type=int, default=None,
                        help="each process's pool, and half as many overflow connections, which close as they return "
                             "(default: 32 / processes, 8 for 4: the server's max_connections is shared)")
    parser.add_argument("--no-indexer", action="store_true", help="stores without the background search indexer")
    parser.add_argument("--switch-interval", type=float, metavar="S", help="the agent processes' "
                        "sys.setswitchinterval (default: Python's 0.005 s)")
    parser.add_argument("--no-phase", action="store_true", help="every session starts empty (default: part way "
                        "through a compaction cycle, so the compactions spread out)")
    parser.add_argument("--no-analyze", action="store_true", help="leave the statistics to autovacuum (default: the "
                        "tables analyzed half way through each level's warm-up)")
    parser.add_argument("--quick", action="store_true", help="4 and 8 agents, 1 process, 2 + 4 s a level")
    parser.add_argument("--step-cpu", type=int, metavar="STEPS", help="instead: one agent, STEPS steps without "
                        "thinking, on each store: the client's CPU and wall time a step")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.step_cpu:
        stores = ("async", "sync") if args.store == "both" else (args.store,)
        with pg_database(args.server, "brutus_agents") if args.url is None else nullcontext(args.url) as url:
            for store in stores:
                found = step_cpu(url, store, args.step_cpu)
                print(f"{store}: client CPU {found['cpu_ms']:.2f} ms a step, wall {found['wall_ms']:.2f} ms")
        return 0
    if args.quick:
        args.processes, args.levels, args.warmup, args.window = 1, "4,8", 2.0, 4.0
    levels = [int(n) for n in args.levels.split(",")]
    stores = ("async", "sync") if args.store == "both" else (args.store,)
    report: dict[str, Any] = {"benchmark": NAME, "mode": "quick" if args.quick else "full", "machine": machine(),
                              "processes": args.processes, "stores": {}}
    ok = True
    for store in stores:  # each on a database of its own: one the other store filled is vacuumed meanwhile
        with pg_database(args.server, "brutus_agents") if args.url is None else nullcontext(args.url) as url:
            opts = Options(url=url, store=store, processes=args.processes, levels=levels, warmup=args.warmup,
                           window=args.window, p99=args.p99, pool_size=args.pool_size or max(4, POOLS // args.processes),
                           indexer=not args.no_indexer,
                           phased=not args.no_phase, analyze=not args.no_analyze, switch_interval=args.switch_interval)
            ok = run_and_report(opts, report) and ok
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{NAME}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
