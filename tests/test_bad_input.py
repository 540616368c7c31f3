"""Hostile text and values: stored and read back exactly on both backends, or refused with nothing written."""

from __future__ import annotations

import pytest

from brutus import BrutusError, InvalidInput, SessionStore
from brutus.codec import MAX_JSON_DEPTH

NASTY = [
    "nul \x00 in the middle\x00",
    "lone surrogates \ud800 and \udfff",
    "\x1b[31mred\x1b[0m ansi escapes \x1b]0;title\x07",
    "windows\r\nline\r\nendings\r",
    "private use \ue000 escape char \ue000\ue0000 and \ue000s0041",
    "emoji 🤖 and CJK 漢字 and combining e\u0301",
    "\\u0000 literally, and \\\\ backslashes",
    "",
]


def _tool(state: dict) -> dict:
    return {"type": "tool", "call_id": "call", "tool": "bash", "state": state}


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_text_round_trips_exactly(store: SessionStore, value: str) -> None:
    ses = store.create_session(title=value, directory=value)
    msg = store.append_message(ses.id, "assistant", agent=value, model_id=value, metadata={value: [value]})
    store.append_part(msg.id, {"type": "text", "text": value, "metadata": {"k": value}})
    store.append_part(msg.id, {"type": "reasoning", "text": value})
    tool = store.append_part(msg.id, _tool({"status": "pending", "input": {value: value, "list": [value, {value: None}]}}))
    store.update_tool(tool.id, status="running", title=value, metadata={"m": value})
    store.update_tool(tool.id, status="completed", output=value)
    errored = store.append_part(msg.id, _tool({"status": "pending"}))
    store.update_tool(errored.id, status="error", error=value or "e")
    store.finish_message(msg.id, finish="stop", error={"message": value})

    assert store.get_session(ses.id).title == value
    assert store.get_session(ses.id).directory == value
    [loaded] = store.messages(ses.id)
    assert loaded.info.agent == value and loaded.info.model_id == value
    assert loaded.info.metadata == {value: [value]}
    assert loaded.info.error == {"message": value}
    text, reasoning, done, failed = loaded.parts
    assert text.text == value and text.metadata == {"k": value}
    assert reasoning.text == value
    assert done.state.output == value and done.state.title == value
    assert done.state.input == {value: value, "list": [value, {value: None}]}
    assert done.state.metadata == {"m": value}
    assert failed.state.error == (value or "e")


def test_twenty_megabyte_output_round_trips(store: SessionStore) -> None:
    big = ("0123456789abcdef\n" * (20 * 1024 * 1024 // 17)) + "\x00end"
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    tool = store.append_part(msg.id, _tool({"status": "pending", "input": {}}))
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output=big)
    [loaded] = store.messages(ses.id)
    assert loaded.parts[0].state.output == big


def _nested(depth: int) -> dict:
    value: dict = {"leaf": "\x00"}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


def test_deep_json_within_the_limit_round_trips(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    deep = _nested(MAX_JSON_DEPTH - 2)
    part = store.append_part(msg.id, _tool({"status": "pending", "input": deep}))
    assert store.messages(ses.id)[0].parts[0].state.input == deep
    assert part.state.input == deep


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000, 100_000])
def test_too_deep_json_is_refused_and_nothing_written(store: SessionStore, depth: int) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    deep: object = []
    for _ in range(depth):
        deep = [deep]
    with pytest.raises(InvalidInput):
        store.append_part(msg.id, _tool({"status": "pending", "input": {"x": deep}}))
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "user", metadata={"x": deep})
    part = store.append_part(msg.id, _tool({"status": "pending"}))
    store.update_tool(part.id, status="running")
    with pytest.raises(InvalidInput):
        store.update_tool(part.id, status="completed", output="x", metadata={"x": deep})
    history = store.messages(ses.id)
    assert len(history) == 1
    assert [p.state.status for p in history[0].parts] == ["running"]


@pytest.mark.parametrize(
    "bad_metadata",
    [{"x": float("nan")}, {"x": float("inf")}, {"x": object()}, {1: "non-string key"}, {"x": b"bytes"}],
    ids=["nan", "inf", "object", "int-key", "bytes"],
)
def test_values_json_cannot_hold_are_refused(store: SessionStore, bad_metadata: dict) -> None:
    ses = store.create_session()
    with pytest.raises(BrutusError):
        store.append_message(ses.id, "user", metadata=bad_metadata)
    assert store.messages(ses.id) == []
    assert store.get_session(ses.id).message_count == 0


def test_huge_integers_are_refused_cleanly(store: SessionStore) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    with pytest.raises(InvalidInput):
        store.finish_message(msg.id, finish="stop", tokens={"output": 2**64})
    with pytest.raises(InvalidInput):
        store.append_message(ses.id, "user", created_at=-5)
    big = store.append_part(msg.id, _tool({"status": "pending", "input": {"n": 2**62}}))
    assert store.messages(ses.id)[0].parts[0].state.input == {"n": 2**62}
    assert big.state.input == {"n": 2**62}
