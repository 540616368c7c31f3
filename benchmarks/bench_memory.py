"""Memory: peak RSS of loading the model's view of a session holding ~1 GB of tool output, most of it pruned.

The session is 1,000 turns with a 1 MB tool output each (100 with --quick), written through the API, then
pruned (seed 004's defaults mark every output but the last two turns'). A fresh process opens the store,
then loads ``filter_compacted`` + ``to_anthropic``; its peak RSS before and after tells what the load costs
(the process's high-water mark, VmHWM, where Linux has it; ``resource.getrusage`` elsewhere). Pruned outputs
should never be read (goal: peak under 100 MB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from harness import Config, Goal, Section, Table
from workload import open_sqlite, write_turns

NAME = "memory"
MB = 1024 * 1024

# The peak is the process's own high-water mark (VmHWM). ``getrusage``'s ru_maxrss is printed too, but on Linux a
# process started from a larger one reports at least its parent's peak there (the maximum survives exec).
PEAK = """
import resource
def peak_kb():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""
PROBE = (
    PEAK
    + """
import json, sys, time
from brutus import SessionStore, to_anthropic
store = SessionStore.open(sys.argv[1])
store.get_session(sys.argv[2])  # connected, schema checked
before = peak_kb()
start = time.perf_counter()
view = store.filter_compacted(sys.argv[2])
body = to_anthropic(view)
elapsed = time.perf_counter() - start
after = peak_kb()
tools = [p for m in view for p in m.parts if p.type == "tool" and p.state.time.compacted is None]
outputs = sum(len(p.state.output or "") for p in tools)
maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "peak_kb": after, "ru_maxrss_kb": maxrss,
                  "seconds": elapsed, "view_messages": len(view), "anthropic_messages": len(body["messages"]),
                  "unpruned_output_bytes": outputs}))
"""
)
IMPORTED = PEAK + "import brutus.store, brutus.render\nprint(peak_kb())"


def run(cfg: Config) -> Section:
    turns = cfg.pick(1000, 100, 10)
    output_bytes = cfg.pick(MB, MB, 100 * 1024)
    path = cfg.workdir(NAME) / "memory.db"
    store = open_sqlite(path)
    session_id = store.create_session(title="a gigabyte of tool output").id
    started = time.perf_counter()
    write_turns(store, session_id, 0, turns, output="o" * output_bytes, chunk=10)
    written = time.perf_counter() - started
    pruned = store.prune(session_id)
    store.close()
    db_bytes = os.path.getsize(path)

    done = subprocess.run(
        [sys.executable, "-c", PROBE, f"sqlite:///{path}", session_id], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"the memory probe failed: {done.stderr.strip()[-2000:]}")
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    baseline = subprocess.run([sys.executable, "-c", IMPORTED], capture_output=True, text=True, check=True)
    import_kb = int(baseline.stdout.strip())

    peak_mb = probe["peak_kb"] / 1024
    table = Table(
        f"peak RSS loading the view of a session with {turns * output_bytes / MB:,.0f} MB of tool output "
        f"({len(pruned.parts)} of {turns} outputs pruned)",
        ["what", "value"],
    )
    table.add("database file", f"{db_bytes / MB:,.0f} MB")
    table.add("peak RSS after importing brutus (python -c)", f"{import_kb / 1024:.1f} MB")
    table.add("peak RSS after opening the store", f"{probe['before_kb'] / 1024:.1f} MB")
    table.add("peak RSS after filter_compacted + to_anthropic", f"{peak_mb:.1f} MB")
    table.add("growth from the load", f"{(probe['peak_kb'] - probe['before_kb']) / 1024:.1f} MB")
    table.add("load time", f"{probe['seconds'] * 1000:,.0f} ms")
    table.add(
        "messages in the view / sent to the model", f"{probe['view_messages']:,} / {probe['anthropic_messages']:,}"
    )
    table.add("unpruned output bytes in the view", f"{probe['unpruned_output_bytes'] / MB:.1f} MB")
    table.notes.append(
        f"written through the API in {written:.1f} s ({turns * output_bytes / MB / written:,.0f} MB/s), "
        "10 turns per transaction"
    )
    goals = [Goal("peak RSS loading the view of a mostly pruned session < 100 MB", peak_mb, 100.0, " MB")]
    data = {
        "turns": turns,
        "output_bytes": output_bytes,
        "db_bytes": db_bytes,
        "write_seconds": written,
        "pruned_parts": len(pruned.parts),
        "import_peak_kb": import_kb,
        "probe": probe,
    }
    return Section(NAME, [table], goals, data)
