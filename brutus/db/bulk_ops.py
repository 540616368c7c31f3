"""``append_messages``: whole messages with their parts in one transaction and a handful of statements. Each
message and part is checked as the single calls of ``ops`` check them (their helpers build the rows), all
before the first write."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..errors import InvalidInput, NotFound
from ..ids import new_id
from ..models import Message, MessageWithParts
from . import statements as st
from .convert import construct, part_data, part_tokens, replaced, validate_part
from .ops import MESSAGE_FIELDS, check_id, message_values, tool_row, with_tool_times
from .pg_bulk import appended_in_one, fits_one_statement
from .statements import Op, refresh_boundary, step

__all__ = ["Planned", "append_messages", "append_planned", "plan_append"]

Rows = list[tuple[Any, list[dict[str, Any]]]] | None  # an insert statement (``statements.INSERT_*``) and its rows


@dataclass
class Planned:
    """What ``append_messages`` writes, checked: each table's rows, the messages to hand back, the ids given,
    and whether the session's boundary must be read again (a completed summary or a compaction part)."""

    session_id: str
    messages: list[dict[str, Any]]
    parts: list[dict[str, Any]]
    tool_states: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    history: list[tuple[Message, list[Any]]]
    given: dict[str, list[str]]
    refresh: bool
    now: int

    @cached_property
    def one_statement(self) -> bool:
        """PostgreSQL: whether it is written by one statement (``pg_bulk.appended_in_one``): messages, none
        asking for the boundary again, every table's rows in one chunk."""
        tables = (self.messages, self.parts, self.tool_states, self.outputs)
        return bool(self.messages) and not self.refresh and all(fits_one_statement(rows) for rows in tables)


def append_messages(session_id: Any, items: Any, *, now: int, id_arrays: bool = False) -> Op:
    """Append whole messages, each with its parts, in one transaction and a handful of statements.

    Every message and part is checked as ``append_message`` / ``append_part`` / ``finish_message`` check
    them, all before the first write; the rows then go in with one ``executemany`` per table. Ids given are
    checked free a chunk at a time, the last chunk by the statement that takes the seqs; with ``id_arrays``
    (PostgreSQL) all of them at once, by that statement, in one array parameter per kind, when that saves a
    statement (``_arrays_save``), and, when ``Planned.one_statement``, the rows go in by that statement too.
    """
    return (yield from append_planned(plan_append(session_id, items, now=now), id_arrays=id_arrays))


def plan_append(session_id: Any, items: Any, *, now: int) -> Planned:
    """``append_messages``' checks, all of them (``InvalidInput``), and the rows they make; nothing read."""
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
        values, message = message_values(session_id, role, fields, now)
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
                tool_values = tool_row(part, now)
                output = tool_values.pop("output")
                tool_states.append(dict(tool_values, part_id=part_id, session_id=session_id))
                if output is not None:
                    outputs.append({"part_id": part_id, "output": output})
                place["state"] = with_tool_times(part.state, tool_values)
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
    for kind, ids in given.items():
        if len(set(ids)) != len(ids):
            raise InvalidInput(f"the same {kind} id is given twice")
    return Planned(session_id, messages, parts, tool_states, outputs, history, given, refresh, now)


def append_planned(plan: Planned, *, id_arrays: bool = False) -> Op:
    """Write what ``plan_append`` checked (``append_messages``); with ``id_arrays`` (PostgreSQL) and a plan
    written in one statement, one statement."""
    session_id, messages, given = plan.session_id, plan.messages, plan.given
    if not messages:
        found = yield step(st.SESSION_ID, {"b_sid": session_id}, fetch="first")
        if found is None:
            raise NotFound("session", session_id)
        return []
    inserts = (
        (st.INSERT_MESSAGE, messages),
        (st.INSERT_PART, plan.parts),
        (st.INSERT_TOOL_STATE, plan.tool_states),
        (st.INSERT_TOOL_OUTPUT, plan.outputs),
    )
    rows = None
    if id_arrays and plan.one_statement:
        for seq, values in enumerate(messages, start=1):
            values["seq"] = seq  # from the first seq taken: the statement adds the seq before it
        rows = [(statement, table_rows) for statement, table_rows in inserts if table_rows]
    if id_arrays and _arrays_save(given):
        row = yield from _take_seqs_ids_free(session_id, given, len(messages), plan.now, rows)
    else:
        row = yield from _take_seqs(session_id, given, len(messages), plan.now, rows)
    first_seq = row.last_seq - len(messages) + 1
    for seq, values in enumerate(messages, start=first_seq):
        values["seq"] = seq
    if rows is None:
        for statement, table_rows in inserts:
            if table_rows:  # an empty list would run the statement once, with no parameters
                yield step(statement, table_rows)
    if plan.refresh:
        yield from refresh_boundary(session_id)
    for (message, _), values in zip(plan.history, messages, strict=True):
        message.seq = values["seq"]  # the message is this call's own
    return [construct(MessageWithParts, {"info": message, "parts": own}) for message, own in plan.history]


def _arrays_save(given: dict[str, list[str]]) -> bool:
    """Whether the ids given take fewer statements as arrays than in chunks: both kinds, or more than a chunk.
    A chunk of one kind (a finished turn's own message id) goes as scalar parameters: under row-level
    security (0011) the array statement's generic plan, not knowing the array's length, costs more than a
    plan for the values given, so PostgreSQL plans it afresh each call (0.1-0.2 ms); the chunk's keeps its plan.
    """
    return bool(given["message"] and given["part"]) or any(len(ids) > st.TAKEN_IDS_CHUNK for ids in given.values())


def _take_seqs(session_id: str, given: dict[str, list[str]], count: int, now: int, rows: Rows = None) -> Op:
    """The session row after taking ``count`` seqs, once the ids given are found free, checked a chunk at a
    time; ``InvalidInput`` naming an id that exists, ``NotFound`` for a missing session. ``rows``: the inserts'
    rows, written by the same statement (``_taking``)."""
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
    row = yield _taking(st.next_seqs(kind, size), params, rows)
    if row is None:
        if chunks:
            yield from _refuse_taken(*chunks[-1])
        raise NotFound("session", session_id)
    return row


def _take_seqs_ids_free(session_id: str, given: dict[str, list[str]], count: int, now: int, rows: Rows = None) -> Op:
    """``_take_seqs`` with every id given in one array parameter per kind: one statement takes the seqs if
    none of them exists; only when it takes none do the arrays say which id exists."""
    ids = {"b_message_ids": given["message"], "b_part_ids": given["part"]}
    row = yield _taking(st.NEXT_SEQS_IDS_FREE, {**ids, "b_sid": session_id, "b_count": count, "b_now": now}, rows)
    if row is not None:
        return row
    for kind, kind_ids in given.items():
        if kind_ids:
            rows = yield step(st.TAKEN_IDS_ANY[kind], {f"b_{kind}_ids": kind_ids}, fetch="all")
            if rows:
                taken = {r.id for r in rows}
                raise InvalidInput(f"{kind} {next(i for i in kind_ids if i in taken)} already exists")
    raise NotFound("session", session_id)


def _taking(take: Any, params: dict[str, Any], rows: Rows) -> Any:
    """The step taking the seqs (``take``, RETURNING the session's last_seq; no row when it takes none), with
    ``rows`` (PostgreSQL) the inserts of those rows in the same statement, which insert nothing then."""
    if rows is None:
        return step(take, params, fetch="first")
    statement, rows_params = appended_in_one(take, rows)
    return step(statement, {**params, **rows_params}, fetch="first")


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
