"""The write path's shortcuts build exactly what validation builds.

A live agent's calls mostly carry plain values: a text part ``{"type": "text", "text": ...}``, a message
with a model id and a parent. brutus builds those models directly instead of through pydantic validation;
these tests hold every shortcut to the validated result (values, field order, fields set, what is stored),
on values that take the shortcut and on values that must not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from brutus.codec import encode_json
from brutus.db.convert import part_data, replaced, validate_part
from brutus.db.ops import _message_values, _plain_message, _validated_message
from brutus.errors import InvalidInput
from brutus.models import Message, Part, TextPart, ToolPart


class _Str(str):
    pass


def same_model(built: Any, expected: Any) -> None:
    """Equal values, of the same classes, in the same field order, with the same fields set, all the way down."""
    assert type(built) is type(expected)
    assert list(built.__dict__) == list(expected.__dict__)
    assert built.model_fields_set == expected.model_fields_set
    assert built.__pydantic_extra__ == expected.__pydantic_extra__
    assert built.__pydantic_private__ == expected.__pydantic_private__
    for name, value in built.__dict__.items():
        other = expected.__dict__[name]
        if hasattr(value, "model_fields_set"):
            same_model(value, other)
        else:
            assert type(value) is type(other) and value == other, name


@given(st.text() | st.builds(_Str, st.text()), st.sampled_from(["text", "reasoning", "Text"]), st.booleans())
def test_a_plain_text_part_is_built_as_validation_builds_it(text: str, part_type: str, reverse: bool) -> None:
    part = {"type": part_type, "text": text}
    if reverse:
        part = dict(reversed(list(part.items())))
    try:
        expected = TypeAdapter(Part).validate_python(part)
    except ValueError:
        with pytest.raises(InvalidInput):
            validate_part(part)
        return
    built = validate_part(part)
    same_model(built, expected)
    dumped = expected.model_dump(exclude={"id", "session_id", "message_id", "type"}, exclude_none=True)
    assert part_data(built) == encode_json(dumped)


@given(st.text(), st.booleans(), st.booleans(), st.none() | st.just({"start": 1}), st.none() | st.just({"k": [1]}))
def test_a_text_part_is_stored_as_its_dump(text: str, synthetic: bool, ignored: bool, time: Any, metadata: Any) -> None:
    part = TextPart(text=text, synthetic=synthetic, ignored=ignored, time=time, metadata=metadata, id="prt_a")
    dumped = part.model_dump(exclude={"id", "session_id", "message_id", "type"}, exclude_none=True)
    assert part_data(part) == encode_json(dumped)
    assert list(part_data(part) if isinstance(part_data(part), dict) else json.loads(part_data(part))) == list(dumped)


texts = st.none() | st.text(max_size=8) | st.builds(_Str, st.text(max_size=3)) | st.integers() | st.just(b"x")
message_fields = st.fixed_dictionaries(
    {},
    optional={
        "agent": texts,
        "mode": texts,
        "model_id": texts,
        "provider_id": texts,
        "finish": texts,
        "error": st.none() | st.just({}) | st.just({"message": "x"}),
        "summary": st.booleans(),
        "cost": st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=1e6),
        "created_at": st.integers(0, 2**40),
    },
)


@given(
    message_fields,
    st.sampled_from(["user", "assistant", _Str("user")]),
    st.none() | st.just("msg_parent") | st.just(_Str("msg_parent")),
    st.sampled_from([-1, 0, 1_700_000_000_000, 2**63 - 1, 2**63, 1.5, True]),
    st.just("msg_given") | st.just(_Str("msg_given")),
)
def test_a_plain_message_is_built_as_validation_builds_it(
    fields: dict[str, Any], role: str, parent_id: Any, now: Any, message_id: str
) -> None:
    fields = dict(fields, finish=fields.get("finish") or None, error=fields.get("error") or None)
    built = _plain_message(message_id, "ses_a", role, parent_id, fields, now)
    try:
        expected = _validated_message(message_id, "ses_a", role, parent_id, fields, now)
    except InvalidInput:
        assert built is None  # the shortcut never accepts what validation refuses
        return
    if built is not None:
        same_model(built, expected)


def test_the_shortcut_is_taken_for_an_agents_calls() -> None:
    for fields in ({}, {"parent_id": "msg_a", "model_id": "claude-sonnet-4-5"}, {"agent": "build", "mode": None}):
        fields = dict(fields, finish=None, error=None)
        assert _plain_message("msg_b", "ses_a", "assistant", fields.get("parent_id"), fields, 1_700_000_000_000)
    values, message = _message_values("ses_a", "user", {"model_id": "m"}, 5)
    assert isinstance(message, Message) and message.time.created == 5 and values["model_id"] == "m"
    assert values["created_at"] == 5 and values["tokens_input"] == 0 and values["error"] is None


def test_replaced_copies_as_model_copy_does() -> None:
    part = validate_part(
        {"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "completed", "input": {}, "output": "x"}}
    )
    assert isinstance(part, ToolPart)
    time = replaced(part.state.time, {"start": 1, "end": 2})
    same_model(time, part.state.time.model_copy(update={"start": 1, "end": 2}))
    state = replaced(part.state, {"time": time})
    same_model(state, part.state.model_copy(update={"time": time}))
    copy = replaced(part, {"state": state})
    same_model(copy, part.model_copy(update={"state": state}))
    assert part.state.time.start is None  # the original is untouched
