"""The load path (``convert.build_history``) builds exactly what validating every row would build.

``messages()`` and ``filter_compacted()`` construct models without validation, read rows by position and
decode JSON a column at a time. These tests hold them to the reference: ``message_from_row`` /
``part_from_row`` on SQLAlchemy rows, and full pydantic validation of every model, on the real corpus and on
sessions full of hostile text, on both backends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from corpus_helpers import all_files
from pydantic import BaseModel
from sqlalchemy import select

from brutus import MessageWithParts, SessionStore, TextPart, import_file
from brutus.db import statements as st
from brutus.db.convert import build_history, message_from_row, part_from_row, reuse_history
from brutus.flows import Tx

HOSTILE = "nul\x00 lone\ud800 low\udfff esc\ue000 \ue0000 \ue000s0041 crlf\r\n emoji🤖 \\ue000 \\u0000"


def reference(store: SessionStore, session_id: str) -> list[MessageWithParts]:
    """The history as the validating row converters build it, from SQLAlchemy rows."""
    with store.engine.connect() as connection:
        query = select(*st.MESSAGE_COLUMNS).where(st.M.c.session_id == session_id).order_by(st.M.c.seq)
        messages = connection.execute(query).all()  # decoded by SQLAlchemy (st.MESSAGES reads JSON as text)
        parts = connection.execute(
            st.select_parts().where(st.P.c.session_id == session_id).order_by(st.P.c.message_id, st.P.c.position)
        ).all()
    by_message: dict[str, list[Any]] = {}
    for row in parts:
        by_message.setdefault(row.message_id, []).append(part_from_row(row))
    return [
        MessageWithParts.model_construct(info=message_from_row(row), parts=by_message.get(row.id, []))
        for row in messages
    ]


def assert_same(loaded: list[MessageWithParts], expected: list[MessageWithParts]) -> None:
    assert loaded == expected
    for got, want in zip(loaded, expected):
        # the same models, field order (model_dump order is export order) and set fields
        assert list(got.info.__dict__) == list(want.info.__dict__)
        assert got.info.model_fields_set == want.info.model_fields_set
        for got_part, want_part in zip(got.parts, want.parts):
            assert type(got_part) is type(want_part)
            assert list(got_part.__dict__) == list(want_part.__dict__)
            assert got_part.model_fields_set == want_part.model_fields_set, got_part.type
        # and every model is valid: validating the dump rebuilds the same tree
        assert MessageWithParts.model_validate(got.model_dump()) == got


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> SessionStore:
    store = SessionStore.open(f"sqlite:///{tmp_path_factory.mktemp('load') / 'corpus.db'}")
    for path in all_files():
        import_file(store, path)
    yield store
    store.close()


@pytest.mark.slow
def test_every_corpus_session_loads_as_the_validating_path_builds_it(corpus_store: SessionStore) -> None:
    sessions = corpus_store.list_sessions()
    assert len(sessions) >= 21
    part_types = set()
    for session in sessions:
        loaded = corpus_store.messages(session.id)
        assert_same(loaded, reference(corpus_store, session.id))
        part_types |= {p.type for m in loaded for p in m.parts}
    assert {"text", "tool", "reasoning", "step-start", "step-finish", "compaction"} <= part_types


def hostile_session(store: SessionStore) -> str:
    session_id = store.create_session(title=HOSTILE).id
    user = store.append_message(session_id, "user", agent=HOSTILE, metadata={HOSTILE: [HOSTILE, 1]})
    store.append_part(user.id, {"type": "text", "text": HOSTILE})
    store.append_part(user.id, {"type": "text", "text": "plain", "synthetic": True, "time": {"start": 5}})
    reply = store.append_message(
        session_id, "assistant", parent_id=user.id, model_id=HOSTILE, mode="\ue000", provider_id="p\x00"
    )
    store.append_part(reply.id, {"type": "reasoning", "text": HOSTILE, "metadata": {"k": HOSTILE}})
    store.append_part(reply.id, {"type": "reasoning", "text": "r", "time": {"start": 1, "end": 2}})
    tool = store.append_part(
        reply.id,
        {"type": "tool", "call_id": HOSTILE, "tool": "bash", "state": {"status": "pending", "input": {HOSTILE: HOSTILE}}},
    )
    store.update_tool(tool.id, status="running", title=HOSTILE)
    store.update_tool(tool.id, status="completed", output=HOSTILE * 3, metadata={"exit": 0, HOSTILE: HOSTILE})
    failed = store.append_part(
        reply.id, {"type": "tool", "call_id": "c2", "tool": "read", "state": {"status": "pending", "input": {}}}
    )
    store.update_tool(failed.id, status="error", error=HOSTILE)
    store.append_part(reply.id, {"type": "step-finish", "reason": "stop", "tokens": {"input": 3}})
    store.append_part(reply.id, {"type": "text", "text": "\ue000\ue000 twice"})
    store.finish_message(reply.id, finish=HOSTILE, tokens={"input": 2**62, "cache": {"read": 7}}, error={"m": HOSTILE})
    store.append_message(session_id, "user")  # a message without parts
    return session_id


def test_hostile_text_loads_exactly(store: SessionStore) -> None:
    session_id = hostile_session(store)
    loaded = store.messages(session_id)
    assert_same(loaded, reference(store, session_id))
    assert loaded[0].parts[0].text == HOSTILE
    assert loaded[1].info.model_id == HOSTILE and loaded[1].info.mode == "\ue000"
    tool = loaded[1].parts[2]
    assert tool.call_id == HOSTILE and tool.state.input == {HOSTILE: HOSTILE} and tool.state.output == HOSTILE * 3
    assert tool.state.metadata == {"exit": 0, HOSTILE: HOSTILE} and tool.state.title == HOSTILE
    assert loaded[1].parts[3].state.error == HOSTILE
    assert loaded[1].parts[5].text == "\ue000\ue000 twice"
    assert loaded[1].info.error == {"m": HOSTILE} and loaded[1].info.tokens.input == 2**62
    assert loaded[2].parts == []
    assert store.filter_compacted(session_id) == loaded


def test_json_columns_decode_alike_one_by_one_and_together() -> None:
    # a JSON text with an escape written by another client, next to plain ones: decoded one by one
    rows = [
        ("p1", "s", "m", 0, "text", '{"text": "a"}'),
        ("p2", "s", "m", 1, "text", '{"text": "\\ue000\\ue000b"}'),
        ("p3", "s", "m", 2, "text", '{"text": "c", "synthetic": true}'),
    ]
    message = ("m", "s", 1, "user", None, None, None, None, None, 0, 0, None, None, 0.0, 0, 0, 0, 0, 0, None, 1, None)
    built = build_history([message], rows, [])
    assert [p.text for p in built[0].parts] == ["a", "\ue000b", "c"]
    assert built[0].parts[2].synthetic is True and built[0].parts[2].model_fields_set >= {"synthetic"}
    # a corrupt JSON text fails the load as it would one by one, instead of shifting values between rows
    corrupt = [("p1", "s", "m", 0, "text", '{"text": "a"}, {"text": "b"}'), ("p2", "s", "m", 1, "text", '{"text": "c"}')]
    with pytest.raises(ValueError):
        build_history([message], corrupt, [])


def test_a_plain_text_part_loads_as_validation_builds_it() -> None:
    # the data a plain text part is stored with takes the direct path; an int flag or one field more is validated
    texts = [
        '{"text": "a", "synthetic": false, "ignored": true}',
        '{"ignored": false, "synthetic": true, "text": "b"}',
        '{"text": "c", "synthetic": 1, "ignored": false}',
        '{"text": "d", "synthetic": false, "ignored": false, "metadata": {"k": 1}}',
    ]
    rows = [(f"p{i}", "s", "m", i, "text", text) for i, text in enumerate(texts)]
    message = ("m", "s", 1, "user", None, None, None, None, None, 0, 0, None, None, 0.0, 0, 0, 0, 0, 0, None, 1, None)
    built = build_history([message], rows, [])[0].parts
    for got, (part_id, _, _, _, _, text) in zip(built, rows, strict=True):
        fields = {**json.loads(text), "id": part_id, "session_id": "s", "message_id": "m", "type": "text"}
        want = TextPart.model_validate(fields)  # as part_from_row builds it
        assert got == want and list(got.__dict__) == list(want.__dict__)
        assert got.model_fields_set == want.model_fields_set
    # each part has a fields set of its own: assigning a field of one marks it set on that part only
    built[0].metadata = {"k": 2}
    assert "metadata" in built[0].model_fields_set and "metadata" not in built[1].model_fields_set


def test_part_rows_in_any_order_load_in_position_order() -> None:
    message = ("m", "s", 1, "user", None, None, None, None, None, 0, 0, None, None, 0.0, 0, 0, 0, 0, 0, None, 1, None)
    other = ("n", "s", 2, "user", None, None, None, None, None, 0, 0, None, None, 0.0, 0, 0, 0, 0, 0, None, 1, None)
    rows = [(f"p{i}", "s", "m" if i % 2 else "n", i, "text", json.dumps({"text": str(i)})) for i in (5, 2, 3, 0, 1, 4)]
    built = build_history([message, other], rows, [])
    assert [[p.text for p in entry.parts] for entry in built] == [["1", "3", "5"], ["0", "2", "4"]]
    assert built == build_history([message, other], sorted(rows, key=lambda row: row[3]), [])


def test_reuse_returns_the_earlier_entry_only_for_the_same_rows() -> None:
    def message(message_id: str, seq: int, cost: float = 0.0) -> tuple[Any, ...]:
        return (message_id, "s", seq, "user", None, None, None, None, None, 0, 0, None, None, cost, 0, 0, 0, 0, 0, None, 1, None)

    def text(part_id: str, message_id: str, value: str) -> tuple[Any, ...]:
        return (part_id, "s", message_id, 0, "text", json.dumps({"text": value, "synthetic": False, "ignored": False}))

    messages = [message("m1", 1), message("m2", 2), message("m3", 3)]
    parts = [text("p1", "m1", "a"), text("p2", "m2", "b"), text("p3", "m3", "c")]
    reuse: dict[str, Any] = {}
    first = reuse_history(messages, parts, None, reuse)
    assert first == build_history(messages, parts)
    # m2's part and m3's row change (the cost 0 → 0.5), m4 is new: those are built again, m1 comes back
    messages = [message("m1", 1), message("m2", 2), message("m3", 3, 0.5), message("m4", 4)]
    parts = [text("p1", "m1", "a"), text("p2", "m2", "B"), text("p3", "m3", "c")]
    second = reuse_history(messages, parts, None, reuse)
    assert second == build_history(messages, parts)
    assert second[0] is first[0] and second[1] is not first[1] and second[2] is not first[2]
    assert second[1].parts[0].text == "B" and second[2].info.cost == 0.5 and second[3].parts == []
    assert set(reuse) == {"m1", "m2", "m3", "m4"}  # what this call read, nothing older
    # a tool part's state in rows of its own (a session without a boundary): the same rows, the same entry
    tool = ("t1", "s", "m1", 1, "tool", None)
    state = ("t1", "c1", "bash", "completed", '{"command": "ls"}', None, None, None, 1, 2, None, "out")
    third = reuse_history(messages, [*parts, tool], [state], reuse)
    assert third == build_history(messages, [*parts, tool], [state]) and third[0] is not first[0]
    marked = (*state[:10], 3, state[11])  # the prune mark set
    fourth = reuse_history(messages, [*parts, tool], [marked], reuse)
    assert fourth[0].parts[1].state.time.compacted == 3 and fourth[1] is third[1]


def test_a_pruned_output_is_not_read_by_filter_compacted(store: SessionStore) -> None:
    session_id = store.create_session().id
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": "go"})
    reply = store.append_message(session_id, "assistant", parent_id=user.id)
    tool = store.append_part(
        reply.id,
        {"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "completed", "input": {}, "output": "big"}},
    )
    with store.batch():
        from brutus.db.history_ops import mark_pruned

        store.run(Tx(mark_pruned([tool.id], now=7)))
    full = store.messages(session_id)[1].parts[0]
    view = store.filter_compacted(session_id)[1].parts[0]
    assert full.state.output == "big" and full.state.time.compacted == 7
    assert view.state.output is None and view.state.time.compacted == 7


def _mutable_objects(history: list[MessageWithParts]) -> list[Any]:
    """Every mutable object in loaded entries: the models, their dicts, and the dicts, lists and sets in them.
    Not a model's fields set when it holds every field: one such set is shared by the models of a class built
    by the load path (assignment only adds a field name to it, and every name is in it already)."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, BaseModel):
            found.extend((value, value.__dict__))
            fields_set = value.model_fields_set
            if fields_set != set(type(value).model_fields):
                found.append(fields_set)
            for item in value.__dict__.values():
                walk(item)
        elif isinstance(value, dict):
            found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, set)):
            found.append(value)
            for item in value:
                walk(item)

    for entry in history:
        walk(entry)
    return found


def compacted_session(store: SessionStore) -> str:
    """``hostile_session`` followed by a completed compaction and a turn after it (a boundary: the filtered
    view reads its parts joined with their tool columns)."""
    session_id = hostile_session(store)
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "compaction", "auto": True})
    summary = store.append_message(session_id, "assistant", parent_id=user.id, summary=True, mode="compaction")
    store.append_part(summary.id, {"type": "text", "text": "the summary"})
    store.finish_message(summary.id, finish="stop", tokens={"input": 5, "output": 4})
    asked = store.append_message(session_id, "user", metadata={"k": [1, {"n": 2}]})
    store.append_part(asked.id, {"type": "text", "text": "go on"})
    reply = store.append_message(session_id, "assistant", parent_id=asked.id)
    tool = store.append_part(
        reply.id,
        {"type": "tool", "call_id": "c3", "tool": "bash", "state": {"status": "pending", "input": {"a": [1, 2]}}},
    )
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output="out", metadata={"exit": 0})
    store.append_part(reply.id, {"type": "text", "text": "done"})
    store.finish_message(reply.id, finish="stop", tokens={"input": 1, "cache": {"read": 2}})
    return session_id


def test_loads_share_no_mutable_object(store: SessionStore) -> None:
    # within one load and between loads, whole or filtered: editing what one load returned can reach nothing else
    session_id = compacted_session(store)
    loads = [store.messages(session_id), store.messages(session_id), store.filter_compacted(session_id)]
    assert len(loads[2]) == 4 and len(loads[0]) > len(loads[2])
    seen: dict[int, int] = {}
    for number, history in enumerate(loads):
        for value in _mutable_objects(history):
            assert seen.setdefault(id(value), number) == number, f"shared between loads: {value!r}"
        objects = _mutable_objects(history)
        assert len({id(value) for value in objects}) == len(objects), "shared within one load"


def test_a_loaded_message_edited_changes_no_other_and_not_the_next_load(store: SessionStore) -> None:
    session_id = compacted_session(store)
    first = store.messages(session_id)
    before = [entry.model_dump() for entry in first]
    reply = first[-1]
    tool, text = reply.parts
    reply.info.tokens.cache.read = 99
    reply.info.tokens.input = 98
    reply.info.time.created = 1
    reply.info.cost = 2.5
    reply.info.metadata = {"edited": True}
    first[-2].info.metadata["k"][1]["n"] = 3
    tool.state.input["a"].append(3)
    tool.state.metadata["exit"] = 1
    tool.state.time.end = 5
    tool.state.output = "edited"
    text.text = "edited"
    text.time = None  # marks the field set on this part only
    reply.parts.append(text)
    first[0].parts.clear()
    # every other message is as loaded, and the next loads are as the first was
    assert [entry.model_dump() for entry in first[1:-2]] == before[1:-2]
    second = store.messages(session_id)
    assert [entry.model_dump() for entry in second] == before
    assert "time" not in second[-1].parts[1].model_fields_set
    assert "time" not in second[-3].parts[0].model_fields_set  # the summary's text part
    view = store.filter_compacted(session_id)
    assert [entry.model_dump() for entry in view] == before[-4:]
