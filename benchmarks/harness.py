"""The benchmarks' shared harness: sizes per mode, timing (perf_counter, repeats, median), the printed tables,
the JSON results, throw-away PostgreSQL databases, and the peers, each run in its own virtualenv.

Each benchmark module has ``NAME`` and ``run(cfg) -> Section``; ``run.py`` runs them one after another (the
machine has two cores: nothing here runs in parallel except the PostgreSQL writers, on purpose).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from peers._common import sqlite_bytes, summary, timed

__all__ = [
    "Config",
    "Goal",
    "PEERS",
    "PeerServer",
    "RESULTS",
    "Section",
    "Table",
    "peer_results",
    "peer_servers",
    "percentile",
    "pg_database",
    "ratio",
    "run_peer",
    "sqlite_bytes",
    "summary",
    "timed",
]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PEERS_ROOT = Path(os.environ.get("PEERS_ROOT", "/tmp"))
# peer name (its venv is PEERS_ROOT/peers-<name>) -> the script that drives it
PEERS = {"openai-agents": "openai_agents.py", "langchain": "langchain.py", "llm": "llm_logs.py", "adk": "adk.py"}
T = TypeVar("T")


@dataclass
class Config:
    """How big and how often: ``full`` (default), ``quick`` (--quick) or ``smoke`` (--smoke, for the test)."""

    mode: str
    tmp: Path
    results: Path = RESULTS
    peers: bool = True
    pg_url: str | None = None
    notes: list[str] = field(default_factory=list)

    def pick(self, full: T, quick: T, smoke: T | None = None) -> T:
        if self.mode == "smoke":
            return quick if smoke is None else smoke
        return quick if self.mode == "quick" else full

    def workdir(self, name: str) -> Path:
        path = self.tmp / name
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class Table:
    """Rows of figures under a title; the first column labels the row."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *row: Any) -> None:
        self.rows.append(list(row))

    def render(self) -> str:
        cells = [[_cell(v) for v in row] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        lines = [
            self.title,
            "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(self.columns)),
        ]
        for row in cells:
            lines.append("  ".join(v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(row)))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "columns": self.columns, "rows": self.rows, "notes": self.notes}


@dataclass
class Goal:
    """A goal from DESIGN.md §5 / issue 8: ``value`` (what was measured) must be at most ``limit``."""

    text: str
    value: float | None
    limit: float
    unit: str = "x"

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit

    def render(self) -> str:
        if self.value is None:
            return f"  goal  {self.text}: not measured"
        verdict = "met" if self.met else "MISSED"
        return f"  goal  {self.text}: {_cell(self.value)}{self.unit} (limit {_cell(self.limit)}{self.unit}) {verdict}"

    def as_json(self) -> dict[str, Any]:
        return {"goal": self.text, "value": self.value, "limit": self.limit, "unit": self.unit, "met": self.met}


@dataclass
class Section:
    """One benchmark's result: tables for people, goals, and the raw figures for the JSON file."""

    name: str
    tables: list[Table] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def render(self) -> str:
        parts = [t.render() for t in self.tables]
        if self.goals:
            parts.append("\n".join(g.render() for g in self.goals))
        return "\n\n".join(parts)

    def write(self, cfg: Config) -> Path:
        cfg.results.mkdir(parents=True, exist_ok=True)
        path = cfg.results / f"{self.name}.json"
        document = {
            "benchmark": self.name,
            "mode": cfg.mode,
            "seconds": round(self.seconds, 2),
            "machine": machine(),
            "tables": [t.as_json() for t in self.tables],
            "goals": [g.as_json() for g in self.goals],
            "data": self.data,
        }
        path.write_text(json.dumps(document, indent=2, default=str) + "\n")
        return path


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return value / base


def percentile(samples: list[float], p: float) -> float:
    """The ``p``-th percentile (0–100) of ``samples``, nearest rank."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def machine() -> dict[str, Any]:
    """Where the figures come from (the load average tells whether something else ran meanwhile)."""
    import platform
    import sqlite3

    return {
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# -- peers -------------------------------------------------------------------------------------------------------


def peer_python(name: str) -> Path:
    return PEERS_ROOT / f"peers-{name}" / "bin" / "python"


def peer_ready(name: str) -> bool:
    venv = PEERS_ROOT / f"peers-{name}"
    return peer_python(name).exists() and (venv / ".ready").exists()


def setup_peers(cfg: Config) -> None:
    """Create the peers' virtualenvs that are missing (``peers/setup.sh``); a failure only skips peers."""
    if not cfg.peers or all(peer_ready(name) for name in PEERS):
        return
    print("setting up the peers' virtualenvs (benchmarks/peers/setup.sh) ...", flush=True)
    done = subprocess.run(["bash", str(HERE / "peers" / "setup.sh")], env=dict(os.environ, PEERS_ROOT=str(PEERS_ROOT)))
    if done.returncode != 0:
        cfg.notes.append("peers/setup.sh failed: peers that are not set up are skipped")


def run_peer(cfg: Config, name: str, task: str, workdir: Path, **options: Any) -> dict[str, Any] | None:
    """Run one peer's script for ``task`` in its virtualenv; its JSON, or None when the peer is skipped
    (``--no-peers``, not set up) or failed (the reason goes into ``cfg.notes``)."""
    if not cfg.peers:
        return None
    if not peer_ready(name):
        cfg.notes.append(f"peer {name} skipped: {PEERS_ROOT}/peers-{name} is not set up")
        return None
    workdir.mkdir(parents=True, exist_ok=True)
    command = [str(peer_python(name)), "-W", "ignore", str(HERE / "peers" / PEERS[name]), task, "--tmp", str(workdir)]
    for key, value in options.items():
        command += [f"--{key}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        cfg.notes.append(f"peer {name} failed on {task}: {tail}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


class PeerServer:
    """A peer's append script kept running: it answers ``round N`` with ms per turn for each of its
    contenders (see ``peers/_common.serve``), so the runner can alternate its rounds with brutus's."""

    def __init__(self, name: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.stderr = workdir / "stderr.txt"
        command = [
            str(peer_python(name)),
            "-W",
            "ignore",
            str(HERE / "peers" / PEERS[name]),
            "append",
            "--tmp",
            str(workdir),
        ]
        with self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
            )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            self.process.wait(timeout=30)
            tail = (self.stderr.read_text().strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"peer {self.name} stopped: {tail}")
        return json.loads(line)

    def round(self, turns: int) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"round {turns}\n")
        self.process.stdin.flush()
        return self._read()["ms_per_turn"]

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def peer_servers(cfg: Config, workdir: Path) -> list[PeerServer]:
    """A running ``PeerServer`` for each peer that is set up (none with ``--no-peers``)."""
    servers = []
    if not cfg.peers:
        return servers
    for name in PEERS:
        if not peer_ready(name):
            cfg.notes.append(f"peer {name} skipped: {PEERS_ROOT}/peers-{name} is not set up")
            continue
        try:
            servers.append(PeerServer(name, workdir / name))
        except (RuntimeError, OSError, ValueError) as exc:
            cfg.notes.append(str(exc))
    return servers


def peer_results(cfg: Config, task: str, workdir: Path, **options: Any) -> dict[str, dict[str, Any]]:
    """Every peer's stores for ``task``, by label; each peer gets a directory of its own."""
    stores: dict[str, dict[str, Any]] = {}
    for name in PEERS:
        found = run_peer(cfg, name, task, workdir / name, **options)
        if found is not None:
            for label, result in found["stores"].items():
                stores[label] = dict(result, versions=found["versions"])
    return stores


# -- PostgreSQL --------------------------------------------------------------------------------------------------


@contextmanager
def pg_database(url: str, prefix: str) -> Iterator[str]:
    """A throw-away database on the server at ``url``, dropped afterwards; yields its URL."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from brutus.db.engine import normalize_url

    base = make_url(normalize_url(url))
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
