"""Whole histories streamed: peak memory and time of ``brutus export`` and ``brutus show --full`` of one long
session, against the whole history loaded at once (what both did before issue 32), in one run.

The session: the corpus session of median text per message (real text and tool outputs; the largest holds ten
times as much) imported, then copied onto itself
(``workload.copy_messages``: the rows as stored, new ids) to ``--messages`` messages. Each figure is a fresh
process: a measuring process starts the command as its only child and reports
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` once it has ended, and the wall time.

- ``export, whole``: ``dumps(export_opencode(store, session))`` written to a file (the command before);
- ``export, streamed``: ``brutus export SESSION -o FILE``;
- ``show --full, whole``: ``store.messages(session)`` printed with ``print_history`` (the command before);
- ``show --full, streamed``: ``brutus show SESSION --full``.

Output goes to a file (export) or /dev/null (show). The export files are compared byte for byte. Order:
whole, streamed, streamed, whole (ABBA); figures are means of the two runs.

    python benchmarks/bench_stream.py [--messages 50000] [--workdir /tmp/h-gc]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from harness import Config, Goal, Section, Table  # noqa: E402
from workload import copy_messages  # noqa: E402

from brutus import SessionStore  # noqa: E402
from brutus.importers import import_files  # noqa: E402

NAME = "stream"
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus"
MB = 1 << 20

WHOLE_EXPORT = """
import sys
from pathlib import Path
from brutus import SessionStore
from brutus.importers.export import dumps, export_opencode
store = SessionStore.open(sys.argv[1], auto_migrate=False, read_only=True)
Path(sys.argv[3]).write_bytes(dumps(export_opencode(store, sys.argv[2])).encode("utf-8"))
store.close()
"""
WHOLE_SHOW = """
import sys
from brutus import SessionStore
from brutus.cli.output import print_history
store = SessionStore.open(sys.argv[1], auto_migrate=False, read_only=True)
history = store.messages(sys.argv[2])
store.close()
print_history(history)
"""
# the measuring process: runs argv as its only child, prints its peak RSS (KiB) and wall time (s)
MEASURE = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - started
if done.returncode:
    sys.exit(done.stderr.decode())
print(json.dumps({"rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "seconds": seconds}))
"""


def build(path: Path, messages: int) -> str:
    """The session of the module docstring; its id."""
    store = SessionStore.open(f"sqlite:///{path}")
    import_files(store, sorted(CORPUS.glob("*/*.gz")))
    sessions = [s for s in store.list_sessions() if s.parent_id is None and s.message_count % 2 == 0]
    store.close()
    conn = sqlite3.connect(path)
    per_message = {}
    for s in sessions:
        text = conn.execute(
            "SELECT coalesce(sum(length(p.data)), 0) + coalesce(sum(length(o.output)), 0) FROM parts p "
            "LEFT JOIN tool_outputs o ON o.part_id = p.id WHERE p.session_id = ?", (s.id,)
        ).fetchone()[0]
        per_message[s.id] = text / s.message_count
    conn.close()
    source = sorted(sessions, key=lambda s: per_message[s.id])[len(sessions) // 2]
    block = source.message_count
    copy_messages(path, source.id, first_seq=1, block_messages=block, count=messages - block)
    return source.id


def measure(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def commands(url: str, session_id: str, work: Path) -> dict[str, list[str]]:
    brutus = [sys.executable, "-m", "brutus"]
    return {
        "export, whole": [sys.executable, "-c", WHOLE_EXPORT, url, session_id, str(work / "whole.json")],
        "export, streamed": [*brutus, "export", session_id, "-o", str(work / "streamed.json"), "--db", url],
        "show --full, whole": [sys.executable, "-c", WHOLE_SHOW, url, session_id],
        "show --full, streamed": [*brutus, "show", session_id, "--full", "--db", url],
    }


def run(cfg: Config, messages: int | None = None) -> Section:
    messages = messages or cfg.pick(50_000, 10_000, 2_000)
    work = cfg.workdir(NAME)
    path = work / "stream.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    session_id = build(path, messages)
    url = f"sqlite:///{path}"
    print(f"built {messages:,} messages, {os.path.getsize(path) / MB:.0f} MB", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    todo = commands(url, session_id, work)
    for what in ("export", "show --full"):
        for how in ("whole", "streamed", "streamed", "whole"):
            name = f"{what}, {how}"
            runs.setdefault(name, []).append(measure(todo[name]))
            print(f"  {name}: {runs[name][-1]}", flush=True)
    same = (work / "whole.json").read_bytes() == (work / "streamed.json").read_bytes()
    size = (work / "streamed.json").stat().st_size
    table = Table(
        f"a {messages:,}-message session ({os.path.getsize(path) / MB:.0f} MB database, export {size / MB:.0f} MB)",
        ["command", "peak RSS MB", "time s", "RSS vs whole", "time vs whole"],
    )
    mean = {name: {k: sum(r[k] for r in rs) / len(rs) for k in ("rss_kib", "seconds")} for name, rs in runs.items()}
    for name, m in mean.items():
        base = mean[name.replace("streamed", "whole")]
        table.add(name, round(m["rss_kib"] / 1024, 1), round(m["seconds"], 2), round(m["rss_kib"] / base["rss_kib"], 3),
                  round(m["seconds"] / base["seconds"], 3))
    table.notes.append(f"streamed export byte-identical to the whole one: {same}; load average "
                       f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    section = Section(NAME, tables=[table], data={"messages": messages, "runs": runs, "identical": same})
    for name in ("export, streamed", "show --full, streamed"):
        section.goals.append(Goal(f"{name}: peak RSS at {messages:,} messages", mean[name]["rss_kib"] / 1024, 150, " MB"))
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    tmp = args.workdir or Path(tempfile.mkdtemp(prefix="bench-stream-"))
    cfg = Config(mode="full", tmp=tmp)
    section = run(cfg, args.messages)
    print(section.render())
    print(f"results: {section.write(cfg)}")
    shutil.rmtree(tmp / NAME, ignore_errors=True)


if __name__ == "__main__":
    main()
