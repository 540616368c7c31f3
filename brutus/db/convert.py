"""Between API models and rows: the column values a model is written as, and the model a row reads back as.

Strings are encoded with ``brutus.codec`` on the way in and decoded on the way out, so what a caller
stored is what it reads, byte for byte, on either backend. JSON columns are decoded by the engine's
deserializer.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..codec import ESC, JSONText, decode_text, encode_json, encode_text, loads_json, unpack
from ..errors import InvalidInput
from ..models import (
    PART_TYPES,
    Message,
    MessageTime,
    MessageWithParts,
    Part,
    CacheTokens,
    Session,
    TextPart,
    TokenCounts,
    ToolPart,
    ToolState,
    ToolTime,
)
from ..tokens import estimate_json_tokens, estimate_tokens

__all__ = [
    "build_history",
    "construct",
    "message_from_row",
    "part_data",
    "part_from_row",
    "part_tokens",
    "replaced",
    "reuse_history",
    "session_from_row",
    "text_in",
    "text_out",
    "token_columns",
    "validate_part",
]

_PART_ADAPTER: TypeAdapter[Part] = TypeAdapter(Part)
_PART_CLASSES = tuple(PART_TYPES.values())
_TEXT_DEFAULTS = {name: field.default for name, field in TextPart.model_fields.items()}
_OWN_FIELDS = {"id", "session_id", "message_id", "type"}
_NO_DATA = JSONText("{}")


_set = object.__setattr__
_new = object.__new__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
# One "every field set" set per model class, shared by the instances built here: pydantic only ever adds a
# field name to it (on assignment), and every name is in it already; ``model_copy`` copies it.
_ALL_FIELDS: dict[type, set[str]] = {}


def _all_fields(cls: type[BaseModel]) -> set[str]:
    names = _ALL_FIELDS.get(cls)
    if names is None:
        names = _ALL_FIELDS[cls] = set(cls.model_fields)
    return names


def construct(cls: Any, fields: dict[str, Any], fields_set: set[str] | None = None) -> Any:
    """A model from values already valid and complete (every field given, in field order): what
    ``model_construct`` does, minus its per-field default handling. Rows read back are trusted; this is the
    load path's hot spot. It writes pydantic's own slots (``__dict__``, ``__pydantic_fields_set__`` …), a
    shortcut into another library's internals kept for its measured gain: with ``model_construct`` instead (here
    and in ``_maker``), ``messages()`` of 4,000 items (the load guard) took 1.6-1.9x as long, of the corpus's
    sessions with the most messages and the most text 1.3x and 1.1-1.25x (benchmarks/construct_vs_public.py,
    alternating, 2026-11-27)."""
    if fields_set is None:
        every = _all_fields(cls)
        fields_set = every if len(fields) == len(every) else set(fields)
    obj = _new(cls)
    _set(obj, "__dict__", fields)
    _set_fields(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def replaced(model: Any, update: dict[str, Any]) -> Any:
    """``model.model_copy(update=update)`` for brutus's models (no extra fields, no private attributes) in less
    than half its time: a shallow copy with ``update`` applied and marked as set."""
    return construct(type(model), {**model.__dict__, **update}, model.__pydantic_fields_set__ | update.keys())


def text_in(value: str | None) -> str | None:
    return None if value is None else encode_text(value)


def text_out(value: str | bytes | None) -> str | None:
    """The text of a stored value (a packed one, read as bytes on SQLite, unpacked)."""
    if value is None:
        return None
    return decode_text(unpack(value) if type(value) is bytes else value)


def validate_part(part: Any) -> Part:
    """A part model from a model or a dict; ``InvalidInput`` naming what is wrong otherwise."""
    if type(part) is dict and len(part) == 2 and part.get("type") == "text" and type(part.get("text")) is str:
        # the agent's plain text part, built as validation builds it (some 40% of the time)
        return construct(TextPart, {**_TEXT_DEFAULTS, "text": part["text"]}, {"type", "text"})
    if isinstance(part, _PART_CLASSES):
        return part  # type: ignore[return-value]
    try:
        return _PART_ADAPTER.validate_python(part)
    except ValidationError as exc:
        raise InvalidInput(f"invalid part: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(x) for x in first.get("loc", ()))
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


def part_tokens(part: Part) -> int:
    """The estimate stored with a part: what it adds to the model's context."""
    if part.type in ("text", "reasoning"):
        return estimate_tokens(part.text)
    if part.type == "tool":
        state = part.state
        return estimate_json_tokens(state.input) + estimate_tokens(state.output) + estimate_tokens(state.error)
    if part.type == "subtask":
        return estimate_tokens(part.prompt)
    return 0


def part_data(part: Part) -> Any:
    """The ``parts.data`` JSON of a part: the type's own fields (a tool's state lives in ``tool_states``)."""
    if type(part) is TextPart and part.time is None and part.metadata is None:  # the agent's text: its dump
        return encode_json({"text": part.text, "synthetic": part.synthetic, "ignored": part.ignored})
    if part.type == "tool":  # its fields all live in tool_states
        return _NO_DATA
    try:
        # Python mode, not mode="json": pydantic's JSON mode mangles dict keys holding lone surrogates (and
        # refuses nested ones); encode_json checks the value is JSON and escapes what the backends refuse.
        dumped = part.model_dump(exclude=_OWN_FIELDS, exclude_none=True)
    except ValueError as exc:  # pydantic refuses nesting past its own limit (about 255 levels)
        raise InvalidInput(f"invalid part: {exc}") from None
    return encode_json(dumped)


def token_columns(tokens: TokenCounts | None) -> dict[str, int]:
    tokens = tokens or TokenCounts()
    return {
        "tokens_input": tokens.input,
        "tokens_output": tokens.output,
        "tokens_reasoning": tokens.reasoning,
        "tokens_cache_read": tokens.cache.read,
        "tokens_cache_write": tokens.cache.write,
    }


def session_from_row(row: Any) -> Session:
    return Session(
        id=row.id,
        parent_id=row.parent_id,
        title=text_out(row.title),
        directory=text_out(row.directory),
        created_at=row.created_at,
        updated_at=row.updated_at,
        archived_at=row.archived_at,
        message_count=row.last_seq,
        forked_from=row.forked_from,
        forked_at=row.forked_at,
    )


def message_from_row(row: Any) -> Message:
    tokens = construct(
        TokenCounts,
        {
            "input": row.tokens_input,
            "output": row.tokens_output,
            "reasoning": row.tokens_reasoning,
            "cache": construct(CacheTokens, {"read": row.tokens_cache_read, "write": row.tokens_cache_write}),
        },
    )
    return construct(
        Message,
        {
            "id": row.id,
            "session_id": row.session_id,
            "seq": row.seq,
            "role": row.role,
            "parent_id": row.parent_id,
            "summary": bool(row.summary),
            "synthetic": bool(row.synthetic),
            "finish": text_out(row.finish),
            "error": row.error,
            "tokens": tokens,
            "cost": float(row.cost),
            "agent": text_out(row.agent),
            "mode": text_out(row.mode),
            "model_id": text_out(row.model_id),
            "provider_id": text_out(row.provider_id),
            "metadata": row.meta,
            "time": construct(MessageTime, {"created": row.created_at, "completed": row.completed_at}),
        },
    )


def part_from_row(row: Any) -> Part:
    """A part from a ``parts`` row joined with its ``tool_states`` / ``tool_outputs`` columns."""
    if row.type == "tool":
        state = construct(
            ToolState,
            {
                "status": row.status,
                "input": row.input if row.input is not None else {},
                "output": text_out(row.output),
                "error": text_out(row.tool_error),
                "title": text_out(row.title),
                "metadata": row.tool_meta,
                "time": construct(ToolTime, {"start": row.started_at, "end": row.ended_at, "compacted": row.compacted_at}),
            },
        )
        return construct(
            ToolPart,
            {
                "id": row.id,
                "session_id": row.session_id,
                "message_id": row.message_id,
                "type": "tool",
                "call_id": text_out(row.call_id),
                "tool": text_out(row.tool),
                "state": state,
            },
        )
    data = dict(row.data or {})
    data.update(id=row.id, session_id=row.session_id, message_id=row.message_id, type=row.type)
    return PART_TYPES[row.type].model_validate(data)  # type: ignore[return-value]


# -- the load path ------------------------------------------------------------------------------------------
# ``build_history`` reads rows by position (SQLite's driver hands over plain tuples, with JSON columns as
# text and booleans as 0/1; SQLAlchemy rows index the same way, with JSON already decoded). The column orders
# are those of ``statements.MESSAGE_COLUMNS`` and ``statements.select_parts``.

_JSON_ESCAPES = (ESC, "\\ue000", "\\uE000")


def _loads_many(texts: list[str]) -> list[Any]:
    """Decode JSON texts with one ``json.loads`` (a C call instead of one Python call per value); values that
    hold the codec's escape, or that do not decode one by one, go through ``loads_json`` each."""
    joined = "[" + ",".join(texts) + "]"
    if not any(marker in joined for marker in _JSON_ESCAPES):
        try:
            values = json.loads(joined)
        except ValueError:
            values = None
        if values is not None and len(values) == len(texts):
            return values
    return [loads_json(text) for text in texts]


def _json_column(rows: list[Any], index: int) -> list[Any]:
    """Column ``index`` of ``rows`` with its JSON texts decoded (SQLAlchemy rows come decoded already; packed
    values, bytes, are unpacked first)."""
    values = [row[index] for row in rows]
    if bytes in map(type, values):
        values = [unpack(value) if type(value) is bytes else value for value in values]
    texts = [value for value in values if type(value) is str]
    if not texts:
        return values
    decoded = _loads_many(texts)
    if len(texts) == len(values):
        return decoded
    it = iter(decoded)
    return [next(it) if type(value) is str else value for value in values]


def _maker(cls: type[BaseModel]) -> Any:
    """``construct`` for one class with every field given, with its lookups done once (pydantic's slots
    written directly: the gain is measured at ``construct``)."""
    every = _all_fields(cls)

    def make(fields: dict[str, Any]) -> Any:
        obj = _new(cls)
        _set(obj, "__dict__", fields)
        _set_fields(obj, every)
        _set_extra(obj, None)
        _set_private(obj, None)
        return obj

    return make


_make_state, _make_tool_time, _make_tool = _maker(ToolState), _maker(ToolTime), _maker(ToolPart)
_make_message, _make_tokens, _make_cache = _maker(Message), _maker(TokenCounts), _maker(CacheTokens)
_make_time, _make_entry = _maker(MessageTime), _maker(MessageWithParts)


def _text(value: str | None) -> str | None:
    return value if value is None or ESC not in value else decode_text(value)


# The stored data of the agent's plain text part (``part_data``'s first case): such a part is built as validation
# builds it, with the fields validation marks as set (test_load_path holds it to validation). Loading 4,000 items
# takes 6-7% fewer instructions than validating each such part, the view Conversation.request() loads 7-9%
# (callgrind, 2026-11-24).
_PLAIN_TEXT_KEYS = frozenset({"text", "synthetic", "ignored"})
_PLAIN_TEXT_SET = frozenset({"id", "session_id", "message_id", "type", "text", "synthetic", "ignored"})


def _part(part_id: str, session_id: str, message_id: str, part_type: str, data: Any) -> Any:
    """A part other than a tool part, from its row: a plain text part built directly, any other validated."""
    if part_type == "text" and type(data) is dict and data.keys() == _PLAIN_TEXT_KEYS:
        text, synthetic, ignored = data["text"], data["synthetic"], data["ignored"]
        if type(text) is str and type(synthetic) is bool and type(ignored) is bool:
            fields = {
                "id": part_id,
                "session_id": session_id,
                "message_id": message_id,
                "type": "text",
                "text": text,
                "synthetic": synthetic,
                "ignored": ignored,
                "time": None,
                "metadata": None,
            }
            return construct(TextPart, fields, set(_PLAIN_TEXT_SET))  # a set of its own: assignment adds to it
    fields = dict(data or {})
    fields.update(id=part_id, session_id=session_id, message_id=message_id, type=part_type)
    return PART_TYPES[part_type].model_validate(fields)


_NO_TOOL_COLUMNS = (None,) * 11  # a tool part without its state row


def _tool_states(rows: list[Any], at: int) -> dict[str, ToolState]:
    """``ToolState`` by part id, from rows holding the part id first and the eleven tool columns of
    ``select_parts`` from index ``at`` on (call id, tool, status, input, title, metadata, error, start, end,
    compacted, output)."""
    states = {}
    for row, tool_input, tool_meta in zip(rows, _json_column(rows, at + 3), _json_column(rows, at + 5)):
        title, error, output = row[at + 4], row[at + 6], row[at + 10]
        if type(output) is bytes:
            output = unpack(output)
        states[row[0]] = _make_state(
            {
                "status": row[at + 2],
                "input": tool_input if tool_input is not None else {},
                "output": output if output is None or ESC not in output else decode_text(output),
                "error": error if error is None or ESC not in error else decode_text(error),
                "title": title if title is None or ESC not in title else decode_text(title),
                "metadata": tool_meta,
                "time": _make_tool_time({"start": row[at + 7], "end": row[at + 8], "compacted": row[at + 9]}),
            }
        )
    return states


def build_history(message_rows: list[Any], part_rows: list[Any], tool_rows: list[Any] | None = None) -> list[Any]:
    """``MessageWithParts`` from message rows (seq order) and their part rows (any order): the load path.

    Part rows hold the ``select_parts`` columns, or, when ``tool_rows`` is given, only its first six (the
    part's own), and the tool columns come from ``tool_rows`` (the part id, then the other eleven). The result
    equals ``message_from_row`` / ``part_from_row`` on the same rows; it is only cheaper: positional access,
    one JSON decode per column, no validation of trusted rows, and no sort where a message's part rows come
    in position order (as the queries ask).
    """
    if tool_rows is None:  # each part row holds its tool columns after its own six
        at, by_id = 6, None
        states = _tool_states([row for row in part_rows if row[4] == "tool"], at)
    else:
        at, by_id = 1, {row[0]: row for row in tool_rows}
        states = _tool_states(tool_rows, at)
    parts_of: dict[str, list[Any]] = {}
    last: dict[str, int] = {}  # the position of each message's last part so far
    unsorted = set()
    for row, data in zip(part_rows, _json_column(part_rows, 5)):
        part_id, session_id, message_id, position, part_type = row[0], row[1], row[2], row[3], row[4]
        if part_type == "tool":
            state = states.get(part_id)
            tool_row = row if by_id is None else by_id.get(part_id)
            if state is None or tool_row is None:  # a tool part without its state row (``brutus check`` reports it)
                tool_row = (part_id, *_NO_TOOL_COLUMNS)
                state = _tool_states([tool_row], 1)[part_id]
                call_id = tool = None
            else:
                call_id, tool = _text(tool_row[at]), _text(tool_row[at + 1])
            part = _make_tool(
                {
                    "id": part_id,
                    "session_id": session_id,
                    "message_id": message_id,
                    "type": "tool",
                    "call_id": call_id,
                    "tool": tool,
                    "state": state,
                }
            )
        else:
            part = _part(part_id, session_id, message_id, part_type, data)
        found = parts_of.get(message_id)
        if found is None:
            parts_of[message_id] = [part]
        else:
            found.append(part)
            if position < last[message_id]:
                unsorted.add(message_id)
        last[message_id] = position
    if unsorted:
        positions = {row[0]: row[3] for row in part_rows if row[2] in unsorted}
        for message_id in unsorted:
            parts_of[message_id].sort(key=lambda part: positions[part.id])
    history = []
    for row, error, meta in zip(message_rows, _json_column(message_rows, 12), _json_column(message_rows, 19)):
        (
            message_id, session_id, seq, role, parent_id, agent, mode, provider_id, model_id, summary, synthetic,
            finish, _, cost, tokens_input, tokens_output, tokens_reasoning, cache_read, cache_write, _,
            created, completed,
        ) = row  # fmt: skip
        if agent is not None and ESC in agent:
            agent = decode_text(agent)
        if mode is not None and ESC in mode:
            mode = decode_text(mode)
        if provider_id is not None and ESC in provider_id:
            provider_id = decode_text(provider_id)
        if model_id is not None and ESC in model_id:
            model_id = decode_text(model_id)
        if finish is not None and ESC in finish:
            finish = decode_text(finish)
        info = _make_message(
            {
                "id": message_id,
                "session_id": session_id,
                "seq": seq,
                "role": role,
                "parent_id": parent_id,
                "summary": bool(summary),
                "synthetic": bool(synthetic),
                "finish": finish,
                "error": error,
                "tokens": _make_tokens(
                    {
                        "input": tokens_input,
                        "output": tokens_output,
                        "reasoning": tokens_reasoning,
                        "cache": _make_cache({"read": cache_read, "write": cache_write}),
                    }
                ),
                "cost": float(cost),
                "agent": agent,
                "mode": mode,
                "model_id": model_id,
                "provider_id": provider_id,
                "metadata": meta,
                "time": _make_time({"created": created, "completed": completed}),
            }
        )
        parts = parts_of.get(message_id)
        history.append(_make_entry({"info": info, "parts": [] if parts is None else parts}))
    return history


def reuse_history(
    message_rows: list[Any], part_rows: list[Any], tool_rows: list[Any] | None, reuse: dict[str, Any]
) -> list[Any]:
    """``build_history``, less the messages whose rows equal those of an earlier call: those come back as the
    entries that call built (the same objects). ``reuse`` is what the earlier call left (message id → its rows
    and entry); this call leaves its own there. For a caller that loads one session again and again and
    hands none of the entries out (a live conversation): most of its messages are the same rows each time.

    The rows are the key, compared whole, so an entry is reused only when everything it was built from is
    unchanged, whoever wrote the session. They hold their JSON as text on both backends (the view's
    statements read it through ``statements.JSONText``): a decoded JSON value can be equal and differ (``1 == 1.0 == True``).
    """
    if not message_rows:
        reuse.clear()
        return []
    if tool_rows is not None:  # as one joined row each, the tool columns from their own rows
        tools = {row[0]: row[1:] for row in tool_rows}
        part_rows = [row + tools.get(row[0], _NO_TOOL_COLUMNS) for row in part_rows]
    rows_of: dict[str, list[Any]] = {}
    for row in part_rows:
        found = rows_of.get(row[2])
        if found is None:
            rows_of[row[2]] = [row]
        else:
            found.append(row)
    keys = [(row, tuple(rows_of.get(row[0], ()))) for row in message_rows]
    entries: list[Any] = []
    missed = []
    for key in keys:
        known = reuse.get(key[0][0])
        if known is not None and known[0] == key:
            entries.append(known[1])
        else:
            entries.append(None)
            missed.append(key)
    if missed:
        built = iter(build_history([key[0] for key in missed], [row for key in missed for row in key[1]]))
        entries = [entry if entry is not None else next(built) for entry in entries]
    reuse.clear()
    reuse.update((key[0][0], (key, entry)) for key, entry in zip(keys, entries))
    return entries
