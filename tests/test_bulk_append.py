"""``append_messages``' bulk path: on PostgreSQL each table's rows go in as one statement (``db/pg_bulk.py``) and
the ids given are checked in one array parameter per kind.

What it stores must equal what the row-by-row calls store for every shape a JSON value holds (a string, a
number, text escaped for storage, nothing at all), and it must hold without server-side prepared statements
(a transaction-pooling pooler cannot keep them: psycopg's ``prepare_threshold=None``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integrity import dump
from sqlalchemy import event, text

from brutus import InvalidInput, SessionStore, make_engine
from brutus.db import pg_bulk
from test_append_messages import copy_session, fixed

ODD = "nul\x00 lone\ud800 esc\ue000 quote\" back\\slash \\u0000 crlf\r\n tab\t 漢字"
SHAPES: list[Any] = [None, "a JSON string", ODD, 7, 2.5, True, [], {}, [ODD, {"k": None}], {ODD: [1, {"deep": ODD}]}]


@pytest.fixture
def other(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> SessionStore:
    url = f"sqlite:///{tmp_path / 'other.db'}" if backend == "sqlite" else request.getfixturevalue("db_url")
    store = fixed(SessionStore.open(url))
    yield store
    store.close()


def write_shapes(store: SessionStore) -> str:
    """A session holding every shape in SHAPES, written by the single calls; its id."""
    fixed(store)
    session = store.create_session(id="ses_shapes")
    for n, shape in enumerate(SHAPES):
        user = store.append_message(session.id, "user", id=f"msg_u{n:02d}", metadata=None if shape is None else {"v": shape})
        store.append_part(user.id, {"type": "text", "id": f"prt_t{n:02d}", "text": ODD, "metadata": {"v": shape}})
        reply = store.append_message(session.id, "assistant", id=f"msg_a{n:02d}", parent_id=user.id)
        state = {"status": "completed", "input": {"v": shape}, "output": ODD, "title": ODD, "metadata": {"v": shape}}
        store.append_part(reply.id, {"type": "tool", "id": f"prt_c{n:02d}", "call_id": ODD, "tool": "bash", "state": state})
        error = None if shape is None else {"name": "APIError", "data": {"v": shape}}
        store.finish_message(reply.id, finish="error" if error else "stop", cost=0.1 * n, error=error)
    return session.id


def test_json_values_of_every_shape_are_stored_as_the_single_calls_store_them(store: SessionStore, other: SessionStore) -> None:
    session_id = write_shapes(store)
    returned = copy_session(store, other, session_id)
    assert dump(other.engine, session_id) == dump(store.engine, session_id)
    assert returned == other.messages(session_id) == store.messages(session_id)


@pytest.mark.parametrize("rows, chars", [(3, 10**9), (10**6, 50)], ids=["by rows", "by text"])
def test_a_large_call_goes_in_chunks_and_stores_the_same(
    backend: str,
    store: SessionStore, other: SessionStore, monkeypatch: pytest.MonkeyPatch, rows: int, chars: int
) -> None:
    """On PostgreSQL a table's rows go in a chunk per statement past a number of rows or of characters of
    text (so a whole imported history is never one parameter the server cannot allocate): the same rows."""
    monkeypatch.setattr(pg_bulk, "CHUNK_ROWS", rows)
    monkeypatch.setattr(pg_bulk, "CHUNK_CHARS", chars)
    session_id = write_shapes(store)
    sent: list[str] = []
    listener = lambda conn, cursor, statement, *rest: sent.append(statement.split(" (")[0])  # noqa: E731
    event.listen(other.engine, "before_cursor_execute", listener)
    copy_session(store, other, session_id)
    event.remove(other.engine, "before_cursor_execute", listener)
    assert dump(other.engine, session_id) == dump(store.engine, session_id)
    if backend == "postgresql":  # ten outputs of some 60 characters: by 3 rows, or one by one
        assert sent.count("INSERT INTO tool_outputs") == (4 if rows == 3 else 10)


def test_many_ids_in_one_call_a_taken_one_refused(store: SessionStore) -> None:
    """Thousands of ids given in one call: all free, then one of them taken (a part, near the end), which
    refuses the whole call and writes nothing."""
    session = store.create_session()
    parts = [{"type": "text", "id": f"prt_many{n:05d}", "text": str(n)} for n in range(3000)]
    messages = [{"info": {"role": "user", "id": f"msg_many{n:05d}"}, "parts": parts[n * 3 : n * 3 + 3]} for n in range(1000)]
    assert len(store.append_messages(session.id, messages[:999])) == 999
    before = dump(store.engine)
    again = [{"info": {"role": "user", "id": "msg_fresh"}, "parts": [dict(parts[-4], id="prt_fresh")] + parts[2995:2997]}]
    with pytest.raises(InvalidInput, match="part prt_many02995 already exists"):
        store.append_messages(session.id, again)
    assert dump(store.engine) == before
    assert store.get_session(session.id).message_count == 999


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_no_server_side_prepared_statements_needed(backend: str, db_url: str) -> None:
    """With psycopg's automatic preparing off (as behind pgbouncer in transaction mode), calls repeated past
    its threshold work, refusals inside a batch leave the batch alive, and nothing is left prepared."""
    SessionStore.open(db_url).close()  # migrated
    store = SessionStore(make_engine(db_url, connect_args={"prepare_threshold": None}))
    try:
        session = store.create_session()
        for n in range(8):
            turn = [{"info": {"role": "user", "id": f"msg_p{n}"}, "parts": [{"type": "text", "id": f"prt_p{n}", "text": ODD}]}]
            store.append_messages(session.id, turn)
        with store.batch():
            with pytest.raises(InvalidInput, match="message msg_p3 already exists"):
                store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_p3"}}])
            store.append_messages(session.id, [{"info": {"role": "user", "id": "msg_p8"}}])
        assert [m.info.id for m in store.messages(session.id)] == [f"msg_p{n}" for n in range(9)]
        with store.engine.connect() as conn:  # the one connection the store used (one thread, one at a time)
            assert conn.execute(text("SELECT count(*) FROM pg_prepared_statements")).scalar() == 0
    finally:
        store.close()
