"""The worker processes of tests/test_races.py. Each prints ``ready``, then waits for a line on stdin before
it starts, so the test releases all workers at once.

    python race_worker.py URL append SHARED STEPS MODE [OUTPUT_BYTES [PAUSE_MS]]
                                                        agent steps into its own session and SHARED
                                                        (MODE: call = a commit per call, batch = per step),
                                                        PAUSE_MS after each (as an agent waits for its
                                                        model); prints its own session id
    python race_worker.py URL compact SESSION           one compaction per stdin line ``go``; prints its
                                                        outcome; ``block`` instead makes the summarizer wait
                                                        for one more line (the test holds it mid-call)
    python race_worker.py URL prune SESSION UNTIL       prunes back to back until SESSION holds UNTIL
                                                        messages, then once more; prints each one's marks
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from brutus import BrutusError, CompactionConfig, SessionStore
from brutus.models import TokenCounts
from brutus.summarizers import Summary, SummaryRequest

SMALL = CompactionConfig(prune_protect=2_000, prune_minimum=1_000)


def say(value: Any) -> None:
    print(value if isinstance(value, str) else json.dumps(value), flush=True)


def agent_step(store: SessionStore, session_id: str, label: str, output_bytes: int = 300) -> None:
    """One step of an agent: a user message and its text, a reply with a tool call that runs and completes."""
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": f"please do {label}"})
    reply = store.append_message(session_id, "assistant", parent_id=user.id)
    tool = store.append_part(reply.id, {"type": "tool", "call_id": f"call_{label}", "tool": "bash", "state": {"status": "pending", "input": {"n": label}}})
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output="x" * output_bytes)
    store.append_part(reply.id, {"type": "text", "text": f"did {label}"})
    store.finish_message(reply.id, finish="stop", tokens={"input": 10, "output": 2})


def append(store: SessionStore, shared: str, steps: str, mode: str, output_bytes: str = "300", pause_ms: str = "0") -> None:
    own = store.create_session(title="own")
    say("ready")
    sys.stdin.readline()
    started = time.perf_counter()
    for i in range(int(steps)):
        for session_id in (own.id, shared):
            if mode == "batch":
                with store.batch():
                    agent_step(store, session_id, f"{own.id}:{i}", int(output_bytes))
            else:
                agent_step(store, session_id, f"{own.id}:{i}", int(output_bytes))
            if float(pause_ms):
                time.sleep(float(pause_ms) / 1000)  # the behaviour: an agent waiting for its model between steps
    print(f"appended in {time.perf_counter() - started:.3f}s", file=sys.stderr)
    say(own.id)


class WaitingSummarizer:
    """Answers at once, or (``hold``) says ``in-summarizer`` and waits for a line on stdin first."""

    hold = False

    def summarize(self, request: SummaryRequest) -> Summary:
        if self.hold:
            say({"in_summarizer": [m.info.id for m in request.history]})
            sys.stdin.readline()
        return Summary(text="summary of the work so far", model="fake-model", tokens=TokenCounts(input=50, output=5))


def compact(store: SessionStore, session_id: str) -> None:
    summarizer = WaitingSummarizer()
    say("ready")
    for line in sys.stdin:
        summarizer.hold = line.strip() == "block"
        try:
            result = store.compact(session_id, summarizer, config=SMALL)
            say({"outcome": "completed", "compaction_id": result.compaction_id})
        except BrutusError as exc:
            say({"outcome": type(exc).__name__, "error": str(exc)})


def prune(store: SessionStore, session_id: str, until: str) -> None:
    store.prune(session_id, SMALL)  # warm up (and prune the history there is) before the race
    say("ready")
    sys.stdin.readline()
    last = False
    while not last:
        seen = store.get_session(session_id).message_count
        last = seen >= int(until)  # the appends are over: once more
        started = time.perf_counter()
        result = store.prune(session_id, SMALL)
        say({"took": round(time.perf_counter() - started, 3), "seen": seen, "pruned": result.pruned, "parts": [p.id for p in result.parts], "at": [p.state.time.compacted for p in result.parts]})


def main(argv: list[str]) -> None:
    url, scenario, *args = argv
    with SessionStore.open(url, auto_migrate=False) as store:
        {"append": append, "compact": compact, "prune": prune}[scenario](store, *args)


if __name__ == "__main__":
    main(sys.argv[1:])
