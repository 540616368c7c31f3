"""``update_session`` and ``rewind``: the edits besides appending, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from brutus import InvalidInput, NotFound, SessionStore
from brutus.summarizers import ExtractiveSummarizer

from integrity import integrity_problems


def _turn(store: SessionStore, session_id: str, n: int) -> tuple[str, str]:
    user = store.append_messages(session_id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": f"do {n} " * 400}]}])[0]
    reply = store.append_messages(
        session_id,
        [
            {
                "info": {"role": "assistant", "parent_id": user.info.id, "finish": "stop"},
                "parts": [
                    {"type": "tool", "call_id": f"c{n}", "tool": "bash", "state": {"status": "completed", "input": {}, "output": "x" * 4000}},
                    {"type": "text", "text": f"done {n}"},
                ],
            }
        ],
    )[0]
    return user.info.id, reply.info.id


def test_update_session_sets_what_is_given(store: SessionStore) -> None:
    session = store.create_session(title="old", directory="/a")
    assert store.update_session(session.id, title="new").model_dump(include={"title", "directory"}) == {"title": "new", "directory": "/a"}
    assert store.update_session(session.id, directory="/b \x00").directory == "/b \x00"
    assert store.get_session(session.id).title == "new"
    with pytest.raises(NotFound):
        store.update_session("ses_missing", title="x")
    with pytest.raises(InvalidInput):
        store.update_session(session.id, title=3)  # type: ignore[arg-type]


def test_rewind_deletes_the_message_and_what_follows(store: SessionStore) -> None:
    session = store.create_session()
    turns = [_turn(store, session.id, n) for n in range(3)]
    assert store.rewind(session.id, turns[1][0]) == 4
    history = store.messages(session.id)
    assert [m.info.id for m in history] == list(turns[0])
    assert store.get_session(session.id).message_count == 2
    again = _turn(store, session.id, 9)  # the seqs go on from the cut, gapless
    assert [m.info.seq for m in store.messages(session.id)] == [1, 2, 3, 4]
    assert store.messages(session.id)[2].info.id == again[0]
    assert integrity_problems(store) == []


def test_rewind_takes_the_compaction_it_cuts_through_with_it(store: SessionStore) -> None:
    session = store.create_session()
    for n in range(4):
        _turn(store, session.id, n)
    result = store.compact(session.id, ExtractiveSummarizer())
    after = _turn(store, session.id, 5)
    assert store.filter_compacted(session.id)[1].info.id == result.summary_message.info.id
    store.rewind(session.id, after[0])  # after the boundary: it stays
    assert [c.status for c in store.compactions(session.id)] == ["completed"]
    assert store.filter_compacted(session.id)[-1].info.id == result.summary_message.info.id
    compaction_message = store.filter_compacted(session.id)[0].info.id
    store.rewind(session.id, compaction_message)  # through it: the marker and the boundary go
    assert store.compactions(session.id) == []
    assert len(store.filter_compacted(session.id)) == 8
    assert integrity_problems(store) == []


def test_rewind_refuses_a_message_of_another_session(store: SessionStore) -> None:
    one, two = store.create_session(), store.create_session()
    user, _ = _turn(store, one.id, 0)
    with pytest.raises(NotFound):
        store.rewind(two.id, user)
    with pytest.raises(NotFound):
        store.rewind("ses_missing", user)
    assert len(store.messages(one.id)) == 2
