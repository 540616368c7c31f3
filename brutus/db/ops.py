"""The store's operations on sessions, messages, parts and tool states, written once for the sync and the async
store (reading a history and pruning it: ``history_ops``).

Each operation is a generator over ``Step``s (see ``statements``): the store runs it inside one transaction,
so validation errors raised part way leave nothing written. Validation that needs no database happens
before the first step.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ..codec import encode_json, encode_text
from ..errors import InvalidInput, NotFound
from ..ids import new_id
from ..models import Message, MessageWithParts, Session, TokenCounts, ToolPart, ToolState, ToolTime
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
    "append_message",
    "append_messages",
    "append_part",
    "check_id",
    "create_session",
    "delete_session",
    "finish_message",
    "get_session",
    "list_sessions",
    "update_tool",
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


def list_sessions(*, parent_id: str | None, limit: int | None, include_archived: bool, after: Any = None) -> Op:
    """Sessions, most recently updated first, ties by id (descending); with ``after``, a keyset page: the
    sessions that come after that position in this order. ``after`` is a session id (its position now:
    ``NotFound`` when there is no such session) or a ``Session`` from an earlier page (the position it had when
    read, whatever happened to it since)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput(f"limit must be a non-negative integer, got {limit!r}")
    params: dict[str, Any] = {}
    if parent_id is not None:
        params["b_parent"] = parent_id
    if limit is not None:
        params["b_limit"] = limit
    by = None
    if isinstance(after, Session):  # the position as read
        by, params["b_updated"], params["b_after"] = "position", after.updated_at, check_id("session", after.id)
    elif after is not None:  # the session's position now, looked up by the page's own statement
        if not isinstance(after, str):
            raise InvalidInput(f"after must be a session id or a Session, got {type(after).__name__}")
        by, params["b_after"] = "id", check_id("session", after)
    query = st.session_list(parent=parent_id is not None, include_archived=include_archived, after=by, limit=limit is not None)
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


def _message_values(session_id: str, role: str, fields: dict[str, Any], now: int) -> tuple[dict[str, Any], Message]:
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
    values, message = _message_values(session_id, role, fields, now)
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
    tool_values = _tool_values(part, now) if part.type == "tool" else None  # validates before estimating
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
        place["state"] = _with_tool_times(part.state, tool_values)
    return replaced(part, place)  # a copy: the caller's own model is never changed


# -- whole messages ---------------------------------------------------------------------------------------


def append_messages(session_id: Any, items: Any, *, now: int, id_arrays: bool = False) -> Op:
    """Append whole messages, each with its parts, in one transaction and a handful of statements.

    Every message and part is checked as ``append_message`` / ``append_part`` / ``finish_message`` check
    them, all before the first write; the rows then go in with one ``executemany`` per table. Ids given are
    checked free a chunk at a time, the last chunk by the statement that takes the seqs; with ``id_arrays``
    (PostgreSQL) all of them at once, by that statement, in one array parameter per kind.
    """
    session_id = check_id("session", session_id)
    if not isinstance(items, (list, tuple)):
        raise InvalidInput(
            f"messages must be a list of MessageWithParts (or dicts of that shape), got {type(items).__name__}"
        )
    messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    tool_states: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    history: list[tuple[Message, list[Any]]] = []
    given: dict[str, list[str]] = {"message": [], "part": []}
    refresh = False
    for index, item in enumerate(items):
        role, fields, item_parts = _unpack_item(index, item)
        values, message = _message_values(session_id, role, fields, now)
        message_id = values["id"]
        if fields.get("id") is not None:
            given["message"].append(message_id)
        refresh = refresh or (values["summary"] and values["finish"] is not None)
        own = []
        for position, part in enumerate(item_parts, start=1):
            part = validate_part(part)
            if part.id is None:
                part_id = new_id("part", now)
            else:
                part_id = check_id("part", part.id, new=True)
                given["part"].append(part_id)
            place = {"id": part_id, "session_id": session_id, "message_id": message_id}
            if part.type == "tool":
                tool_values = _tool_values(part, now)
                output = tool_values.pop("output")
                tool_states.append(dict(tool_values, part_id=part_id, session_id=session_id))
                if output is not None:
                    outputs.append({"part_id": part_id, "output": output})
                place["state"] = _with_tool_times(part.state, tool_values)
            elif part.type == "compaction":
                refresh = True
            tokens = part_tokens(part)
            values["token_estimate"] += tokens
            parts.append(
                {
                    "id": part_id,
                    "session_id": session_id,
                    "message_id": message_id,
                    "position": position,
                    "type": part.type,
                    "data": part_data(part),
                    "tokens": tokens,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            own.append(replaced(part, place))  # a copy: the caller's own model is never changed
        values["part_count"] = len(own)
        messages.append(values)
        history.append((message, own))
    if not messages:
        found = yield step(st.SESSION_ID, {"b_sid": session_id}, fetch="first")
        if found is None:
            raise NotFound("session", session_id)
        return []
    for kind, ids in given.items():
        if len(set(ids)) != len(ids):
            raise InvalidInput(f"the same {kind} id is given twice")
    if id_arrays and (given["message"] or given["part"]):
        row = yield from _take_seqs_ids_free(session_id, given, len(messages), now)
    else:
        row = yield from _take_seqs(session_id, given, len(messages), now)
    first_seq = row.last_seq - len(messages) + 1
    for seq, values in enumerate(messages, start=first_seq):
        values["seq"] = seq
    inserts = (
        (st.INSERT_MESSAGE, messages),
        (st.INSERT_PART, parts),
        (st.INSERT_TOOL_STATE, tool_states),
        (st.INSERT_TOOL_OUTPUT, outputs),
    )
    for statement, rows in inserts:
        if rows:  # an empty list would run the statement once, with no parameters
            yield step(statement, rows)
    if refresh:
        yield from refresh_boundary(session_id)
    for (message, _), values in zip(history, messages, strict=True):
        message.seq = values["seq"]  # the message is this call's own
    return [construct(MessageWithParts, {"info": message, "parts": own}) for message, own in history]


def _take_seqs(session_id: str, given: dict[str, list[str]], count: int, now: int) -> Op:
    """The session row after taking ``count`` seqs, once the ids given are found free, checked a chunk at a
    time; ``InvalidInput`` naming an id that exists, ``NotFound`` for a missing session."""
    chunks = [
        (kind, ids[start : start + st.TAKEN_IDS_CHUNK])
        for kind, ids in given.items()
        for start in range(0, len(ids), st.TAKEN_IDS_CHUNK)
    ]
    for kind, chunk in chunks[:-1]:
        yield from _refuse_taken(kind, chunk)
    kind, size, params = None, 0, {}
    if chunks:  # the last chunk is checked by the UPDATE that takes the seqs: no row back if one is taken
        kind, (size, params) = chunks[-1][0], _id_params(chunks[-1][1])
    params.update(b_sid=session_id, b_count=count, b_now=now)
    row = yield step(st.next_seqs(kind, size), params, fetch="first")
    if row is None:
        if chunks:
            yield from _refuse_taken(*chunks[-1])
        raise NotFound("session", session_id)
    return row


def _take_seqs_ids_free(session_id: str, given: dict[str, list[str]], count: int, now: int) -> Op:
    """``_take_seqs`` with every id given in one array parameter per kind: one statement takes the seqs if
    none of them exists; only when it takes none do the arrays say which id exists."""
    ids = {"b_message_ids": given["message"], "b_part_ids": given["part"]}
    row = yield step(st.NEXT_SEQS_IDS_FREE, {**ids, "b_sid": session_id, "b_count": count, "b_now": now}, fetch="first")
    if row is not None:
        return row
    for kind, kind_ids in given.items():
        if kind_ids:
            rows = yield step(st.TAKEN_IDS_ANY[kind], {f"b_{kind}_ids": kind_ids}, fetch="all")
            if rows:
                taken = {r.id for r in rows}
                raise InvalidInput(f"{kind} {next(i for i in kind_ids if i in taken)} already exists")
    raise NotFound("session", session_id)


def _id_params(ids: list[str]) -> tuple[int, dict[str, str]]:
    """The parameters ``b_id0`` … of ``ids``, padded to a power of two (with the first id), and their count."""
    size = 1 << (len(ids) - 1).bit_length()
    return size, {f"b_id{i}": v for i, v in enumerate(ids + ids[:1] * (size - len(ids)))}


def _refuse_taken(kind: str, ids: list[str]) -> Op:
    """``InvalidInput`` naming the first of ``ids`` (a chunk) that exists already."""
    size, params = _id_params(ids)
    rows = yield step(st.taken_ids(kind, size), params, fetch="all")  # type: ignore[arg-type]
    if rows:
        taken = {row.id for row in rows}
        raise InvalidInput(f"{kind} {next(i for i in ids if i in taken)} already exists")


def _unpack_item(index: int, item: Any) -> tuple[str, dict[str, Any], list[Any]]:
    """The role, the ``append_message`` fields and the parts of one ``append_messages`` item."""
    if isinstance(item, MessageWithParts):
        info = item.info
        fields = {name: getattr(info, name) for name in _INFO_FIELDS}
        fields["created_at"], fields["completed_at"] = info.time.created, info.time.completed
        return info.role, fields, list(item.parts)
    if not isinstance(item, dict) or not isinstance(item.get("info"), (dict, Message)):
        raise InvalidInput(f"message {index}: expected a MessageWithParts or a dict with 'info' and 'parts'")
    unknown = set(item) - {"info", "parts"}
    if unknown:
        raise InvalidInput(f"message {index}: unknown key(s): {', '.join(sorted(unknown))}")
    item_parts = item.get("parts") or []
    if not isinstance(item_parts, (list, tuple)):
        raise InvalidInput(f"message {index}: parts must be a list, got {type(item_parts).__name__}")
    info = item["info"]
    if isinstance(info, Message):
        return _unpack_item(index, MessageWithParts.model_construct(info=info, parts=list(item_parts)))
    fields = {k: v for k, v in info.items() if k not in ("role", "session_id", "seq", "time")}
    time = info.get("time")
    if time is not None:
        if not isinstance(time, dict) or set(time) - {"created", "completed"}:
            raise InvalidInput(f"message {index}: time must be {{'created': ms, 'completed': ms}}")
        fields["created_at"], fields["completed_at"] = time.get("created"), time.get("completed")
    return info.get("role"), fields, list(item_parts)


_INFO_FIELDS = tuple(sorted(MESSAGE_FIELDS - {"created_at", "completed_at"}))


def _with_tool_times(state: ToolState, values: dict[str, Any]) -> ToolState:
    """``state`` as stored: the start and end times ``_tool_values`` filled in (a copy if they changed)."""
    if (state.time.start, state.time.end) == (values["started_at"], values["ended_at"]):
        return state
    return replaced(state, {"time": replaced(state.time, {"start": values["started_at"], "end": values["ended_at"]})})


def _tool_values(part: ToolPart, now: int) -> dict[str, Any]:
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


def update_tool(
    part_id: Any,
    *,
    status: str,
    output: str | None,
    error: str | None,
    title: str | None,
    metadata: dict | None,
    input: dict | None,
    now: int,
) -> Op:
    part_id = check_id("part", part_id)
    for name, value in (("output", output), ("error", error), ("title", title)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"tool {name} must be a string, got {type(value).__name__}")
    for name, value in (("metadata", metadata), ("input", input)):
        if value is not None and not isinstance(value, dict):
            raise InvalidInput(f"tool {name} must be a JSON object, got {type(value).__name__}")
    encoded = dict(
        output=text_in(output),
        error=text_in(error),
        title=text_in(title),
        metadata=encode_json(metadata),
        input=encode_json(input),
    )
    current = yield step(st.TOOL_CURRENT, {"b_pid": part_id}, fetch="first")
    if current is None:
        raise NotFound("tool part", part_id)
    check_transition(part_id, current.status, status, output=output, error=error)
    started = current.started_at
    if started is None and status in ("running", "completed", "error"):
        started = now
    ended = now if status in ("completed", "error") else current.ended_at
    new_input = input if input is not None else current.input
    new_metadata = metadata if metadata is not None else current.tool_meta
    new_title = title if title is not None else text_out(current.title)
    new_error = error if error is not None else text_out(current.error)
    yield step(
        st.UPDATE_TOOL_STATE,
        {
            "b_pid": part_id,
            "b_status": status,
            "b_input": encoded["input"] if input is not None else encode_json(current.input),
            "b_output_tokens": estimate_tokens(output),
            "b_title": text_in(new_title),
            "b_metadata": encoded["metadata"] if metadata is not None else encode_json(current.tool_meta),
            "b_error": text_in(new_error),
            "b_started_at": started,
            "b_ended_at": ended,
        },
    )
    if output is not None:
        yield step(st.INSERT_TOOL_OUTPUT, dict(part_id=part_id, output=encoded["output"]))
    tokens = estimate_json_tokens(new_input) + estimate_tokens(output) + estimate_tokens(new_error)
    yield step(st.UPDATE_PART_TOKENS, {"b_pid": part_id, "b_tokens": tokens, "b_now": now})
    if tokens != current.tokens:
        yield step(st.ADD_MESSAGE_TOKENS, {"b_mid": current.message_id, "b_delta": tokens - current.tokens})
    state = construct(
        ToolState,
        {
            "status": status,
            "input": new_input if new_input is not None else {},
            "output": output,
            "error": new_error,
            "title": new_title,
            "metadata": new_metadata,
            "time": construct(ToolTime, {"start": started, "end": ended, "compacted": current.compacted_at}),
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
