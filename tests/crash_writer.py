"""The writer process of tests/test_crash.py: it runs one scenario on a store and SIGKILLs itself at a chosen
point (or runs until the test kills it from outside).

    python crash_writer.py URL TAG steps MODE KILL     MODE: call | batch; KILL: see ``run_steps``
    python crash_writer.py URL TAG prune SESSION
    python crash_writer.py URL TAG compact SESSION POINT   POINT: a key of ``COMPACTION_POINTS``

It prints ``done N`` (flushed) after operation N returned, so the test knows what was committed before the
kill. ``steps`` runs ``step_ops(TAG)`` with explicit ids and a counting clock, so the test can replay the
same operations on a reference store and compare row by row.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event

from brutus import CompactionConfig, SessionStore
from brutus.compaction import Hooks
from brutus.models import TokenCounts
from brutus.summarizers import Summary, SummaryRequest

OPS_PER_STEP = 8
STEPS = 200
# Small prune thresholds so a short history has outputs to prune (seed 004's are 40K / 20K tokens).
SMALL = CompactionConfig(prune_protect=2_000, prune_minimum=1_000)


class CountingClock:
    """A clock that moves one second per call: two runs of the same operations write the same times."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1000
        return self.now


Op = Callable[[SessionStore], Any]


def step_ops(tag: str, steps: int = STEPS) -> list[Op]:
    """Operation 0 creates session ``ses_TAG``; then ``OPS_PER_STEP`` operations per agent step."""
    session = f"ses_{tag}"
    ops: list[Op] = [lambda s: s.create_session(id=session, title=f"crash {tag}")]
    for i in range(steps):
        user, reply, tool = f"msg_{tag}_u{i}", f"msg_{tag}_a{i}", f"prt_{tag}_c{i}"
        done: dict[str, Any] = (
            {"status": "error", "error": f"exit {i}"} if i % 5 == 4 else {"status": "completed", "output": f"out {i}\n" * (150 + i)}
        )
        ops += [
            lambda s, user=user, i=i: s.append_message(session, "user", id=user),
            lambda s, user=user, i=i: s.append_part(user, {"type": "text", "id": f"prt_{tag}_t{i}", "text": f"step {i}: fix it \x00 é"}),
            lambda s, user=user, reply=reply: s.append_message(session, "assistant", id=reply, parent_id=user, model_id="m"),
            lambda s, reply=reply, tool=tool, i=i: s.append_part(
                reply, {"type": "tool", "id": tool, "call_id": f"call_{i}", "tool": "bash", "state": {"status": "pending", "input": {"cmd": f"ls {i}"}}}
            ),
            lambda s, tool=tool: s.update_tool(tool, status="running", title="ls"),
            lambda s, tool=tool, done=done: s.update_tool(tool, **done),
            lambda s, reply=reply, i=i: s.append_part(reply, {"type": "text", "id": f"prt_{tag}_r{i}", "text": f"listed {i}"}),
            lambda s, reply=reply, i=i: s.finish_message(
                reply, finish="tool-calls" if i % 3 else "stop", tokens={"input": 100 + i, "output": 10}
            ),
        ]
    return ops


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class StatementKiller:
    """SIGKILLs this process just before the ``nth`` statement matching ``pattern`` runs, once armed.

    On SQLite the hook is the driver's trace callback (it sees every statement, whichever path sent it);
    on PostgreSQL SQLAlchemy's ``before_cursor_execute``, and its ``begin`` and ``commit`` events.
    """

    def __init__(self, engine: Engine, pattern: str, nth: int = 1) -> None:
        self.pattern = re.compile(pattern, re.IGNORECASE)
        self.nth = nth
        self.armed = False
        if engine.dialect.name == "sqlite":
            event.listen(engine, "checkout", lambda dbapi, _rec, _proxy: dbapi.set_trace_callback(self.saw))
        else:
            event.listen(engine, "before_cursor_execute", lambda _c, _cur, statement, *_a: self.saw(statement))
            event.listen(engine, "begin", lambda _conn: self.saw("BEGIN"))  # psycopg sends BEGIN itself
            event.listen(engine, "commit", lambda _conn: self.saw("COMMIT"))

    def saw(self, statement: str) -> None:
        if self.armed and self.pattern.match(statement.lstrip()):
            self.nth -= 1
            if self.nth == 0:
                die()


def say(line: str) -> None:
    print(line, flush=True)


def run_steps(store: SessionStore, tag: str, mode: str, kill: str) -> None:
    """``kill``: ``none`` (run until killed from outside), ``stmt:OP:NTH:PATTERN`` (die before the NTH
    statement matching PATTERN while operation OP runs), ``calls:STEP:K`` (batch mode: die after K calls
    inside step STEP's batch, its transaction open)."""
    ops = step_ops(tag)
    killer: StatementKiller | None = None
    kill_op = kill_step = kill_calls = -1
    if kill.startswith("stmt:"):
        _, op, nth, pattern = kill.split(":", 3)
        kill_op = int(op)
        killer = StatementKiller(store.engine, pattern, int(nth))
    elif kill.startswith("calls:"):
        _, step, calls = kill.split(":")
        kill_step, kill_calls = int(step), int(calls)
    kill_at = max(kill_op, 1 + kill_step * OPS_PER_STEP) if kill != "none" else len(ops)
    ops[0](store)
    say("done 0")
    for step in range(STEPS):
        first = 1 + step * OPS_PER_STEP
        if first > kill_at + OPS_PER_STEP:
            raise SystemExit(f"missed: the kill point {kill} never came")
        indices = range(first, first + OPS_PER_STEP)
        if mode == "batch":
            with store.batch():
                for n, index in enumerate(indices):
                    if killer is not None and index == kill_op:
                        killer.armed = True
                    if step == kill_step and n == kill_calls:
                        die()
                    ops[index](store)
            say(f"done {indices[-1]}")
        else:
            for index in indices:
                if killer is not None:
                    killer.armed = index == kill_op
                ops[index](store)
                say(f"done {index}")


class FakeSummarizer:
    """A deterministic summarizer; ``during`` runs while it 'waits for the model'."""

    def __init__(self, text: str = "Summary: fixed sync.py, next run the tests.", during: Callable[[], None] | None = None) -> None:
        self.text = text
        self.during = during

    def summarize(self, request: SummaryRequest) -> Summary:
        if self.during is not None:
            self.during()
        return Summary(text=self.text, model="fake-model", tokens=TokenCounts(input=500, output=20), cost=0.0005)


# What kills the compaction, and when: (statement pattern armed once the summarizer returned, nth) or a
# callable place ("hook" / "summarizer" / "after").
COMPACTION_POINTS: dict[str, tuple[str, int] | str] = {
    "begin_marker_insert": "begin",  # inside the first transaction, before the pending marker is written
    "pre_compact_hook": "hook",  # marker committed, summarizer not called yet
    "inside_summarizer": "summarizer",  # during the (network) call
    "final_prune_marks": (r"UPDATE tool_states", 1),  # final transaction: the prune marks
    "final_user_insert": (r"INSERT INTO messages", 1),  # final transaction: the compaction user message
    "final_summary_text": (r"INSERT INTO parts", 2),  # final transaction: the summary's text part
    "final_marker_update": (r"UPDATE compactions", 1),  # final transaction: the marker set completed
    "final_commit": (r"COMMIT", 1),  # final transaction, at its COMMIT
    "after_commit": "after",  # committed; the SessionStart hook runs
}


def run_compact(store: SessionStore, session_id: str, point: str) -> None:
    where = COMPACTION_POINTS[point]
    hooks = Hooks()
    if where == "begin":
        StatementKiller(store.engine, r"INSERT INTO compactions").armed = True
        summarizer = FakeSummarizer()
    elif where == "hook":
        hooks = Hooks(pre_compact=lambda _payload: die())
        summarizer = FakeSummarizer()
    elif where == "summarizer":
        summarizer = FakeSummarizer(during=die)
    elif where == "after":
        hooks = Hooks(session_start=lambda _payload: die())
        summarizer = FakeSummarizer()
    else:
        pattern, nth = where
        killer = StatementKiller(store.engine, pattern, nth)

        def arm() -> None:
            killer.armed = True  # the final transaction starts after the summarizer returns

        summarizer = FakeSummarizer(during=arm)
    say("compacting")
    store.compact(session_id, summarizer, trigger="auto", hooks=hooks, config=SMALL)
    say("compacted")  # only reached if no kill point fired: the test fails on it


def run_prune(store: SessionStore, session_id: str) -> None:
    StatementKiller(store.engine, r"UPDATE tool_states").armed = True
    say("pruning")
    store.prune(session_id, SMALL)
    say("pruned")


GC_CHUNK_BYTES = 60_000  # one output of test_gc_crash's per chunk


def run_gc(store: SessionStore, before: str, vacuum: str, pattern: str, nth: str) -> None:
    """gc (``vacuum``: "1" for ``vacuum=True``) in chunks of one output, dying before the ``nth`` statement
    matching ``pattern``; says "gc done" if that point never came."""
    from brutus.db import gc_ops

    gc_ops.CHUNK_BYTES = GC_CHUNK_BYTES
    killer = StatementKiller(store.engine, pattern, int(nth))
    killer.armed = True
    store.gc(int(before), vacuum=vacuum == "1")
    say("gc done")


def main(argv: list[str]) -> None:
    url, tag, scenario, *args = argv
    if scenario == "steps":
        store = SessionStore.open(url, auto_migrate=False, clock=CountingClock())
    else:
        store = SessionStore.open(url, auto_migrate=False)
    if scenario == "steps":
        run_steps(store, tag, *args)
    elif scenario == "prune":
        run_prune(store, *args)
    elif scenario == "compact":
        run_compact(store, *args)
    elif scenario == "gc":
        run_gc(store, *args)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
