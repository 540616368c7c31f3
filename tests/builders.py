"""Test helpers: write a history described as plain data through the public store API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from brutus.store import SessionStore


@dataclass
class Tool:
    tool: str = "read"
    status: str = "completed"
    output_bytes: int = 4000
    compacted: bool = False


@dataclass
class Msg:
    role: str
    text: str = ""
    tools: list[Tool] = field(default_factory=list)
    summary: bool = False
    finish: str | None = "stop"
    error: bool = False
    compaction: bool = False  # user message holding a compaction part
    parent: int | None = None  # index of the parent message (assistant → user); default: the last user
    tail_back: int | None = None  # compaction part's tail_start_id = the message this many places back


def write_history(store: SessionStore, spec: list[Msg], *, title: str = "t") -> str:
    session = store.create_session(title=title)
    ids: list[str] = []
    last_user: str | None = None
    with store.batch():
        for index, m in enumerate(spec):
            fields: dict[str, Any] = {}
            if m.role == "assistant":
                parent = ids[m.parent] if m.parent is not None else last_user
                fields.update(parent_id=parent, summary=m.summary)
            msg = store.append_message(session.id, m.role, **fields)
            ids.append(msg.id)
            if m.role == "user":
                last_user = msg.id
            if m.text:
                store.append_part(msg.id, {"type": "text", "text": m.text})
            if m.compaction:
                tail = ids[index - m.tail_back] if m.tail_back and index - m.tail_back >= 0 else None
                store.append_part(msg.id, {"type": "compaction", "auto": True, "tail_start_id": tail})
            for n, t in enumerate(m.tools):
                state: dict[str, Any] = {"status": t.status, "input": {"path": f"f{index}_{n}.py"}}
                if t.status == "completed":
                    state["output"] = "x" * t.output_bytes
                    state["time"] = {"start": 1, "end": 2, "compacted": 3 if t.compacted else None}
                if t.status == "error":
                    state["error"] = "failed"
                store.append_part(msg.id, {"type": "tool", "call_id": f"call_{index}_{n}", "tool": t.tool, "state": state})
            if m.role == "assistant" and m.finish:
                store.finish_message(msg.id, finish=m.finish, error={"message": "boom"} if m.error else None)
    return session.id


tools = st.builds(
    Tool,
    tool=st.sampled_from(["read", "bash", "skill", "edit"]),
    status=st.sampled_from(["completed", "completed", "completed", "error", "running", "pending"]),
    output_bytes=st.sampled_from([0, 100, 4_000, 40_000, 100_000]),
    compacted=st.sampled_from([False, False, False, True]),
)


@st.composite
def histories(draw: Any) -> list[Msg]:
    """Random plausible sessions: turns of a user message and assistant replies with tools, sometimes a
    compaction (a user message with a compaction part followed by a summary that may be pending or failed)."""
    spec: list[Msg] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["turn", "turn", "turn", "compaction"]))
        if kind == "turn":
            spec.append(Msg("user", text=draw(st.sampled_from(["hi", "do it", "x" * 500]))))
            for _ in range(draw(st.integers(0, 3))):
                spec.append(Msg("assistant", text="ok", tools=draw(st.lists(tools, max_size=3)), finish=draw(st.sampled_from(["stop", "tool-calls", None]))))
        else:
            tail_back = draw(st.sampled_from([None, None, 1, 2, 3, 50]))
            spec.append(Msg("user", compaction=True, tail_back=tail_back))
            spec.append(
                Msg(
                    "assistant",
                    text="summary of the work",
                    summary=True,
                    finish=draw(st.sampled_from(["stop", "stop", None])),
                    error=draw(st.sampled_from([False, False, True])),
                    parent=len(spec) - 1,
                )
            )
    return spec
