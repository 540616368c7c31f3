"""The write path's shortcuts build exactly what validation builds.

A live agent's text parts are mostly plain: ``{"type": "text", "text": ...}``. brutus builds those directly
instead of through pydantic validation, and copies its models without ``model_copy``; these tests hold every
shortcut to the validated result (values, field order, fields set, what is stored), on values that take the
shortcut and on values that must not.
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
from brutus.errors import InvalidInput
from brutus.models import Part, TextPart, ToolPart


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
