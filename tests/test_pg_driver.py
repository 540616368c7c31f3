"""PostgreSQL's statement runner (``brutus.db.pg_driver``): prebuilt statements run on psycopg directly, and
what they write and read is what SQLAlchemy Core writes and reads for them.

The reference is the same store with a ``before_cursor_execute`` listener on its engine: there every statement
goes through Core, so listeners (tracing, these tests' probes) see them all."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from corpus_helpers import corpus_file
from live_helpers import EVERY_BLOCK, response
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import make_url

from brutus import InvalidInput, SessionStore, Unavailable
from brutus.db import statements as st
from brutus.db.pg_driver import PGDriver
from brutus.db.sqlite_driver import prebuilt
from brutus.db.statements import step
from brutus.flows import Tx
from brutus.importers import import_file
from conftest import plain_url

pytestmark = [pytest.mark.parametrize("backend", ["postgresql"], indirect=True)]

IN_SESSIONS = "session_id = ANY(%s)"
TABLES = {  # every row brutus writes for a session, in an order both runs give (ids are time-ordered)
    "sessions": ("id = ANY(%s)", "id"),
    "messages": (IN_SESSIONS, "id"),
    "parts": (IN_SESSIONS, "id"),
    "tool_states": (IN_SESSIONS, "part_id"),
    "tool_outputs": ("part_id IN (SELECT id FROM parts WHERE session_id = ANY(%s))", "part_id"),
    "compactions": (IN_SESSIONS, "id"),
}
ID = re.compile(r"\b(?:ses|msg|prt|cmp)_[0-9a-f]{12}[0-9A-Za-z]{14}\b")
CLOCK = 1_767_000_000_000


@contextmanager
def through_core(store: SessionStore) -> Iterator[list[str]]:
    """Every statement of ``store`` through Core while it lasts (a listener waits for them): their SQL."""
    seen: list[str] = []

    def listener(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)


@pytest.fixture
def core_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements run through Core's ``Connection.execute`` (their first word) while the test runs."""
    calls: list[str] = []
    original = Connection.execute

    def counted(self: Connection, statement: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(statement).split(None, 1)[0])
        return original(self, statement, *args, **kwargs)

    monkeypatch.setattr(Connection, "execute", counted)
    return calls


def workload(store: SessionStore) -> list[str]:
    """A session imported from the corpus, pruned; a live conversation's steps with every kind of block and a
    tool call answered; a rename. The sessions it made."""
    [imported] = import_file(store, corpus_file("nimble-pixel"))
    store.prune(imported)
    session = store.create_session(title="driver")
    conv = store.conversation(session.id, model="claude-opus-4-6")
    conv.user("find the flaky test")
    conv.request()
    conv.record(response(EVERY_BLOCK, stop_reason="tool_use"))
    conv.tool_results([{"tool_use_id": "toolu_01A", "content": "1 failed, 9 passed", "is_error": False}])
    conv.request()
    conv.record(response([{"type": "text", "text": "Fixed: it waited on a clock."}]))
    conv.user([{"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}])
    conv.request()
    store.update_session(session.id, title="driver, renamed")
    return [imported, session.id]


def rows(url: str, sessions: list[str]) -> dict[str, list[Any]]:
    """The workload's rows of every table, ids numbered in order of first appearance (each run makes new ones)."""
    libpq = make_url(plain_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)
    found: dict[str, list[Any]] = {}
    with psycopg.connect(libpq, prepare_threshold=None) as conn:
        for table, (where, order) in TABLES.items():
            query = f"SELECT row_to_json(t)::text FROM {table} t WHERE {where} ORDER BY {order}"
            found[table] = [json.loads(text) for (text,) in conn.execute(query, (sessions,))]
            for row in found[table]:
                row.pop("search_xid", None)  # the id of the transaction that wrote it, for the search index
    numbers: dict[str, str] = {}
    dumped = json.dumps(found, sort_keys=True)
    return json.loads(ID.sub(lambda m: numbers.setdefault(m.group(0), f"id{len(numbers)}"), dumped))


def reads(store: SessionStore, sessions: list[str]) -> list[Any]:
    """What the read calls give for the workload's sessions."""
    out: list[Any] = []
    for session_id in sessions:
        out += [store.get_session(session_id), store.messages(session_id), store.filter_compacted(session_id),
                store.stats(session_id), store.compactions(session_id), store.conversation(session_id, model="m").view()]
    out.append(store.search("flaky", limit=5))
    out.append([s.id for s in store.list_sessions(limit=10)])
    return out


def test_the_workload_writes_and_reads_on_psycopg_what_it_writes_and_reads_through_core(store_url: str, core_calls: list[str]) -> None:
    with SessionStore.open(store_url, index_in_background=False, clock=lambda: CLOCK) as store:
        with through_core(store) as seen:
            made = workload(store)
        assert len(seen) > 40  # the reference did go through Core
        by_core, read_by_core = rows(store_url, made), reads(store, made)
        for session_id in made:
            store.delete_session(session_id)
        core_calls.clear()
        made_direct = workload(store)
        writes_through_core = [verb for verb in core_calls if verb != "SELECT"]
        assert rows(store_url, made_direct) == by_core
        assert len(made_direct) == len(made)
        with through_core(store):
            read_through_core = reads(store, made_direct)
        direct = reads(store, made_direct)
    assert direct == read_through_core
    assert [type(x) for x in direct] == [type(x) for x in read_by_core]
    assert writes_through_core == []


def test_a_live_step_runs_no_statement_through_core(store_url: str, core_calls: list[str]) -> None:
    """A live step's statements (the response recorded in one, tool results, the request's reads) all run on
    psycopg directly: prebuilt, or built once for their shape."""
    with SessionStore.open(store_url, index_in_background=False) as store:
        conv = store.conversation(store.create_session().id, model="claude-opus-4-6")
        conv.user("list the files")
        conv.request()
        core_calls.clear()
        for _ in range(3):
            conv.record(response([{"type": "text", "text": "Listing."}, {"type": "tool_use", "id": "toolu_1", "name": "bash",
                                                                          "input": {"command": "ls"}}], stop_reason="tool_use"))
            conv.tool_results([{"tool_use_id": "toolu_1", "content": "a.py"}])
            conv.request()
        assert core_calls == []
        history = store.messages(conv.session_id)
    assert [m.info.role for m in history] == ["user", "assistant", "assistant", "assistant"]  # results fill the calls
    assert [p.state.output for m in history for p in m.parts if p.type == "tool"] == ["a.py"] * 3


def test_a_refused_write_is_a_brutus_error_and_a_cut_connection_is_replaced(store_url: str) -> None:
    """The driver's errors are Core's: a constraint refused is ``InvalidInput`` with nothing written; a
    connection the server ended is ``Unavailable``, invalidated, and the next call gets a new one."""

    def refused(session_id: str) -> Any:  # statements that want a result: not pipelined
        yield step(st.TOUCH_SESSION, {"b_sid": session_id, "b_now": 1}, fetch="rowcount")
        yield step(st.INSERT_TOOL_OUTPUT, {"part_id": "prt_nowhere", "output": "x"}, fetch="rowcount")

    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        with pytest.raises(InvalidInput, match="refused by the database: insert or update on table .tool_outputs"):
            store.run(Tx(refused(session.id)))
        assert store.get_session(session.id) == session  # the touch rolled back with it
        store.append_message(session.id, "user")

        def ended() -> Any:
            yield step(st.SESSION_ID, {"b_sid": session.id}, fetch="first")
            yield step(_TERMINATE_SELF, fetch="first")

        with pytest.raises(Unavailable, match="retryable"):
            store.run(Tx(ended(), write=False))
        assert store.append_message(session.id, "assistant").seq == 2


_TERMINATE_SELF = prebuilt(text("SELECT pg_terminate_backend(pg_backend_pid())"))


def test_with_a_listener_every_statement_goes_through_core(store_url: str, core_calls: list[str]) -> None:
    """Instrumentation that listens for statements sees every one: the driver steps aside."""
    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        with through_core(store) as seen, store.engine.connect() as connection:
            assert PGDriver.direct(connection) is False
            store.append_message(session.id, "user")
            store.messages(session.id)
        assert [sql.split(None, 1)[0] for sql in seen] == ["UPDATE", "INSERT", "SELECT", "SELECT", "SELECT"]
        assert [verb for verb in core_calls if verb != "SELECT"] == ["UPDATE", "INSERT"]
        with store.engine.connect() as connection:
            assert PGDriver.direct(connection) is True
