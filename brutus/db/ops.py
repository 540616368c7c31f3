"""The store's operations on sessions, messages, parts and tool states, written once for the sync and the async
store (reading a history and pruning it: ``history_ops``).

Each operation is a generator over ``Step``s (see ``statements``): the store runs it inside one transaction,
so validation errors raised part way leave nothing written. Validation that needs no database happens
before the first step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

from ..codec import encode_json, encode_text
from ..errors import InvalidInput, NotFound
from ..ids import new_id
from ..models import Message, Session, TokenCounts, ToolPart, ToolState, ToolTime
from ..toolstate import check_transition
from ..tokens import estimate_json_tokens, estimate_tokens
from .convert import (
    construct,
    message_from_row,
    part_data,
    part_tokens,
    replaced,
    session_from_row,
    text_in,
    token_columns,
    validate_part,
)
from . import statements as st
from .convert import text_out
from .statements import Op, refresh_boundary, step

__all__ = [
    "MESSAGE_FIELDS",
    "ToolChange",
    "ToolRow",
    "append_message",
    "append_part",
    "check_id",
    "create_session",
    "delete_session",
    "finish_message",
    "get_session",
    "list_sessions",
    "message_values",
    "plan_tool_change",
    "tool_row",
    "update_tool",
    "write_tool_changes",
    "with_tool_times",
]

_ID = re.compile(r"[A-Za-z0-9_\-.:]{1,64}")
MESSAGE_FIELDS = frozenset(
    {
        "id",
        "parent_id",
        "agent",
        "mode",
        "model_id",
        "provider_id",
        "summary",
        "synthetic",
        "metadata",
        "created_at",
        "finish",
        "tokens",
        "cost",
        "error",
        "completed_at",
    }
)


def check_id(kind: str, value: Any, *, new: bool = False) -> str:
    """An id as stored: 1–64 characters of ``[A-Za-z0-9_-.:]``. A malformed id cannot exist: ``NotFound``
    for a lookup, ``InvalidInput`` for an id a caller wants to create."""
    if isinstance(value, str) and _ID.fullmatch(value):
        return value
    if new:
        raise InvalidInput(f"invalid {kind} id {value!r}: use 1-64 characters of letters, digits and _-.:")
    raise NotFound(kind, value)


# -- sessions -----------------------------------------------------------------------------------------------


def create_session(
    *, now: int, title: str | None, directory: str | None, parent_id: str | None, id: str | None
) -> Op:
    session_id = check_id("session", id, new=True) if id is not None else new_id("session", now)
    for name, value in (("title", title), ("directory", directory)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"session {name} must be a string, got {type(value).__name__}")
    if parent_id is not None:
        parent_id = check_id("session", parent_id)
        found = yield step(st.SESSION_ID, {"b_sid": parent_id}, fetch="first")
        if found is None:
            raise NotFound("session", parent_id)
    if id is not None:
        taken = yield step(st.SESSION_ID, {"b_sid": session_id}, fetch="first")
        if taken is not None:
            raise InvalidInput(f"session {session_id} already exists")
    values = dict(
        id=session_id,
        parent_id=parent_id,
        title=text_in(title),
        directory=text_in(directory),
        created_at=now,
        updated_at=now,
        archived_at=None,
        last_seq=0,
        boundary_message_id=None,
        boundary_seq=0,
    )
    yield step(st.INSERT_SESSION, values)
    return Session(id=session_id, parent_id=parent_id, title=title, directory=directory, created_at=now, updated_at=now)


def get_session(session_id: Any) -> Op:
    session_id = check_id("session", session_id)
    row = yield step(st.SESSION, {"b_sid": session_id}, fetch="first")
    if row is None:
        raise NotFound("session", session_id)
    return session_from_row(row)


def list_sessions(
    *, parent_id: str | None, limit: int | None, include_archived: bool, after: Any = None, forked_from: str | None = None
) -> Op:
    """Sessions, most recently updated first, ties by id (descending); with ``after``, a keyset page: the
    sessions that come after that position in this order. ``after`` is a session id (its position now:
    ``NotFound`` when there is no such session) or a ``Session`` from an earlier page (the position it had when
    read, whatever happened to it since)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput(f"limit must be a non-negative integer, got {limit!r}")
    params: dict[str, Any] = {}
    if parent_id is not None:
        params["b_parent"] = parent_id
    if forked_from is not None:
        params["b_forked_from"] = check_id("session", forked_from)
    if limit is not None:
        params["b_limit"] = limit
    by = None
    if isinstance(after, Session):  # the position as read
        by, params["b_updated"], params["b_after"] = "position", after.updated_at, check_id("session", after.id)
    elif after is not None:  # the session's position now, looked up by the page's own statement
        if not isinstance(after, str):
            raise InvalidInput(f"after must be a session id or a Session, got {type(after).__name__}")
        by, params["b_after"] = "id", check_id("session", after)
    query = st.session_list(
        parent=parent_id is not None,
        include_archived=include_archived,
        after=by,
        limit=limit is not None,
        forks=forked_from is not None,
    )
    rows = yield step(query, params, fetch="all")
    if not rows and by == "id":  # an empty page: the last one, or no such session
        found = yield step(st.SESSION_ID, {"b_sid": params["b_after"]}, fetch="first")
        if found is None:
            raise NotFound("session", params["b_after"])
    return [session_from_row(r) for r in rows]


def delete_session(session_id: Any) -> Op:
    """Delete a session with its messages, parts, tool states, compactions and child sessions."""
    session_id = check_id("session", session_id)
    count = yield step(st.DELETE_SESSION, {"b_sid": session_id}, fetch="rowcount")
    if not count:
        raise NotFound("session", session_id)
    return None


# -- messages -----------------------------------------------------------------------------------------------


def message_values(session_id: str, role: str, fields: dict[str, Any], now: int) -> tuple[dict[str, Any], Message]:
    if not fields.keys() <= MESSAGE_FIELDS:
        raise InvalidInput(f"unknown message field(s): {', '.join(sorted(fields.keys() - MESSAGE_FIELDS))}")
    if role not in ("user", "assistant"):
        raise InvalidInput(f"role must be 'user' or 'assistant', got {role!r}")
    get = fields.get
    message_id = get("id")
    message_id = new_id("message", now) if message_id is None else check_id("message", message_id, new=True)
    parent_id = get("parent_id")
    if parent_id is not None:
        parent_id = check_id("message", parent_id, new=True)
    try:
        message = Message.model_validate(
            {
                "id": message_id,
                "session_id": session_id,
                "role": role,
                "parent_id": parent_id,
                "summary": get("summary", False),
                "synthetic": get("synthetic", False),
                "finish": get("finish") or None,
                "error": get("error") or None,
                "tokens": get("tokens") or {},
                "cost": get("cost", 0.0),
                "agent": get("agent"),
                "mode": get("mode"),
                "model_id": get("model_id"),
                "provider_id": get("provider_id"),
                "metadata": get("metadata"),
                "time": {"created": get("created_at") or now, "completed": get("completed_at")},
            }
        )
    except ValidationError as exc:
        raise InvalidInput(f"invalid message: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    values = {
        "id": message_id,
        "session_id": session_id,
        "role": role,
        "parent_id": parent_id,
        "agent": text_in(message.agent),
        "mode": text_in(message.mode),
        "provider_id": text_in(message.provider_id),
        "model_id": text_in(message.model_id),
        "summary": message.summary,
        "synthetic": message.synthetic,
        "finish": text_in(message.finish),
        "error": encode_json(message.error),
        "cost": _cost(message.cost),
        **token_columns(message.tokens),
        "part_count": 0,
        "token_estimate": 0,
        "metadata": encode_json(message.metadata),
        "created_at": message.time.created,
        "completed_at": message.time.completed,
    }
    return values, message


def _cost(cost: Any) -> float:
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost != cost or cost in (float("inf"), float("-inf")):
        raise InvalidInput(f"cost must be a finite number, got {cost!r}")
    return float(cost)


def append_message(session_id: Any, role: str, fields: dict[str, Any], *, now: int) -> Op:
    session_id = check_id("session", session_id)
    values, message = message_values(session_id, role, fields, now)
    if fields.get("id") is not None:
        taken = yield step(st.MESSAGE_ID, {"b_mid": values["id"]}, fetch="first")
        if taken is not None:
            raise InvalidInput(f"message {values['id']} already exists")
    row = yield step(st.NEXT_SEQ, {"b_sid": session_id, "b_now": now}, fetch="first")
    if row is None:
        raise NotFound("session", session_id)
    values["seq"] = row.last_seq
    yield step(st.INSERT_MESSAGE, values)
    if values["summary"] and values["finish"] is not None:
        yield from refresh_boundary(session_id)
    message.seq = values["seq"]  # the message is this call's own
    return message


def finish_message(
    message_id: Any, *, finish: str, tokens: TokenCounts | dict | None, cost: float, error: Any, now: int
) -> Op:
    message_id = check_id("message", message_id)
    if not isinstance(finish, str) or not finish:
        raise InvalidInput(f"finish must be a non-empty string (e.g. 'stop', 'tool-calls'), got {finish!r}")
    try:
        counts = TokenCounts.model_validate(tokens or {}) if not isinstance(tokens, TokenCounts) else tokens
    except ValidationError as exc:
        raise InvalidInput(f"invalid tokens: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    if error is not None and not isinstance(error, dict):
        error = {"message": str(error)}
    error = error or None  # an empty error object is no error (as filter_compacted reads it)
    params = {
        "b_mid": message_id,
        "b_finish": encode_text(finish),
        "b_cost": _cost(cost),
        "b_error": encode_json(error),
        "b_now": now,
        **{f"b_{k}": v for k, v in token_columns(counts).items()},
    }
    row = yield step(st.FINISH_MESSAGE, params, fetch="first")
    if row is None:
        raise NotFound("message", message_id)
    yield step(st.TOUCH_SESSION, {"b_sid": row.session_id, "b_now": now})
    if row.summary:
        yield from refresh_boundary(row.session_id)
    return message_from_row(row)


# -- parts --------------------------------------------------------------------------------------------------


def append_part(message_id: Any, part: Any, *, now: int) -> Op:
    message_id = check_id("message", message_id)
    part = validate_part(part)
    part_id = check_id("part", part.id, new=True) if part.id is not None else new_id("part", now)
    data = part_data(part)
    tool_values = tool_row(part, now) if part.type == "tool" else None  # validates before estimating
    tokens = part_tokens(part)
    if part.id is not None:
        taken = yield step(st.PART_ID, {"b_pid": part_id}, fetch="first")
        if taken is not None:
            raise InvalidInput(f"part {part_id} already exists")
    row = yield step(st.NEXT_POSITION, {"b_mid": message_id, "b_tokens": tokens}, fetch="first")
    if row is None:
        raise NotFound("message", message_id)
    session_id = row.session_id
    yield step(
        st.INSERT_PART,
        dict(
            id=part_id,
            session_id=session_id,
            message_id=message_id,
            position=row.part_count,
            type=part.type,
            data=data,
            tokens=tokens,
            created_at=now,
            updated_at=now,
        ),
    )
    if tool_values is not None:
        output = tool_values.pop("output")
        yield step(st.INSERT_TOOL_STATE, dict(tool_values, part_id=part_id, session_id=session_id))
        if output is not None:
            yield step(st.INSERT_TOOL_OUTPUT, dict(part_id=part_id, output=output))
    if part.type == "compaction":
        yield from refresh_boundary(session_id)
    place = {"id": part_id, "session_id": session_id, "message_id": message_id}
    if tool_values is not None:
        place["state"] = with_tool_times(part.state, tool_values)
    return replaced(part, place)  # a copy: the caller's own model is never changed


def with_tool_times(state: ToolState, values: dict[str, Any]) -> ToolState:
    """``state`` as stored: the start and end times ``tool_row`` filled in (a copy if they changed)."""
    if (state.time.start, state.time.end) == (values["started_at"], values["ended_at"]):
        return state
    return replaced(state, {"time": replaced(state.time, {"start": values["started_at"], "end": values["ended_at"]})})


def tool_row(part: ToolPart, now: int) -> dict[str, Any]:
    state = part.state
    if state.status != "completed" and state.output is not None:
        raise InvalidInput(f"a {state.status} tool part has no output yet: only a completed tool has one")
    if state.status == "completed" and state.output is None:
        raise InvalidInput("a completed tool part needs an output (use '' for none)")
    if state.status == "error" and not state.error:
        raise InvalidInput("an errored tool part needs an error message")
    started = state.time.start
    if started is None and state.status != "pending":
        started = now
    ended = state.time.end
    if ended is None and state.status in ("completed", "error"):
        ended = now
    return dict(
        call_id=encode_text(part.call_id),
        tool=encode_text(part.tool),
        status=state.status,
        input=encode_json(state.input),
        output_tokens=estimate_tokens(state.output),
        title=text_in(state.title),
        metadata=encode_json(state.metadata),
        error=text_in(state.error),
        started_at=started,
        ended_at=ended,
        compacted_at=state.time.compacted,
        output=text_in(state.output),
    )


class ToolRow(NamedTuple):
    """A tool part as ``TOOL_CURRENT`` reads it (a row of that statement works wherever this does)."""

    status: str
    call_id: str | None
    tool: str | None
    input: Any
    title: str | None
    tool_meta: Any
    error: str | None
    started_at: int | None
    ended_at: int | None
    compacted_at: int | None
    tokens: int
    message_id: str
    session_id: str


class ToolChange(NamedTuple):
    """A tool part's change, planned before anything is written (``plan_tool_change``)."""

    part_id: str
    state: dict[str, Any]  # ``UPDATE_TOOL_STATE``'s parameters
    output: str | None  # the stored output (a ``tool_outputs`` row), if the change gives one
    delta: int  # what the part's tokens (and its message's estimate) gain
    after: ToolRow  # the part as the change leaves it


def plan_tool_change(part_id: str, current: Any, changes: Sequence[Mapping[str, Any]], *, now: int) -> ToolChange:
    """The tool part ``current`` (``ToolRow`` fields) through ``changes`` in order (each the keyword arguments
    of ``update_tool``: ``status`` and any of ``output``, ``error``, ``title``, ``metadata``, ``input``), as
    one change to write; ``InvalidTransition`` / ``InvalidInput`` before anything is written."""
    row = ToolRow._make(current[: len(ToolRow._fields)])  # a TOOLS_OF_MESSAGE row has its part id after these
    state: dict[str, Any] = {}
    output = stored = None
    for change in changes:
        status, output, error = change["status"], change.get("output"), change.get("error")
        check_transition(part_id, row.status, status, output=output, error=error)
        started = row.started_at
        if started is None and status in ("running", "completed", "error"):
            started = now
        ended = now if status in ("completed", "error") else row.ended_at
        new_input = change["input"] if change.get("input") is not None else row.input
        new_metadata = change["metadata"] if change.get("metadata") is not None else row.tool_meta
        title = change.get("title")
        new_title = title if title is not None else text_out(row.title)
        new_error = error if error is not None else text_out(row.error)
        state = {
            "b_pid": part_id,
            "b_status": status,
            "b_input": encode_json(new_input),
            "b_output_tokens": estimate_tokens(output),
            "b_title": text_in(new_title),
            "b_metadata": encode_json(new_metadata),
            "b_error": text_in(new_error),
            "b_started_at": started,
            "b_ended_at": ended,
        }
        if output is not None:
            stored = text_in(output)
        tokens = estimate_json_tokens(new_input) + estimate_tokens(output) + estimate_tokens(new_error)
        row = row._replace(
            status=status, input=new_input, title=state["b_title"], tool_meta=new_metadata, error=state["b_error"],
            started_at=started, ended_at=ended, tokens=tokens,
        )
    return ToolChange(part_id, state, stored, row.tokens - current.tokens, row)


def write_tool_changes(changes: Sequence[ToolChange], *, now: int) -> Op:
    """Write planned changes, each statement once for all of them (an executemany), the message estimates
    summed by message."""
    yield step(st.UPDATE_TOOL_STATE, _each([change.state for change in changes]))
    outputs = [{"part_id": change.part_id, "output": change.output} for change in changes if change.output is not None]
    if outputs:
        yield step(st.INSERT_TOOL_OUTPUT, _each(outputs))
    yield step(st.UPDATE_PART_TOKENS, _each([{"b_pid": c.part_id, "b_tokens": c.after.tokens, "b_now": now} for c in changes]))
    deltas: dict[str, int] = {}
    for change in changes:
        deltas[change.after.message_id] = deltas.get(change.after.message_id, 0) + change.delta
    if moved := [{"b_mid": message_id, "b_delta": delta} for message_id, delta in deltas.items() if delta]:
        yield step(st.ADD_MESSAGE_TOKENS, _each(moved))


def _each(params: list[dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    """A statement's parameters: one set as it is (an execute), several as a list (an executemany)."""
    return params[0] if len(params) == 1 else params


def update_tool(
    part_id: Any,
    *,
    status: str,
    output: str | None = None,
    error: str | None = None,
    title: str | None = None,
    metadata: dict | None = None,
    input: dict | None = None,
    now: int,
) -> Op:
    part_id = check_id("part", part_id)
    for name, value in (("output", output), ("error", error), ("title", title)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"tool {name} must be a string, got {type(value).__name__}")
    for name, value in (("metadata", metadata), ("input", input)):
        if value is not None and not isinstance(value, dict):
            raise InvalidInput(f"tool {name} must be a JSON object, got {type(value).__name__}")
    current = yield step(st.TOOL_CURRENT, {"b_pid": part_id}, fetch="first")
    if current is None:
        raise NotFound("tool part", part_id)
    fields = dict(status=status, output=output, error=error, title=title, metadata=metadata, input=input)
    change = plan_tool_change(part_id, current, [fields], now=now)
    yield from write_tool_changes([change], now=now)
    after = change.after
    state = construct(
        ToolState,
        {
            "status": status,
            "input": after.input if after.input is not None else {},
            "output": output,
            "error": text_out(after.error),
            "title": text_out(after.title),
            "metadata": after.tool_meta,
            "time": construct(ToolTime, {"start": after.started_at, "end": after.ended_at, "compacted": after.compacted_at}),
        },
    )
    return construct(
        ToolPart,
        {
            "id": part_id,
            "session_id": current.session_id,
            "message_id": current.message_id,
            "type": "tool",
            "call_id": text_out(current.call_id),
            "tool": text_out(current.tool),
            "state": state,
        },
    )
