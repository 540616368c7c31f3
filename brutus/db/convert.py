"""Between API models and rows: the column values a model is written as, and the model a row reads back as.

Strings are encoded with ``brutus.codec`` on the way in and decoded on the way out, so what a caller
stored is what it reads, byte for byte, on either backend. JSON columns are decoded by the engine's
deserializer.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..codec import decode_text, encode_json, encode_text
from ..errors import InvalidInput
from ..models import (
    PART_TYPES,
    Message,
    MessageTime,
    Part,
    CacheTokens,
    Session,
    TokenCounts,
    ToolPart,
    ToolState,
    ToolTime,
)
from ..tokens import estimate_json_tokens, estimate_tokens

__all__ = [
    "construct",
    "message_from_row",
    "part_data",
    "part_from_row",
    "part_tokens",
    "session_from_row",
    "text_in",
    "text_out",
    "token_columns",
    "validate_part",
]

_PART_ADAPTER: TypeAdapter[Part] = TypeAdapter(Part)
_OWN_FIELDS = {"id", "session_id", "message_id", "type"}
_TOOL_FIELDS = _OWN_FIELDS | {"call_id", "tool", "state"}


_set = object.__setattr__


def construct(cls: Any, fields: dict[str, Any]) -> Any:
    """A model from values already valid and complete (every field given): what ``model_construct`` does,
    minus its per-field default handling. Rows read back are trusted; this is the load path's hot spot."""
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(fields))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def text_in(value: str | None) -> str | None:
    return None if value is None else encode_text(value)


def text_out(value: str | None) -> str | None:
    return None if value is None else decode_text(value)


def validate_part(part: Any) -> Part:
    """A part model from a model or a dict; ``InvalidInput`` naming what is wrong otherwise."""
    if isinstance(part, tuple(PART_TYPES.values())):
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
    exclude = _TOOL_FIELDS if part.type == "tool" else _OWN_FIELDS
    try:
        # Python mode, not mode="json": pydantic's JSON mode mangles dict keys holding lone surrogates (and
        # refuses nested ones); encode_json checks the value is JSON and escapes what the backends refuse.
        dumped = part.model_dump(exclude=exclude, exclude_none=True)
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
