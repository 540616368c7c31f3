"""Concurrency between processes (tests/race_worker.py), on SQLite and PostgreSQL: many writers on their own
and on shared sessions, compactions racing on one session, appends during a compaction, a prune racing
appends. Exact counts, per-session ``seq`` unique and gapless, no "database is locked" reaching a caller,
never two boundaries for one compaction, and ``integrity_problems`` empty afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brutus import SessionStore
from brutus.pruning import prune as pure_prune

from builders import Msg, Tool, write_history
from integrity import integrity_problems
from race_worker import SMALL, agent_step

pytestmark = pytest.mark.slow

WORKER = str(Path(__file__).with_name("race_worker.py"))


class Worker:
    """A race_worker.py process, talked to line by line."""

    def __init__(self, url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, url, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def read(self) -> Any:
        line = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        if not line:
            self.proc.kill()
            raise AssertionError(f"worker ended: {self.proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        return json.loads(line) if line.startswith("{") else line

    def ready(self) -> Worker:
        assert self.read() == "ready"
        return self

    def send(self, line: str = "go") -> None:
        self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def finish(self) -> tuple[list[str], str]:
        """Close its stdin, wait for it to end; its remaining output lines and its stderr."""
        out, err = self.proc.communicate(timeout=300)
        assert self.proc.returncode == 0, err[-3000:]
        assert "locked" not in err and "busy" not in err.lower(), err[-3000:]
        return out.splitlines(), err


def _turns(n: int, output_bytes: int = 8000) -> list[Msg]:
    spec: list[Msg] = []
    for i in range(n):
        spec += [Msg("user", text=f"fix bug {i}"), Msg("assistant", text=f"bug {i}", tools=[Tool("read", output_bytes=output_bytes)])]
    return spec


def test_many_processes_append_to_own_and_shared_sessions(store: SessionStore, store_url: str) -> None:
    steps, modes = 6, ["call", "batch"] * 3
    shared = store.create_session(title="shared").id
    workers = [Worker(store_url, "append", shared, str(steps), mode).ready() for mode in modes]
    for worker in workers:
        worker.send()
    own = {w.finish()[0][-1]: mode for w, mode in zip(workers, modes)}

    for session_id, mode in own.items():
        history = store.messages(session_id)
        assert [m.info.seq for m in history] == list(range(1, 2 * steps + 1))
        assert [len(m.parts) for m in history] == [1, 2] * steps
    history = store.messages(shared)
    assert [m.info.seq for m in history] == list(range(1, 2 * steps * len(modes) + 1))
    assert store.get_session(shared).message_count == len(history)
    by_id = {m.info.id: m for m in history}
    for message in history:
        if message.info.role == "assistant":
            user = by_id[message.info.parent_id]
            writer = user.parts[0].text.split()[-1].split(":")[0]
            assert [p.state.status for p in message.parts if p.type == "tool"] == ["completed"]
            if own[writer] == "batch":  # a batch commits its step as one unit: nothing interleaves
                assert message.info.seq == user.info.seq + 1
    per_writer: dict[str, list[int]] = {}
    for message in history:
        if message.info.role == "user":
            writer, step = message.parts[0].text.split()[-1].split(":")
            per_writer.setdefault(writer, []).append(int(step))
    assert per_writer == {writer: list(range(steps)) for writer in own}  # each writer's steps, in its order
    assert integrity_problems(store) == []


def test_two_compactions_on_one_session_exactly_one_runs(store: SessionStore, store_url: str) -> None:
    session_id = write_history(store, _turns(4))
    first, second = Worker(store_url, "compact", session_id).ready(), Worker(store_url, "compact", session_id).ready()

    first.send("block")  # the first compaction is inside its summarizer call...
    assert "in_summarizer" in first.read()
    second.send("go")  # ...when the second one starts
    assert second.read()["outcome"] == "CompactionInProgress"
    first.send("continue")
    assert first.read()["outcome"] == "completed"
    second.send("go")  # nothing new since: refused, not looping
    assert second.read()["outcome"] == "NothingToCompact"  # a CompactionStalled that writes no marker
    agent_step(store, session_id, "more", output_bytes=8000)
    second.send("go")
    assert second.read()["outcome"] == "completed"
    first.finish(), second.finish()

    records = store.compactions(session_id)
    assert [r.status for r in records] == ["completed", "completed"]  # the refused one left no marker
    boundaries = [m for m in store.messages(session_id) if any(p.type == "compaction" for p in m.parts)]
    assert [m.info.id for m in boundaries] == [r.user_message_id for r in records if r.status == "completed"]
    assert integrity_problems(store, [session_id]) == []


def test_compactions_race_freely(store: SessionStore, store_url: str) -> None:
    rounds = 4
    session_id = write_history(store, _turns(2))
    racers = [Worker(store_url, "compact", session_id).ready() for _ in range(2)]
    outcomes = []
    for n in range(rounds):
        agent_step(store, session_id, f"round {n}", output_bytes=8000)
        for racer in racers:
            racer.send("go")
        outcomes.append(sorted(racer.read()["outcome"] for racer in racers))
    for racer in racers:
        racer.finish()
    for pair in outcomes:  # one compaction per round; the other saw it running or saw nothing new after it
        assert pair[0] in ("CompactionInProgress", "NothingToCompact") and pair[1] == "completed", outcomes
    records = [r for r in store.compactions(session_id) if r.status == "completed"]
    assert len(records) == rounds
    boundaries = [m.info.id for m in store.messages(session_id) if any(p.type == "compaction" for p in m.parts)]
    assert boundaries == [r.user_message_id for r in records]
    assert not [r for r in store.compactions(session_id) if r.status == "pending"]
    assert integrity_problems(store, [session_id]) == []


def test_messages_appended_during_a_compaction_become_its_tail(store: SessionStore, store_url: str) -> None:
    session_id = write_history(store, _turns(4))
    before = [m.info.id for m in store.filter_compacted(session_id)]
    worker = Worker(store_url, "compact", session_id).ready()
    worker.send("block")
    assert worker.read()["in_summarizer"] == before  # the summary covers what was there when it started
    agent_step(store, session_id, "while summarizing")  # another process of the agent goes on meanwhile
    during = [m.info.id for m in store.messages(session_id)][len(before) :]
    worker.send("continue")
    assert worker.read()["outcome"] == "completed"
    worker.finish()

    view = store.filter_compacted(session_id)
    assert [m.info.id for m in view][:2] == during  # kept verbatim, before the compaction pair
    compaction = view[2].parts[0]
    assert compaction.type == "compaction" and compaction.tail_start_id == during[0]
    assert view[3].info.summary and view[3].info.parent_id == view[2].info.id
    assert integrity_problems(store, [session_id]) == []


def test_prune_races_appends(store: SessionStore, store_url: str) -> None:
    # Long enough that prunes land between appends on a loaded 2-core machine (SQLite commits ~10x faster), and
    # longer than the first prune (0.4 s on a quiet machine, where 300 steps ended inside it). The appender
    # pauses 1 ms after each step, as an agent waits for its model: back to back, its commits per call hold
    # SQLite's write lock almost all the time, and the pruner's busy handler, polling every few ms, could
    # find it free only once the appends were over (seen on a fast day: one prune took the whole race).
    steps, turns = (1000 if store.engine.dialect.name == "sqlite" else 80), 6
    shared = write_history(store, _turns(turns, output_bytes=4000))
    appender = Worker(store_url, "append", shared, str(steps), "call", "4000", "1").ready()
    pruner = Worker(store_url, "prune", shared, str(2 * (turns + steps))).ready()
    before_race = [p.id for m in store.messages(shared) for p in m.parts if p.type == "tool" and p.state.time.compacted]
    appender.send(), pruner.send()
    appender.finish()
    results = [json.loads(line) for line in pruner.finish()[0]]

    assert any(2 * turns < r["seen"] < 2 * (turns + steps) for r in results), results  # pruned mid-append
    marked = [part for r in results for part in r["parts"]]
    assert len(marked) == len(set(marked)), "a part was pruned twice"
    history = store.messages(shared)
    assert len(history) == 2 * (turns + steps)
    tools = {p.id: p for m in history for p in m.parts if p.type == "tool"}
    stamps = {part: at for r in results for part, at in zip(r["parts"], r["at"])}
    race_marked = {pid for pid, p in tools.items() if p.state.time.compacted} - set(before_race)
    assert race_marked == set(marked)
    for part_id, at in stamps.items():
        assert tools[part_id].state.status == "completed" and tools[part_id].state.time.compacted == at
    # what the store would prune now is what the rule says on the loaded history
    expected = pure_prune(history, SMALL, now=1)
    result = store.prune(shared, SMALL)
    assert (result.pruned, result.total, [p.id for p in result.parts]) == (expected.pruned, expected.total, [p.id for p in expected.parts])
    assert integrity_problems(store, [shared]) == []
