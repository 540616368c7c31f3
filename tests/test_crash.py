"""Crash consistency: a real writer process (tests/crash_writer.py) is SIGKILLed at many points, on SQLite
(WAL) and PostgreSQL. After each kill the database opens, ``integrity_problems`` is empty, everything the
writer saw committed is there and nothing of the transaction it died in, the view loads as before, and the
next compaction succeeds (a marker the dead writer left pending is closed as abandoned).

The writers of one backend run in parallel, each on its own session (and, on SQLite, its own file); the
tests below then check one kill point each. Append kill points are checked row by row against a reference
store that ran the same operations (explicit ids, a counting clock) and was dumped after each one.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from brutus import SessionStore
from brutus.db.compaction_ops import ABANDONED
from brutus.db.engine import make_engine
from brutus.db.migrate import upgrade

from builders import Msg, Tool, write_history
from conftest import BACKENDS
from crash_writer import COMPACTION_POINTS, OPS_PER_STEP, SMALL, CountingClock, FakeSummarizer, step_ops
from integrity import dump, integrity_problems, normalize

pytestmark = pytest.mark.slow

WRITER = str(Path(__file__).with_name("crash_writer.py"))
SEED = 20260923
REF_TAG = "Q9REF"

# Append kill points: (writer mode, kill spec, the operation count the database must hold afterwards).
# Step 2 runs operations 17..24: user message, its text, assistant message, tool part (pending), running,
# completed, text, finish.
KILL_STEPS: dict[str, tuple[str, str, int]] = {
    "append_message_between_seq_and_insert": ("call", "stmt:17:1:INSERT INTO messages", 17),
    "append_part_text_at_insert": ("call", "stmt:18:1:INSERT INTO parts", 18),
    "append_part_tool_before_tool_state": ("call", "stmt:20:1:INSERT INTO tool_states", 20),
    "update_tool_running_at_update": ("call", "stmt:21:1:UPDATE tool_states", 21),
    "update_tool_completed_before_output": ("call", "stmt:22:1:INSERT INTO tool_outputs", 22),
    "update_tool_completed_at_message_estimate": ("call", "stmt:22:1:UPDATE messages", 22),
    "finish_message_at_commit": ("call", "stmt:24:1:COMMIT", 24),
    "right_after_a_commit": ("call", "stmt:25:1:BEGIN", 25),
    "batch_after_1_call": ("batch", "calls:2:1", 17),
    "batch_after_4_calls": ("batch", "calls:2:4", 17),
    "batch_after_7_calls": ("batch", "calls:2:7", 17),
    "batch_at_its_commit": ("batch", "stmt:24:1:COMMIT", 17),
}
RANDOM_KILLS = {f"random_{mode}_{n}": mode for mode in ("call", "batch") for n in range(3)}


@dataclass
class Run:
    point: str
    url: str
    session_id: str
    args: list[str]
    kill_after: int | None = None  # external SIGKILL once the writer printed "done N"
    before: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    stderr: str = ""
    returncode: int | None = None

    @property
    def done(self) -> int:
        """The last operation the writer reported committed (-1: none)."""
        done = [int(line.split()[1]) for line in self.lines if line.startswith("done ")]
        return done[-1] if done else -1

    def describe(self) -> str:
        return f"{self.point}: rc={self.returncode} stdout={self.lines[-3:]} stderr={self.stderr[-2000:]}"


def _launch(run: Run) -> Run:
    proc = subprocess.Popen(
        [sys.executable, WRITER, run.url, *run.args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    timer = threading.Timer(120, proc.kill)  # a writer that hangs fails its test instead of the run
    timer.start()
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            run.lines.append(line.strip())
            if run.kill_after is not None and line.strip() == f"done {run.kill_after}":
                proc.send_signal(signal.SIGKILL)  # lands wherever the writer is by then
        run.stderr = proc.stderr.read()  # type: ignore[union-attr]
        run.returncode = proc.wait()
    finally:
        timer.cancel()
    return run


def _history() -> list[Msg]:
    spec: list[Msg] = []
    for i in range(6):
        spec.append(Msg("user", text=f"please fix bug {i}"))
        spec.append(Msg("assistant", text=f"looking at bug {i}", tools=[Tool("read", output_bytes=4000), Tool("bash", output_bytes=4000)]))
    return spec


def _snapshot(store: SessionStore, session_id: str) -> dict[str, Any]:
    return {
        "rows": dump(store.engine, session_id, exclude=("compactions",)),
        "view": [m.model_dump() for m in store.filter_compacted(session_id)],
        "ids": [m.info.id for m in store.messages(session_id)],
    }


@pytest.fixture(scope="module", params=BACKENDS)
def crash_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pg_server: Any) -> dict[str, Run]:
    """Every kill point of one backend, run in parallel; the tests check one point each."""
    tmp = tmp_path_factory.mktemp(f"crash_{request.param}")
    shared = pg_server.new_database() if request.param == "postgresql" else None
    if shared is not None:
        engine = make_engine(shared)
        upgrade(engine)
        engine.dispose()
    rng = random.Random(SEED)
    runs: list[Run] = []

    template = tmp / "template.db"
    if shared is None:
        engine = make_engine(f"sqlite:///{template}")
        upgrade(engine)
        engine.dispose()  # the last connection checkpoints the WAL: the file alone is the database

    def url_for(n: int) -> str:
        if shared is not None:
            return shared
        path = tmp / f"crash_{n}.db"
        shutil.copyfile(template, path)
        return f"sqlite:///{path}"

    points = (
        [("steps", name) for name in KILL_STEPS]
        + [("random", name) for name in RANDOM_KILLS]
        + [("prune", "prune_at_mark_update")]
        + [("compact", name) for name in COMPACTION_POINTS]
    )
    for n, (kind, point) in enumerate(points):
        url, tag = url_for(n), f"Q{n:02d}X"
        if kind == "steps":
            mode, kill, _ = KILL_STEPS[point]
            runs.append(Run(point, url, f"ses_{tag}", [tag, "steps", mode, kill]))
        elif kind == "random":
            mode = RANDOM_KILLS[point]
            target = rng.randrange(10, 160)
            if mode == "batch":
                target = target // OPS_PER_STEP * OPS_PER_STEP  # the writer reports whole steps
            runs.append(Run(point, url, f"ses_{tag}", [tag, "steps", mode, "none"], kill_after=target))
        else:
            with SessionStore.open(url) as store:
                session_id = write_history(store, _history(), title=point)
                before = _snapshot(store, session_id)
            args = [tag, "prune", session_id] if kind == "prune" else [tag, "compact", session_id, point]
            runs.append(Run(point, url, session_id, args, before=before))
    with ThreadPoolExecutor(max_workers=3) as pool:
        finished = list(pool.map(_launch, runs))
    return {run.point: run for run in finished}


class Reference:
    """The append operations replayed on a reference SQLite store, dumped after any number of them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.dumps: dict[int, dict[str, list[tuple]]] = {}
        self.store: SessionStore | None = None
        self.applied = 0
        self.ops = step_ops(REF_TAG)

    def _restart(self) -> SessionStore:
        if self.store is not None:
            self.store.close()
        path = self.directory / f"ref_{len(self.dumps)}.db"
        self.store, self.applied = SessionStore.open(f"sqlite:///{path}", clock=CountingClock()), 0
        return self.store

    def after(self, count: int) -> dict[str, list[tuple]]:
        """The session's rows after the first ``count`` operations (tags normalized)."""
        if count not in self.dumps:
            store = self.store if self.store is not None and self.applied <= count else self._restart()
            while self.applied < count:
                self.ops[self.applied](store)
                self.applied += 1
            self.dumps[count] = normalize(dump(store.engine, f"ses_{REF_TAG}"), REF_TAG, "TAG")
        return self.dumps[count]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    ref = Reference(tmp_path_factory.mktemp("crash_reference"))
    yield ref
    if ref.store is not None:
        ref.store.close()


def _reopen(run: Run) -> SessionStore:
    store = SessionStore.open(run.url)  # the database opens (and takes the write lock for its migration check)
    problems = integrity_problems(store, [run.session_id])
    assert not problems, f"{run.point}: {problems[:10]}"
    return store


def _rows(store: SessionStore, run: Run) -> dict[str, list[tuple]]:
    tag = run.session_id.removeprefix("ses_")
    return normalize(dump(store.engine, run.session_id), tag, "TAG")


def _next_compaction_succeeds(store: SessionStore, session_id: str) -> None:
    """Append a turn and compact: it completes, and any marker left pending by the dead writer is failed."""
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": "and now the docs"})
    reply = store.append_message(session_id, "assistant", parent_id=user.id)
    store.append_part(reply.id, {"type": "tool", "call_id": "after", "tool": "read", "state": {"status": "completed", "input": {}, "output": "y" * 6000}})
    store.finish_message(reply.id, finish="stop")
    stale = [c.id for c in store.compactions(session_id) if c.status == "pending"]
    result = store.compact(session_id, FakeSummarizer("after the crash"), config=SMALL)
    records = {c.id: c for c in store.compactions(session_id)}
    assert records[result.compaction_id].status == "completed"
    for compaction_id in stale:
        assert records[compaction_id].status == "failed"
        assert records[compaction_id].error == ABANDONED
    assert [m.info.id for m in store.filter_compacted(session_id)][-1] == result.summary_message.info.id
    assert not integrity_problems(store, [session_id])


@pytest.mark.parametrize("point", list(KILL_STEPS))
def test_kill_during_appends(crash_runs: dict[str, Run], reference: Reference, point: str) -> None:
    run = crash_runs[point]
    mode, _, expected_ops = KILL_STEPS[point]
    assert run.returncode == -signal.SIGKILL, run.describe()
    assert run.done == expected_ops - 1, run.describe()  # the writer saw exactly these operations commit
    with _reopen(run) as store:
        assert _rows(store, run) == reference.after(expected_ops), run.describe()
        _next_compaction_succeeds(store, run.session_id)


@pytest.mark.parametrize("point", list(RANDOM_KILLS))
def test_kill_at_a_random_moment(crash_runs: dict[str, Run], reference: Reference, point: str) -> None:
    """SIGKILL from outside, wherever the writer is: the database holds every reported operation and the
    one in flight wholly or not at all."""
    run = crash_runs[point]
    assert run.returncode == -signal.SIGKILL, run.describe()
    assert run.done >= run.kill_after, run.describe()
    unit = OPS_PER_STEP if RANDOM_KILLS[point] == "batch" else 1
    with _reopen(run) as store:
        rows = _rows(store, run)
        committed = run.done + 1
        assert rows in (reference.after(committed), reference.after(committed + unit)), run.describe()
        _next_compaction_succeeds(store, run.session_id)


def test_kill_mid_prune(crash_runs: dict[str, Run]) -> None:
    run = crash_runs["prune_at_mark_update"]
    assert run.returncode == -signal.SIGKILL and "pruning" in run.lines and "pruned" not in run.lines, run.describe()
    with _reopen(run) as store:
        assert _snapshot(store, run.session_id) == run.before  # no part marked
        result = store.prune(run.session_id, SMALL)
        assert result.pruned > SMALL.prune_minimum
        _next_compaction_succeeds(store, run.session_id)


@pytest.mark.parametrize("point", list(COMPACTION_POINTS))
def test_kill_mid_compaction(crash_runs: dict[str, Run], point: str) -> None:
    run = crash_runs[point]
    assert run.returncode == -signal.SIGKILL and "compacted" not in run.lines, run.describe()
    with _reopen(run) as store:
        records = store.compactions(run.session_id)
        if point == "after_commit":
            [record] = records
            assert record.status == "completed"
            assert [m.info.id for m in store.messages(run.session_id)][: len(run.before["ids"])] == run.before["ids"]
            view = store.filter_compacted(run.session_id)
            assert [m.info.id for m in view][-1] == record.summary_message_id
        else:
            assert _snapshot(store, run.session_id) == run.before  # the view loads as before, no row changed
            expected = [] if point == "begin_marker_insert" else ["pending"]
            assert [r.status for r in records] == expected
        _next_compaction_succeeds(store, run.session_id)
