"""The benchmark suite runs: ``benchmarks/run.py --smoke --only append --no-peers`` exits 0 and writes valid
JSON. Timings are never asserted; the peers' virtualenvs are not needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.mark.slow
def test_append_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--only", "append", "--no-peers", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "append.json").read_text())
    assert result["benchmark"] == "append" and result["mode"] == "smoke"
    figures = result["data"]["ms_per_turn"]
    assert set(figures) == {"brutus_call", "brutus_batch", "brutus_whole", "raw_call", "raw_batch", "raw_whole"}
    assert all(figure["median"] > 0 for figure in figures.values())
    assert set(result["data"]["brutus_own_ms_per_turn"]) == {"batch", "call"}
    assert [goal["goal"] for goal in result["goals"]]  # every goal is reported, measured or not
    assert "brutus, 8 calls, a commit each" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_bulk_benchmark_runs_and_writes_json(backend: str, tmp_path: Path) -> None:
    """``benchmarks/bench_bulk.py`` at tiny sizes, SQLite and PostgreSQL, sync and async."""
    import os

    bulk = RUN.parent / "bench_bulk.py"
    done = subprocess.run(
        [sys.executable, str(bulk), "--prefill", "200", "--rounds", "2", "--calls", "1", "--results", str(tmp_path),
         "--tmp", str(tmp_path / "scratch"), "--postgres", os.environ["BRUTUS_TEST_POSTGRES_URL"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "bulk.json").read_text())
    figures = result["data"]["results"]
    assert set(figures) == {f"{b} {m} new" for b in ("sqlite", "postgresql") for m in ("sync", "async")}
    assert all(figure["msg_per_s"] > 0 and figure["calls"] == 2 for figure in figures.values())
    assert len(result["goals"]) == 2 and "into a store of 200 messages" in done.stdout
    assert not (tmp_path / "scratch" / "bulk").exists()  # the scratch store is gone
