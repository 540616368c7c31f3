"""The store's write and read operations, written once for the sync and the async store.

Each operation is a generator over ``Step``s (see ``statements``): the store runs it inside one transaction,
so validation errors raised part way leave nothing written. Validation that needs no database happens
before the first step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from pydantic import ValidationError
from sqlalchemy import bindparam, delete, insert, select, update

from ..codec import encode_json, encode_text
from ..errors import InvalidInput, NotFound
from ..ids import new_id
from ..models import CompactionConfig, Message, MessageWithParts, Part, PruneResult, Session, TokenCounts, ToolPart
from ..prune import PruneCandidate, plan_prune
from ..toolstate import check_transition
from ..tokens import estimate_json_tokens, estimate_tokens
from .convert import (
    message_from_row,
    part_data,
    part_from_row,
    part_tokens,
    session_from_row,
    text_in,
    token_columns,
    validate_part,
)
from .statements import MESSAGE_COLUMNS, M, O, Op, P, S, T, refresh_boundary, select_messages, select_parts, step

__all__ = [
    "MESSAGE_FIELDS",
    "append_message",
    "append_part",
    "check_id",
    "create_session",
    "delete_session",
    "finish_message",
    "get_session",
    "list_sessions",
    "load_message",
    "load_messages",
    "prune_session",
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
        found = yield step(select(S.c.id).where(S.c.id == parent_id), fetch="first")
        if found is None:
            raise NotFound("session", parent_id)
    if id is not None:
        taken = yield step(select(S.c.id).where(S.c.id == session_id), fetch="first")
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
    yield step(insert(S), values)
    return Session(id=session_id, parent_id=parent_id, title=title, directory=directory, created_at=now, updated_at=now)


def get_session(session_id: Any) -> Op:
    session_id = check_id("session", session_id)
    row = yield step(select(S).where(S.c.id == session_id), fetch="first")
    if row is None:
        raise NotFound("session", session_id)
    return session_from_row(row)


def list_sessions(*, parent_id: str | None, limit: int | None, include_archived: bool) -> Op:
    query = select(S)
    if parent_id is not None:
        query = query.where(S.c.parent_id == parent_id)
    if not include_archived:
        query = query.where(S.c.archived_at.is_(None))
    query = query.order_by(S.c.updated_at.desc(), S.c.id.desc())
    if limit is not None:
        if not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"limit must be a non-negative integer, got {limit!r}")
        query = query.limit(limit)
    rows = yield step(query, fetch="all")
    return [session_from_row(r) for r in rows]


def delete_session(session_id: Any) -> Op:
    """Delete a session with its messages, parts, tool states, compactions and child sessions."""
    session_id = check_id("session", session_id)
    count = yield step(delete(S).where(S.c.id == session_id), fetch="rowcount")
    if not count:
        raise NotFound("session", session_id)
    return None


# -- messages -----------------------------------------------------------------------------------------------


def _message_values(session_id: str, role: str, fields: dict[str, Any], now: int) -> tuple[dict[str, Any], Message]:
    unknown = set(fields) - MESSAGE_FIELDS
    if unknown:
        raise InvalidInput(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if role not in ("user", "assistant"):
        raise InvalidInput(f"role must be 'user' or 'assistant', got {role!r}")
    message_id = check_id("message", fields["id"], new=True) if fields.get("id") is not None else new_id("message", now)
    parent_id = fields.get("parent_id")
    if parent_id is not None:
        parent_id = check_id("message", parent_id, new=True)
    fields = dict(fields, finish=fields.get("finish") or None, error=fields.get("error") or None)
    try:
        tokens = TokenCounts.model_validate(fields.get("tokens") or {})
        probe = Message(
            id=message_id,
            session_id=session_id,
            role=role,  # type: ignore[arg-type]
            parent_id=parent_id,
            summary=fields.get("summary", False),
            synthetic=fields.get("synthetic", False),
            finish=fields.get("finish"),
            error=fields.get("error"),
            tokens=tokens,
            cost=fields.get("cost", 0.0),
            agent=fields.get("agent"),
            mode=fields.get("mode"),
            model_id=fields.get("model_id"),
            provider_id=fields.get("provider_id"),
            metadata=fields.get("metadata"),
            time={"created": fields.get("created_at") or now, "completed": fields.get("completed_at")},
        )
    except ValidationError as exc:
        raise InvalidInput(f"invalid message: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    values = dict(
        id=probe.id,
        session_id=session_id,
        role=role,
        parent_id=parent_id,
        agent=text_in(probe.agent),
        mode=text_in(probe.mode),
        provider_id=text_in(probe.provider_id),
        model_id=text_in(probe.model_id),
        summary=probe.summary,
        synthetic=probe.synthetic,
        finish=text_in(probe.finish),
        error=encode_json(probe.error),
        cost=_cost(probe.cost),
        **token_columns(tokens),
        part_count=0,
        token_estimate=0,
        metadata=encode_json(probe.metadata),
        created_at=probe.time.created,
        completed_at=probe.time.completed,
    )
    return values, probe


def _cost(cost: Any) -> float:
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost != cost or cost in (float("inf"), float("-inf")):
        raise InvalidInput(f"cost must be a finite number, got {cost!r}")
    return float(cost)


def append_message(session_id: Any, role: str, fields: dict[str, Any], *, now: int) -> Op:
    session_id = check_id("session", session_id)
    values, message = _message_values(session_id, role, fields, now)
    if fields.get("id") is not None:
        taken = yield step(select(M.c.id).where(M.c.id == values["id"]), fetch="first")
        if taken is not None:
            raise InvalidInput(f"message {values['id']} already exists")
    row = yield step(
        update(S).where(S.c.id == session_id).values(last_seq=S.c.last_seq + 1, updated_at=now).returning(S.c.last_seq),
        fetch="first",
    )
    if row is None:
        raise NotFound("session", session_id)
    values["seq"] = row.last_seq
    yield step(insert(M), values)
    if values["summary"] and values["finish"] is not None:
        yield from refresh_boundary(session_id)
    return message.model_copy(update={"seq": values["seq"]})


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
    values = dict(
        finish=encode_text(finish),
        cost=_cost(cost),
        error=encode_json(error),
        completed_at=now,
        **token_columns(counts),
    )
    row = yield step(
        update(M).where(M.c.id == message_id).values(**values).returning(*MESSAGE_COLUMNS), fetch="first"
    )
    if row is None:
        raise NotFound("message", message_id)
    yield step(update(S).where(S.c.id == row.session_id).values(updated_at=now))
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
        taken = yield step(select(P.c.id).where(P.c.id == part_id), fetch="first")
        if taken is not None:
            raise InvalidInput(f"part {part_id} already exists")
    row = yield step(
        update(M)
        .where(M.c.id == message_id)
        .values(part_count=M.c.part_count + 1, token_estimate=M.c.token_estimate + tokens)
        .returning(M.c.part_count, M.c.session_id),
        fetch="first",
    )
    if row is None:
        raise NotFound("message", message_id)
    session_id = row.session_id
    yield step(
        insert(P),
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
        yield step(insert(T), dict(tool_values, part_id=part_id, session_id=session_id))
        if output is not None:
            yield step(insert(O), dict(part_id=part_id, output=output))
    if part.type == "compaction":
        yield from refresh_boundary(session_id)
    return part.model_copy(update={"id": part_id, "session_id": session_id, "message_id": message_id})


def _tool_values(part: ToolPart, now: int) -> dict[str, Any]:
    state = part.state
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
    current = yield step(
        select(T.c.status, T.c.input, T.c.started_at, P.c.tokens, P.c.message_id)
        .select_from(T.join(P, P.c.id == T.c.part_id))
        .where(T.c.part_id == part_id)
        .with_for_update(),
        fetch="first",
    )
    if current is None:
        raise NotFound("tool part", part_id)
    check_transition(part_id, current.status, status, output=output, error=error)
    values: dict[str, Any] = {"status": status}
    if status == "running" and current.started_at is None:
        values["started_at"] = now
    if status in ("completed", "error"):
        values["ended_at"] = now
        if current.started_at is None:
            values["started_at"] = now
    for name in ("error", "title", "metadata", "input"):
        if encoded[name] is not None:
            values[name] = encoded[name]
    if output is not None:
        values["output_tokens"] = estimate_tokens(output)
    yield step(update(T).where(T.c.part_id == part_id).values(**values))
    if output is not None:
        yield step(insert(O), dict(part_id=part_id, output=encoded["output"]))
    new_input = input if input is not None else current.input
    tokens = estimate_json_tokens(new_input) + estimate_tokens(output) + estimate_tokens(error)
    yield step(update(P).where(P.c.id == part_id).values(tokens=tokens, updated_at=now))
    yield step(
        update(M)
        .where(M.c.id == current.message_id)
        .values(token_estimate=M.c.token_estimate + (tokens - current.tokens))
    )
    row = yield step(select_parts().where(P.c.id == part_id), fetch="first")
    return part_from_row(row)


# -- reads --------------------------------------------------------------------------------------------------


def load_messages(session_id: Any, *, filtered: bool) -> Op:
    """The history of a session, whole or from its last completed boundary on, as ``MessageWithParts``."""
    session_id = check_id("session", session_id)
    session = yield step(select(S.c.boundary_seq).where(S.c.id == session_id), fetch="first")
    if session is None:
        raise NotFound("session", session_id)
    from_seq = session.boundary_seq if filtered and session.boundary_seq else None
    message_rows = yield step(select_messages(session_id, from_seq), fetch="all")
    if not message_rows:
        return []
    parts_query = select_parts("unpruned" if filtered else "all")
    if from_seq is None:
        parts_query = parts_query.where(P.c.session_id == session_id)
    else:
        parts_query = parts_query.join(M, M.c.id == P.c.message_id).where(
            M.c.session_id == session_id, M.c.seq >= from_seq
        )
    part_rows = yield step(parts_query.order_by(P.c.message_id, P.c.position), fetch="all")
    by_message: dict[str, list[Part]] = defaultdict(list)
    for row in part_rows:
        by_message[row.message_id].append(part_from_row(row))
    return [
        MessageWithParts.model_construct(info=message_from_row(row), parts=by_message.get(row.id, []))
        for row in message_rows
    ]


def load_message(message_id: Any) -> Op:
    """One message with its parts."""
    message_id = check_id("message", message_id)
    row = yield step(select(*MESSAGE_COLUMNS).where(M.c.id == message_id), fetch="first")
    if row is None:
        raise NotFound("message", message_id)
    part_rows = yield step(select_parts().where(P.c.message_id == message_id).order_by(P.c.position), fetch="all")
    return MessageWithParts.model_construct(info=message_from_row(row), parts=[part_from_row(r) for r in part_rows])


# -- prune --------------------------------------------------------------------------------------------------

_MARK_CHUNK = 500


def prune_session(session_id: Any, config: CompactionConfig, *, now: int) -> Op:
    """Seed 004's prune over stored token estimates: reads no output text, scans back to the last boundary
    only (prune stops at the summary there anyway), marks the chosen parts in this one transaction."""
    session_id = check_id("session", session_id)
    if not isinstance(config, CompactionConfig):
        raise InvalidInput(f"config must be a CompactionConfig, got {type(config).__name__}")
    session = yield step(select(S.c.boundary_seq).where(S.c.id == session_id).with_for_update(), fetch="first")
    if session is None:
        raise NotFound("session", session_id)
    if not config.prune:
        return PruneResult()
    tool_parts = P.alias("tp")
    rows = yield step(
        select(M.c.seq, M.c.role, M.c.summary, tool_parts.c.id, T.c.tool, T.c.status, T.c.output_tokens, T.c.compacted_at)
        .select_from(
            M.outerjoin(tool_parts, (tool_parts.c.message_id == M.c.id) & (tool_parts.c.type == "tool")).outerjoin(
                T, T.c.part_id == tool_parts.c.id
            )
        )
        .where(M.c.session_id == session_id, M.c.seq >= session.boundary_seq)
        .order_by(M.c.seq, tool_parts.c.position),
        fetch="all",
    )
    plan = plan_prune(
        [
            PruneCandidate(
                message_seq=r.seq,
                role=r.role,
                summary=bool(r.summary),
                part_id=r.id,
                tool=r.tool,
                status=r.status,
                output_tokens=r.output_tokens or 0,
                compacted=r.compacted_at is not None,
            )
            for r in rows
        ],
        config,
    )
    if not plan.part_ids:
        return PruneResult(pruned=0, total=plan.total, parts=[])
    ids = list(plan.part_ids)
    for start in range(0, len(ids), _MARK_CHUNK):
        chunk = ids[start : start + _MARK_CHUNK]
        yield step(
            update(T).where(T.c.part_id.in_(bindparam("ids", expanding=True))).values(compacted_at=now),
            {"ids": chunk},
        )
    marked = []
    for start in range(0, len(ids), _MARK_CHUNK):
        chunk = ids[start : start + _MARK_CHUNK]
        found = yield step(
            select_parts(outputs="none").where(P.c.id.in_(bindparam("ids", expanding=True))),
            {"ids": chunk},
            fetch="all",
        )
        marked += [part_from_row(r) for r in found]
    order = {part_id: i for i, part_id in enumerate(ids)}
    marked.sort(key=lambda part: order[part.id])
    return PruneResult(pruned=plan.pruned, total=plan.total, parts=marked)
