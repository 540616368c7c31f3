"""A live agent killed with SIGKILL between ``messages.create`` and ``record`` loses that one response and
nothing else; a new process resumes the session by id, runs the tool calls still waiting, and the API
accepts every request that follows (thinking signatures included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from brutus import SessionStore
from brutus.testing import FakeMessagesAPI, Reply

from live_helpers import MODEL, SYSTEM, THINKING, TOOLS, client

HERE = Path(__file__).parent


def _reply(i: int) -> Reply:
    if i % 2 == 0:
        return Reply([{"type": "thinking", "thinking": f"think {i}"},
                      {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "bash", "input": {"command": f"echo {i}"}}])
    return Reply([{"type": "thinking", "thinking": f"think {i}"}, {"type": "text", "text": f"done {i}"}])


def test_kill_between_create_and_record_loses_one_response(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session_id = store.create_session(title="killed").id
    replies = iter(_reply(i) for i in range(100))
    with FakeMessagesAPI(lambda request: next(replies)) as api:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        child = subprocess.Popen([sys.executable, str(HERE / "live_crash_child.py"), store_url, session_id, api.base_url, "5"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "created", child.stderr.read() if child.stderr else line
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert len(api.requests) == 5 and all(r.accepted for r in api.requests)

        with SessionStore.open(store_url) as store:
            history = store.messages(session_id)
            # 4 responses recorded (of 5 created): the fifth, a tool call, is the only thing lost
            assert sum(1 for m in history if m.info.role == "assistant") == 4
            conv = store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING, max_tokens=4096)
            sdk = client(api)
            for _ in range(4):  # resume: the lost request is sent again, then the agent goes on
                message = sdk.beta.messages.create(**conv.request())
                conv.record(message)
                calls = conv.pending_calls()
                if calls:
                    conv.tool_results([{"tool_use_id": c["id"], "content": "ok"} for c in calls])
                else:
                    conv.user("go on")
            assert all(r.accepted for r in api.requests), [r.error for r in api.requests if not r.accepted]
            assert api.stats.thinking_blocks_dropped == 0
            assert sum(1 for m in store.messages(session_id) if m.info.role == "assistant") == 8


def test_a_resumed_agent_runs_the_calls_still_waiting(store_url: str) -> None:
    """Killed after ``record`` and before ``tool_results``: the calls come back from ``pending_calls()``."""
    with SessionStore.open(store_url) as store:
        session_id = store.create_session(title="killed").id
        conv = store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING, max_tokens=4096)
        with FakeMessagesAPI([_reply(0), _reply(1)]) as api:
            conv.user("start")
            conv.record(client(api).beta.messages.create(**conv.request()))
            resumed = store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING, max_tokens=4096)
            calls = resumed.pending_calls()
            assert [c["id"] for c in calls] == ["toolu_000"]
            resumed.tool_results([{"tool_use_id": "toolu_000", "content": "0"}])
            resumed.record(client(api).beta.messages.create(**resumed.request()))
            assert all(r.accepted for r in api.requests)
