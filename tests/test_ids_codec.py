"""Ids are prefixed and time-ordered; the text codec is lossless."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brutus.codec import decode_text, encode_json, encode_text, loads_json, dumps_json
from brutus.ids import new_id


def test_ids_have_prefixes_and_sort_by_creation() -> None:
    ids = [new_id("message") for _ in range(2000)]
    assert all(i.startswith("msg_") and len(i) == 30 for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert new_id("session").startswith("ses_") and new_id("part").startswith("prt_")
    assert new_id("compaction").startswith("cmp_")


@given(st.text())
def test_text_codec_round_trips(text: str) -> None:
    encoded = encode_text(text)
    assert "\x00" not in encoded
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in encoded)
    encoded.encode("utf-8")  # always valid UTF-8
    assert decode_text(encoded) == text


def test_plain_text_is_stored_unchanged() -> None:
    for text in ["hello", "héllo 漢字 🤖", "\x1b[31m", "a\r\nb"]:
        assert encode_text(text) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_json_codec_round_trips(value) -> None:
    assert loads_json(dumps_json(encode_json(value))) == value


def test_encode_json_serializes_once_and_dumps_json_passes_it_through() -> None:
    import json

    from brutus.codec import JSONText

    value = {"command": "ls -la", "n": [1, 2.5, None, True], "漢字": "🤖"}
    encoded = encode_json(value)
    assert type(encoded) is JSONText and encoded == json.dumps(value, ensure_ascii=False)
    assert dumps_json(encoded) is encoded  # not serialized a second time (as a JSON string)
    assert loads_json(dumps_json(encoded)) == value
    # text that must be escaped is walked, and serialized by dumps_json as before
    escaped = encode_json({"k": "nul\x00"})
    assert escaped == {"k": "nul\ue0000"} and loads_json(dumps_json(escaped)) == {"k": "nul\x00"}
    assert encode_json(None) is None
