"""Several processes appending at once: no "database is locked", exact counts, gapless per-session seq."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from brutus import SessionStore
from conftest import plain_url

WRITER = textwrap.dedent(
    """
    import sys
    from brutus import SessionStore
    url, shared, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SessionStore.open(url)
    own = store.create_session(title="own")
    for i in range(steps):
        for session_id in (own.id, shared):
            user = store.append_message(session_id, "user")
            store.append_part(user.id, {"type": "text", "text": f"step {i}"})
            reply = store.append_message(session_id, "assistant", parent_id=user.id)
            tool = store.append_part(reply.id, {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending"}})
            store.update_tool(tool.id, status="running")
            store.update_tool(tool.id, status="completed", output="ok " * 50)
            store.finish_message(reply.id, finish="stop", tokens={"input": 10, "output": 2})
    print(own.id)
    """
)


def test_processes_append_concurrently(store_url: str) -> None:
    writers, steps = 4, 15
    store = SessionStore.open(store_url)
    shared = store.create_session(title="shared")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, store_url, shared.id, str(steps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(writers)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert "locked" not in err
    own_ids = [out.strip() for out, _ in outputs]

    for session_id in own_ids:
        history = store.messages(session_id)
        assert len(history) == 2 * steps
        assert [m.info.seq for m in history] == list(range(1, 2 * steps + 1))
    shared_history = store.messages(shared.id)
    assert len(shared_history) == 2 * steps * writers
    assert [m.info.seq for m in shared_history] == list(range(1, 2 * steps * writers + 1))
    # every assistant message sits right after its own user message? not guaranteed across writers, but each
    # assistant's parent is a user message of the same session, and every tool finished.
    by_id = {m.info.id: m for m in shared_history}
    for m in shared_history:
        if m.info.role == "assistant":
            assert by_id[m.info.parent_id].info.role == "user"
            assert [p.state.status for p in m.parts] == ["completed"]
    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        tools = conn.execute(text("SELECT count(*) FROM tool_states WHERE status = 'completed'")).scalar()
    engine.dispose()
    assert tools == 2 * steps * writers
    store.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_completing_a_tool_does_not_wait_for_a_key_share_on_its_part(store: SessionStore) -> None:
    """The background indexer inserts search vectors whose foreign key names a part (a KEY SHARE lock on it)
    while an agent completes that part's tool call: ``update_tool`` locks the row FOR NO KEY UPDATE, so it does
    not wait (FOR UPDATE did, and deadlocked with the indexer across a response's two tool parts: each such
    step stalled a second until PostgreSQL broke the cycle)."""
    session = store.create_session()
    message = store.append_message(session.id, "assistant")
    state = {"status": "pending", "input": {"command": "ls"}}
    part = store.append_part(message.id, {"type": "tool", "call_id": "call_1", "tool": "bash", "state": state})
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(store.update_tool(part.id, status="running")))
    with store.engine.connect() as holder, store.engine.connect() as watcher:
        holder.execute(text("SELECT 1 FROM parts WHERE id = :p FOR KEY SHARE"), {"p": part.id})
        worker.start()
        waiting = 0
        while worker.is_alive() and not waiting:  # until the call returns, or its backend waits on a lock
            waiting = watcher.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )).scalar_one()
            watcher.rollback()
        holder.rollback()
    worker.join()
    assert waiting == 0 and [p.state.status for p in done] == ["running"]
