"""The benchmark suite runs: ``benchmarks/run.py --smoke --only append --no-peers`` and ``benchmarks/year.py
--quick`` exit 0 and write valid JSON. Timings are never asserted; the peers' virtualenvs are not needed."""

from __future__ import annotations

import json
import os
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


YEAR = RUN.parent / "year.py"


@pytest.mark.slow
def test_year_benchmark_runs_on_both_sizes_and_names_every_figure(tmp_path: Path) -> None:
    """``benchmarks/year.py --quick`` (issue 32): every figure at the two sizes on each backend, with goals; a
    second run finds the SQLite stores it built in the cache."""
    url = os.environ.get("BRUTUS_TEST_POSTGRES_URL")
    command = [sys.executable, str(YEAR), "--quick", "--cache", str(tmp_path / "cache"), "--results", str(tmp_path)]
    for run in (1, 2):  # the second run on SQLite only: its stores come from the cache
        backends = {"sqlite", "postgresql"} if url and run == 1 else {"sqlite"}
        pg = ["--pg", url] if "postgresql" in backends else ["--no-pg"]
        done = subprocess.run(command + pg, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads((tmp_path / "year.json").read_text())
        assert result["benchmark"] == "year" and result["data"]["sizes"] == {"small": 300, "large": 1200}
        stores = result["data"]["stores"]
        assert {(s["backend"], s["size"]) for s in stores} == {(b, z) for b in backends for z in ("small", "large")}
        for store in stores:
            assert store["cached"] == (run == 2 and store["backend"] == "sqlite")
            assert store["built"]["messages"] == (300 if store["size"] == "small" else 1200)
            figures = store["figures"]
            assert figures["view_messages"] == 200  # the long session's view: the compaction pair and its tail
            assert 50 >= figures["search"]["common"]["hits"] >= max(1, figures["search"]["rare"]["hits"])
            assert figures["disk"]["bytes"] > figures["disk"]["raw"] > 0
            assert 0.02 < figures["gc"]["dropped_share"] < 0.2 and figures["gc"]["parts"] > 0
        assert set(result["data"]["append_msg_s"]) == backends
        assert set(result["data"]["export"]) == backends
        probes = [probe for found in result["data"]["export"].values() for probe in found.values()]
        assert len(probes) == 2 * len(backends) and all(probe["peak_kb"] > 0 for probe in probes)
        texts = [goal["goal"] for goal in result["goals"]]
        assert sum("search" in text for text in texts) == 5 * len(backends)
        assert all(goal["met"] is not None for goal in result["goals"])
        assert "year: sizes 300 / 1,200 messages" in done.stdout


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


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_agents_benchmark_holds_a_few_agents_and_loses_nothing(backend: str, tmp_path: Path) -> None:
    """``benchmarks/agents.py --quick`` (issue 37): a few simulated agents on each store, every level measured,
    no step failed, and the check after the run found every acknowledged write and no seq gap."""
    agents = RUN.parent / "agents.py"
    done = subprocess.run(
        [sys.executable, str(agents), "--quick", "--server", os.environ["BRUTUS_TEST_POSTGRES_URL"], "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "agents.json").read_text())
    assert result["benchmark"] == "agents" and set(result["stores"]) == {"async", "sync"}
    for found in result["stores"].values():
        assert found["rows"] and found["rows"][0]["agents"] == 4
        # round trips may be fewer than statements (pipelined writes, statements in autocommit), never none
        assert all(row["errors"] == 0 and row["steps"] > 0 and row["statements"] > 0 and row["round_trips"] > 0
                   and row["transactions"] > 0 for row in found["rows"])
        check = found["check"]
        assert check["sessions"] == found["rows"][-1]["agents"] and check["acknowledged_messages"] > 0
        assert check["lost_messages"] == check["lost_calls"] == check["sessions_with_gaps"] == 0
    assert "held with p99 <= 100 ms" in done.stdout


def test_agents_that_failed_to_start_are_errors_of_every_window_after() -> None:
    """An agent whose start failed (seen: "too many clients" with every process's pools over the server's
    max_connections) is gone from every later window: each counts it, so no such level is reported as held."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("agents_benchmark", RUN.parent / "agents.py")
    assert spec is not None and spec.loader is not None
    agents = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = agents  # its dataclasses look their module up
    try:
        spec.loader.exec_module(agents)

        class NoWire:
            def snapshot(self) -> dict[str, int]:
                return {}

        counters = agents.Counters()
        reporter = agents.Reporter(counters, NoWire())
        counters.unstarted += 1
        counters.errors += 1
        assert reporter.collect()["errors"] == 2
        reporter.mark()  # a new window: the step's error is behind it, the missing agent is not
        assert reporter.collect()["errors"] == 1
        row = {"agents": 8, "errors": 1, "p99_ms": 20.0}
        assert agents.held([{"agents": 4, "errors": 0, "p99_ms": 20.0}, row], 100.0) == 4
    finally:
        del sys.modules[spec.name]
