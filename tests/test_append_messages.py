"""``store.append_messages``: whole messages with their parts in one call.

It must write exactly the rows the live calls (``append_message``, ``append_part``, ``finish_message``) write
for the same history, give back what ``messages()`` then reads, keep the boundary cache true, and refuse bad
input before writing anything.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from builders import Msg, histories, write_history
from corpus_helpers import all_files
from hypothesis import HealthCheck, given, settings
from integrity import S, dump, integrity_problems
from sqlalchemy import select

from brutus import InvalidInput, MessageWithParts, NotFound, SessionStore, import_file
from test_store import ALL_PARTS

NOW = 1_760_000_000_000


def fixed(store: SessionStore) -> SessionStore:
    store.clock = lambda: NOW
    return store


@pytest.fixture
def other(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> SessionStore:
    """A second, empty database on the same backend, with the same fixed clock."""
    url = f"sqlite:///{tmp_path / 'other.db'}" if backend == "sqlite" else request.getfixturevalue("db_url")
    store = fixed(SessionStore.open(url))
    yield store
    store.close()


def copy_session(source: SessionStore, target: SessionStore, session_id: str) -> list[MessageWithParts]:
    """The session's history written into ``target`` under the same ids with one ``append_messages`` call."""
    session = source.get_session(session_id)
    target.create_session(id=session_id, title=session.title, directory=session.directory)
    return target.append_messages(session_id, source.messages(session_id))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=histories())
def test_writes_the_rows_the_live_calls_write(store: SessionStore, other: SessionStore, spec: list[Msg]) -> None:
    """Every table, row for row: seqs, positions, part counts, token estimates, tool states and outputs,
    the session's counters and its boundary cache (the histories hold completed, pending and failed
    compactions)."""
    fixed(store)
    session_id = write_history(store, spec)
    returned = copy_session(store, other, session_id)
    assert dump(other.engine, session_id) == dump(store.engine, session_id)
    assert returned == other.messages(session_id) == store.messages(session_id)
    assert other.filter_compacted(session_id) == store.filter_compacted(session_id)
    assert integrity_problems(other, [session_id]) == []


def test_every_part_type_and_fields_round_trip(store: SessionStore, other: SessionStore) -> None:
    fixed(store)
    session = store.create_session(id="ses_all")
    user = store.append_message(session.id, "user", id="msg_u", agent="build", metadata={"k": [1, None]})
    for n, part in enumerate(ALL_PARTS):
        store.append_part(user.id, dict(part, id=f"prt_{n:02d}"))
    reply = store.append_message(session.id, "assistant", id="msg_a", parent_id="msg_u", model_id="m", provider_id="p", mode="build")
    store.append_part(reply.id, {"type": "tool", "id": "prt_e", "call_id": "c_e", "tool": "bash", "state": {"status": "error", "input": {}, "error": "no\x00pe"}})
    store.append_part(reply.id, {"type": "tool", "id": "prt_r", "call_id": "c_r", "tool": "bash", "state": {"status": "running", "input": {"a": 1}, "title": "t"}})
    usage = {"input": 5200, "output": 310, "reasoning": 7, "cache": {"read": 100, "write": 20}}
    store.finish_message(reply.id, finish="error", tokens=usage, cost=0.25, error={"name": "APIError", "data": {"x": "\ud800"}})

    returned = copy_session(store, other, session.id)
    assert dump(other.engine, session.id) == dump(store.engine, session.id)
    assert returned == store.messages(session.id)
    assert [type(p) for p in returned[0].parts] == [type(p) for p in store.messages(session.id)[0].parts]


def boundary(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """The session's cached boundary and message counter."""
    with store.engine.connect() as conn:
        row = conn.execute(select(S.c.boundary_message_id, S.c.boundary_seq, S.c.last_seq).where(S.c.id == session_id)).one()
    return tuple(row)


@pytest.mark.slow  # every corpus session: CI runs it
@pytest.mark.parametrize("path", all_files(), ids=lambda p: p.name)
def test_real_sessions_copy_exactly(tmp_path: Path, store: SessionStore, path: Path) -> None:
    """Each corpus session (OpenCode exports, Claude Code transcripts), read back and written again in one
    call, reads back equal: every message, part, tool state and output."""
    source = SessionStore.open(f"sqlite:///{tmp_path / 'source.db'}")
    try:
        for session_id in import_file(source, path):
            returned = copy_session(source, store, session_id)
            assert returned == store.messages(session_id) == source.messages(session_id)
            assert store.filter_compacted(session_id) == source.filter_compacted(session_id)
            assert boundary(store, session_id) == boundary(source, session_id)
    finally:
        source.close()


def test_a_finished_turn_in_one_call(store: SessionStore) -> None:
    session = store.create_session()
    store.append_message(session.id, "user")  # seq 1 exists already
    turn = [
        {"info": {"role": "user"}, "parts": [{"type": "text", "text": "list the files"}]},
        {
            "info": {"role": "assistant", "finish": "stop", "tokens": {"input": 100, "output": 20}, "cost": 0.01, "time": {"created": 5, "completed": 9}},
            "parts": [
                {"type": "tool", "call_id": "c1", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"}, "output": "a\nb", "title": "ls"}},
                {"type": "text", "text": "two files"},
            ],
        },
    ]
    user, reply = store.append_messages(session.id, turn)
    assert (user.info.seq, reply.info.seq) == (2, 3)
    assert user.info.id.startswith("msg_") and all(p.id.startswith("prt_") for p in user.parts + reply.parts)
    assert {p.message_id for p in reply.parts} == {reply.info.id}
    assert reply.info.time.created == 5 and reply.info.time.completed == 9 and reply.info.tokens.input == 100
    tool = reply.parts[0]
    assert tool.state.time.start == tool.state.time.end is not None  # filled in as stored
    assert store.messages(session.id)[1:] == [user, reply]
    assert store.get_session(session.id).message_count == 3


def test_the_callers_models_are_not_changed(store: SessionStore) -> None:
    first = store.create_session()
    history = store.append_messages(first.id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "x"}]}])
    stripped = [
        MessageWithParts(info=m.info.model_copy(update={"id": "msg_copy"}), parts=[p.model_copy(update={"id": None}) for p in m.parts])
        for m in history
    ]
    before = [m.model_dump() for m in stripped]
    second = store.create_session()
    copied = store.append_messages(second.id, stripped)
    assert [m.model_dump() for m in stripped] == before
    assert copied[0].info.session_id == second.id and copied[0].parts[0].session_id == second.id
    assert copied[0].parts[0].id != history[0].parts[0].id


def test_inside_a_batch_it_commits_with_the_rest(store: SessionStore) -> None:
    session = store.create_session()

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with store.batch():
            store.append_message(session.id, "user")
            store.append_messages(session.id, [{"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "y"}]}])
            raise Boom
    assert store.messages(session.id) == []
    with store.batch():
        store.append_message(session.id, "user")
        store.append_messages(session.id, [{"info": {"role": "assistant"}}])
    assert [m.info.seq for m in store.messages(session.id)] == [1, 2]


def test_refused_inside_a_batch_the_batch_goes_on(store: SessionStore) -> None:
    """A call refused for an existing id writes nothing, not even the seqs it would take; the batch's
    earlier writes stay and later ones go in (on PostgreSQL: no statement failed, the transaction lives)."""
    session = store.create_session()
    store.append_messages(session.id, _turn("k"))
    with store.batch():
        noted = store.append_message(session.id, "user")
        with pytest.raises(InvalidInput, match="message msg_k2 already exists"):
            store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_new"}}, {"info": {"role": "user", "id": "msg_k2"}}])
        with pytest.raises(InvalidInput, match="part prt_k1 already exists"):
            store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_new"}, "parts": [{"type": "text", "id": "prt_k1", "text": "c"}]}])
        store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_new"}}])
    history = [(m.info.id, m.info.seq) for m in store.messages(session.id)]
    assert history == [("msg_k1", 1), ("msg_k2", 2), (noted.id, 3), ("msg_new", 4)]
    assert store.get_session(session.id).message_count == 4


def test_a_completed_compaction_moves_the_boundary(store: SessionStore) -> None:
    session = store.create_session()
    store.append_messages(session.id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "old"}]}])
    compaction = [
        {"info": {"role": "user", "id": "msg_c"}, "parts": [{"type": "compaction", "auto": True}]},
        {"info": {"role": "assistant", "id": "msg_s", "parent_id": "msg_c", "summary": True, "finish": "stop"}, "parts": [{"type": "text", "text": "summary"}]},
    ]
    store.append_messages(session.id, compaction)
    assert boundary(store, session.id) == ("msg_c", 2, 3)
    assert [m.info.id for m in store.filter_compacted(session.id)] == ["msg_c", "msg_s"]


def test_nothing_to_append(store: SessionStore) -> None:
    session = store.create_session()
    before = dump(store.engine, session.id)
    assert store.append_messages(session.id, []) == []
    assert dump(store.engine, session.id) == before
    with pytest.raises(NotFound):
        store.append_messages("ses_missing", [])


def _turn(tag: str) -> list[dict[str, Any]]:
    return [
        {"info": {"role": "user", "id": f"msg_{tag}1"}, "parts": [{"type": "text", "id": f"prt_{tag}1", "text": "a"}]},
        {"info": {"role": "assistant", "id": f"msg_{tag}2"}, "parts": [{"type": "text", "id": f"prt_{tag}2", "text": "b"}]},
    ]


def _with(turn: list[dict[str, Any]], index: int, **changes: Any) -> list[dict[str, Any]]:
    changed = [dict(item) for item in turn]
    changed[index].update(changes)
    return changed


BAD: dict[str, Any] = {
    "not a list": {"info": {"role": "user"}},
    "an item that is not a message": ["hello"],
    "no info": [{"parts": []}],
    "an unknown key": [{"info": {"role": "user"}, "parts": [], "extra": 1}],
    "parts not a list": [{"info": {"role": "user"}, "parts": "text"}],
    "a bad role, second item": _with(_turn("x"), 1, info={"role": "system"}),
    "an unknown message field": _with(_turn("x"), 1, info={"role": "assistant", "colour": "red"}),
    "a bad time": _with(_turn("x"), 1, info={"role": "assistant", "time": {"start": 1}}),
    "a bad part, last": _with(_turn("x"), 1, parts=[{"type": "text", "text": "ok"}, {"type": "nope"}]),
    "a completed tool without output": _with(
        _turn("x"), 1, parts=[{"type": "tool", "call_id": "c", "tool": "t", "state": {"status": "completed", "input": {}}}]
    ),
    "a malformed id": _with(_turn("x"), 0, info={"role": "user", "id": "msg with spaces"}),
    "a message id twice": _turn("x") + [{"info": {"role": "user", "id": "msg_x1"}}],
    "a part id twice": _with(_turn("x"), 1, parts=[{"type": "text", "id": "prt_x1", "text": "again"}]),
    "an existing message id": _with(_turn("x"), 1, info={"role": "assistant", "id": "msg_kept"}),
    "an existing part id": _with(_turn("x"), 1, parts=[{"type": "text", "id": "prt_kept", "text": "c"}]),
    "a cost that is not finite": _with(_turn("x"), 1, info={"role": "assistant", "cost": float("inf")}),
    "unstorable metadata": _with(_turn("x"), 1, info={"role": "assistant", "metadata": {"x": float("nan")}}),
}


@pytest.mark.parametrize("bad", list(BAD.values()), ids=list(BAD))
def test_bad_input_is_refused_and_nothing_written(store: SessionStore, bad: Any) -> None:
    session = store.create_session(id="ses_bad")
    store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_kept"}, "parts": [{"type": "text", "id": "prt_kept", "text": "k"}]}])
    before = dump(store.engine)
    with pytest.raises(InvalidInput):
        store.append_messages(session.id, bad)
    assert dump(store.engine) == before


def test_an_existing_id_is_named(store: SessionStore) -> None:
    session = store.create_session()
    store.append_messages(session.id, _turn("z"))
    with pytest.raises(InvalidInput, match="message msg_z2 already exists"):
        store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_z2"}}])
    with pytest.raises(InvalidInput, match="part prt_z1 already exists"):
        store.append_messages(session.id, [{"info": {"role": "user"}, "parts": [{"type": "text", "id": "prt_z1", "text": "c"}]}])


@pytest.mark.parametrize("where", [0, 2, 255, 256, 599])
def test_an_existing_id_is_found_among_many(store: SessionStore, where: int) -> None:
    """Given ids are checked a chunk of up to 256 at a time (padded to a power of two): an existing one is
    found wherever it sits, and nothing is written."""
    session = store.create_session()
    store.append_messages(session.id, [{"info": {"role": "user"}, "parts": [{"type": "text", "id": "prt_old", "text": "o"}]}])
    parts = [{"type": "text", "id": f"prt_new{n:03d}", "text": str(n)} for n in range(600)]
    parts[where]["id"] = "prt_old"
    messages = [{"info": {"role": "user", "id": f"msg_new{n}"}} for n in range(300)]
    before = dump(store.engine)
    with pytest.raises(InvalidInput, match="part prt_old already exists"):
        store.append_messages(session.id, [*messages, {"info": {"role": "assistant"}, "parts": parts}])
    assert dump(store.engine) == before
    parts[where]["id"] = "prt_fresh"
    copied = store.append_messages(session.id, [*messages, {"info": {"role": "assistant"}, "parts": parts}])
    assert [p.id for p in copied[-1].parts] == [p["id"] for p in parts]
    with pytest.raises(InvalidInput, match="message msg_new299 already exists"):
        store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_other"}}, *messages[::-1]])


def test_unknown_session_writes_nothing(store: SessionStore) -> None:
    before = dump(store.engine)
    with pytest.raises(NotFound):
        store.append_messages("ses_missing", _turn("y"))
    with pytest.raises(NotFound):
        store.append_messages("bad id!", _turn("y"))
    assert dump(store.engine) == before


def test_ids_are_assigned_in_order(store: SessionStore) -> None:
    session = store.create_session()
    items = [{"info": {"role": role}, "parts": [{"type": "text", "text": str(n)}] * 2} for n, role in zip(range(6), itertools.cycle(["user", "assistant"]))]
    history = store.append_messages(session.id, items)
    message_ids = [m.info.id for m in history]
    part_ids = [p.id for m in history for p in m.parts]
    assert message_ids == sorted(message_ids) and len(set(message_ids)) == 6
    assert part_ids == sorted(part_ids) and len(set(part_ids)) == 12
    assert [m.info.seq for m in history] == [1, 2, 3, 4, 5, 6]
