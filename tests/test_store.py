"""The sync store on SQLite and PostgreSQL: sessions, messages, the twelve part types, tool states."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from brutus import (
    InvalidInput,
    InvalidTransition,
    NotFound,
    SessionStore,
    TokenCounts,
)
from brutus.models import CacheTokens, ToolPart
from conftest import plain_url

ALL_PARTS = [
    {"type": "text", "text": "hello", "synthetic": True},
    {"type": "reasoning", "text": "thinking", "metadata": {"anthropic": {"signature": "sig"}}},
    {"type": "file", "mime": "text/plain", "filename": "a.txt", "url": "file:///a.txt", "source": {"type": "file"}},
    {"type": "tool", "call_id": "call_1", "tool": "bash", "state": {"status": "pending", "input": {"cmd": "ls"}}},
    {"type": "step-start", "snapshot": "abc"},
    {"type": "step-finish", "reason": "stop", "cost": 0.5, "tokens": {"input": 3, "output": 4, "cache": {"read": 1, "write": 2}}},
    {"type": "snapshot", "snapshot": "def"},
    {"type": "patch", "hash": "h1", "files": ["a.py", "b.py"]},
    {"type": "agent", "name": "build", "source": {"value": "@build", "start": 0, "end": 6}},
    {"type": "retry", "attempt": 2, "error": {"name": "APIError", "message": "overloaded"}},
    {"type": "compaction", "auto": True, "overflow": False, "tail_start_id": None},
    {"type": "subtask", "prompt": "do it", "description": "sub", "agent": "general"},
]


def test_session_lifecycle(store: SessionStore) -> None:
    parent = store.create_session(title="root", directory="/work")
    child = store.create_session(title="sub", parent_id=parent.id)
    assert parent.id.startswith("ses_") and child.parent_id == parent.id
    assert store.get_session(parent.id).title == "root"
    assert {s.id for s in store.list_sessions()} == {parent.id, child.id}
    assert [s.id for s in store.list_sessions(parent_id=parent.id)] == [child.id]
    assert len(store.list_sessions(limit=1)) == 1

    store.delete_session(parent.id)
    with pytest.raises(NotFound):
        store.get_session(parent.id)
    with pytest.raises(NotFound):
        store.get_session(child.id)  # child sessions go with their parent
    with pytest.raises(NotFound):
        store.delete_session(parent.id)


def test_delete_cascades_to_every_table(store: SessionStore, store_url: str) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "user")
    tool = store.append_part(msg.id, {"type": "tool", "call_id": "c", "tool": "read", "state": {"status": "completed", "input": {}, "output": "x"}})
    assert tool.id
    store.delete_session(ses.id)
    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        for table in ("messages", "parts", "tool_states", "tool_outputs", "compactions"):
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0, table
    engine.dispose()


def test_all_twelve_part_types_round_trip(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant", agent="build", mode="build", model_id="claude-sonnet-4-5", provider_id="anthropic")
    written = [store.append_part(msg.id, p) for p in ALL_PARTS]
    assert len({p.id for p in written}) == 12
    assert all(p.id.startswith("prt_") and p.message_id == msg.id and p.session_id == ses.id for p in written)
    [loaded] = store.messages(ses.id)
    assert loaded.info.model_id == "claude-sonnet-4-5"
    assert [p.model_dump() for p in loaded.parts] == [p.model_dump() for p in written]
    assert [p.type for p in loaded.parts] == [p["type"] for p in ALL_PARTS]


def test_messages_are_chronological_with_gapless_seq(store: SessionStore) -> None:
    ses = store.create_session()
    ids = []
    for i in range(30):
        m = store.append_message(ses.id, "user" if i % 2 == 0 else "assistant")
        store.append_part(m.id, {"type": "text", "text": f"m{i}"})
        ids.append(m.id)
    history = store.messages(ses.id)
    assert [m.info.id for m in history] == ids
    assert [m.info.seq for m in history] == list(range(1, 31))
    assert [m.parts[0].text for m in history] == [f"m{i}" for i in range(30)]
    assert ids == sorted(ids)  # ids are time-ordered
    assert store.get_session(ses.id).message_count == 30


def test_tool_state_machine_happy_paths(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    pending = store.append_part(msg.id, {"type": "tool", "call_id": "c1", "tool": "bash", "state": {"status": "pending", "input": {"cmd": "ls"}}})
    running = store.update_tool(pending.id, status="running", title="ls", metadata={"pid": 1})
    assert running.state.status == "running" and running.state.time.start is not None
    done = store.update_tool(pending.id, status="completed", output="a\nb\n", title="ls -la")
    assert done.state.status == "completed"
    assert done.state.output == "a\nb\n" and done.state.title == "ls -la" and done.state.metadata == {"pid": 1}
    assert done.state.input == {"cmd": "ls"}
    assert done.state.time.end is not None and done.state.time.compacted is None

    other = store.append_part(msg.id, {"type": "tool", "call_id": "c2", "tool": "bash", "state": {"status": "pending"}})
    failed = store.update_tool(other.id, status="error", error="denied")
    assert failed.state.status == "error" and failed.state.error == "denied"
    [loaded] = store.messages(ses.id)
    assert [p.model_dump() for p in loaded.parts] == [done.model_dump(), failed.model_dump()]


@pytest.mark.parametrize(
    "path, bad",
    [
        ([], "completed"),
        ([("running", {})], "pending"),
        ([("running", {})], "running"),
        ([("running", {}), ("completed", {"output": "x"})], "running"),
        ([("running", {}), ("completed", {"output": "x"})], "error"),
        ([("error", {"error": "e"})], "running"),
        ([], "bogus"),
    ],
)
def test_invalid_transitions_raise_and_write_nothing(store: SessionStore, path, bad) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    part = store.append_part(msg.id, {"type": "tool", "call_id": "c", "tool": "t", "state": {"status": "pending"}})
    for status, kwargs in path:
        store.update_tool(part.id, status=status, **kwargs)
    before = store.messages(ses.id)
    kwargs = {"output": "x"} if bad == "completed" else {"error": "e"} if bad == "error" else {}
    with pytest.raises(InvalidInput) as info:
        store.update_tool(part.id, status=bad, **kwargs)
    if bad != "bogus":
        assert isinstance(info.value, InvalidTransition)
    assert store.messages(ses.id) == before


def test_completed_without_output_and_error_without_message_refused(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    part = store.append_part(msg.id, {"type": "tool", "call_id": "c", "tool": "t", "state": {"status": "pending"}})
    with pytest.raises(InvalidInput):
        store.update_tool(part.id, status="error")
    store.update_tool(part.id, status="running")
    with pytest.raises(InvalidInput):
        store.update_tool(part.id, status="completed")
    assert store.messages(ses.id)[0].parts[0].state.status == "running"


def test_finish_message_records_tokens_and_cost(store: SessionStore) -> None:
    ses = store.create_session()
    user = store.append_message(ses.id, "user")
    msg = store.append_message(ses.id, "assistant", parent_id=user.id)
    tokens = TokenCounts(input=1200, output=300, reasoning=50, cache=CacheTokens(read=800, write=100))
    done = store.finish_message(msg.id, finish="tool-calls", tokens=tokens, cost=0.0125)
    assert done.finish == "tool-calls" and done.tokens == tokens and done.cost == 0.0125
    assert done.time.completed is not None and done.error is None
    loaded = store.messages(ses.id)[1].info
    assert loaded == done
    errored = store.finish_message(msg.id, finish="error", error={"name": "APIError", "message": "boom"})
    assert errored.error == {"name": "APIError", "message": "boom"}


def test_token_estimates_are_stored_at_write_time(store: SessionStore, store_url: str) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    store.append_part(msg.id, {"type": "text", "text": "x" * 10})  # 3 tokens
    tool = store.append_part(msg.id, {"type": "tool", "call_id": "c", "tool": "read", "state": {"status": "pending", "input": {"p": 1}}})
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output="y" * 4001)  # 1001 tokens
    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        out = conn.execute(text("SELECT output_tokens FROM tool_states WHERE part_id = :p"), {"p": tool.id}).scalar()
        part_tokens = conn.execute(text("SELECT tokens FROM parts WHERE id = :p"), {"p": tool.id}).scalar()
        msg_tokens = conn.execute(text("SELECT token_estimate FROM messages WHERE id = :m"), {"m": msg.id}).scalar()
    engine.dispose()
    assert out == 1001
    assert part_tokens == 1001 + 2  # '{"p":1}' is 7 bytes -> 2 tokens
    assert msg_tokens == 3 + 1003


def test_unknown_ids_raise_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFound):
        store.get_session("ses_nope")
    with pytest.raises(NotFound):
        store.append_message("ses_nope", "user")
    with pytest.raises(NotFound):
        store.append_part("msg_nope", {"type": "text", "text": "x"})
    with pytest.raises(NotFound):
        store.update_tool("prt_nope", status="running")
    with pytest.raises(NotFound):
        store.finish_message("msg_nope", finish="stop")
    with pytest.raises(NotFound):
        store.messages("ses_nope")
    with pytest.raises(NotFound):
        store.filter_compacted("ses_nope")
    with pytest.raises(NotFound):
        store.create_session(parent_id="ses_nope")
    for weird in ["", "x" * 500, "ses_\x00", "ses_\ud800", "'; DROP TABLE sessions; --", None, 5]:
        with pytest.raises(NotFound):
            store.get_session(weird)  # type: ignore[arg-type]
    assert store.list_sessions() == []


def test_update_tool_on_a_non_tool_part_is_not_found(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "user")
    part = store.append_part(msg.id, {"type": "text", "text": "x"})
    with pytest.raises(NotFound):
        store.update_tool(part.id, status="running")


def test_batch_commits_once_or_not_at_all(store: SessionStore) -> None:
    ses = store.create_session()
    with store.batch():
        user = store.append_message(ses.id, "user")
        store.append_part(user.id, {"type": "text", "text": "hi"})
    assert len(store.messages(ses.id)) == 1

    with pytest.raises(RuntimeError):
        with store.batch():
            m = store.append_message(ses.id, "user")
            store.append_part(m.id, {"type": "text", "text": "lost"})
            raise RuntimeError("agent crashed")
    assert len(store.messages(ses.id)) == 1
    assert store.get_session(ses.id).message_count == 1

    with pytest.raises(InvalidInput):
        with store.batch():
            store.append_message(ses.id, "user")
            store.append_message(ses.id, "system")
    assert len(store.messages(ses.id)) == 1


def test_explicit_ids_are_kept_and_duplicates_refused(store: SessionStore) -> None:
    ses = store.create_session(id="ses_imported1")
    msg = store.append_message(ses.id, "user", id="msg_imported1", created_at=1700000000000)
    part = store.append_part(msg.id, {"id": "prt_imported1", "type": "text", "text": "x"})
    assert (ses.id, msg.id, part.id) == ("ses_imported1", "msg_imported1", "prt_imported1")
    assert msg.time.created == 1700000000000
    for call in (
        lambda: store.create_session(id="ses_imported1"),
        lambda: store.append_message(ses.id, "user", id="msg_imported1"),
        lambda: store.append_part(msg.id, {"id": "prt_imported1", "type": "text", "text": "y"}),
        lambda: store.create_session(id="bad id with spaces"),
    ):
        with pytest.raises(InvalidInput):
            call()
    assert len(store.messages(ses.id)) == 1 and len(store.messages(ses.id)[0].parts) == 1


def test_invalid_message_and_part_fields_are_refused(store: SessionStore) -> None:
    ses = store.create_session()
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "user", colour="red")
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "tool")
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "assistant", tokens={"input": -1})
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "assistant", cost=float("nan"))
    msg = store.append_message(ses.id, "user")
    for bad in ({"type": "nope"}, {"type": "text"}, {"type": "tool", "call_id": "c", "tool": "t", "state": {"status": "done"}}, "text", {"type": "tool", "call_id": "c", "tool": "t", "state": {"status": "completed"}}):
        with pytest.raises(InvalidInput):
            store.append_part(msg.id, bad)
    with pytest.raises(InvalidInput):
        store.finish_message(msg.id, finish="")
    with pytest.raises(InvalidInput):
        store.finish_message(msg.id, finish="stop", tokens={"input": 2**70})
    history = store.messages(ses.id)
    assert len(history) == 1 and history[0].parts == [] and history[0].info.finish is None


def test_part_models_are_accepted(store: SessionStore) -> None:
    from brutus import TextPart, ToolState

    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    part = store.append_part(msg.id, ToolPart(call_id="c", tool="grep", state=ToolState(status="pending", input={"q": "x"})))
    text_part = store.append_part(msg.id, TextPart(text="done"))
    assert part.id and text_part.id and isinstance(part, ToolPart)


def test_open_twice_is_idempotent(store_url: str) -> None:
    a = SessionStore.open(store_url)
    ses = a.create_session(title="kept")
    a.close()
    b = SessionStore.open(store_url)
    assert b.get_session(ses.id).title == "kept"
    b.close()
