"""PostgreSQL connections: a pooled connection the server closed is replaced as it is checked out (no pre-ping
round trip: ``brutus.db.engine.pg_events``), and the async store's calls run on threads with psycopg's sync
connection (``brutus.db.async_pg``)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from pgcluster import wait_for
from sqlalchemy import event
from sqlalchemy.engine import make_url

from brutus import AsyncSessionStore, SessionStore
from brutus.db.async_pg import PGThreads
from conftest import plain_url

pytestmark = [pytest.mark.parametrize("backend", ["postgresql"], indirect=True)]
NAME = "brutus_test_hung_up"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _named(url: str) -> str:
    """``url`` whose connections say who they are (``application_name``), so the test can find and end them."""
    return make_url(url).update_query_dict({"application_name": NAME}).render_as_string(hide_password=False)


class Backends:
    """The server's side of the store's connections, seen and terminated from a connection of the test's."""

    def __init__(self, url: str) -> None:
        libpq = make_url(plain_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)
        self.conn = psycopg.connect(libpq, autocommit=True)

    def pids(self) -> set[int]:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (NAME,)).fetchall()
        return {pid for (pid,) in rows}

    def terminate(self) -> set[int]:
        """End every backend of the store; once they are gone, their pids."""
        pids = self.pids()
        assert pids, "the store keeps no connection in its pool"
        for pid in pids:
            self.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_for(lambda: not (self.pids() & pids), "the terminated backends to end")
        return pids

    def close(self) -> None:
        self.conn.close()


@pytest.mark.direct  # through a pooler the client's connection is the pooler's, which outlives a backend
def test_a_pooled_connection_the_server_closed_is_replaced_without_an_error(store_url: str) -> None:
    backends = Backends(store_url)
    try:
        with SessionStore.open(_named(store_url), index_in_background=False) as store:
            session = store.create_session()
            ended = backends.terminate()
            message = store.append_message(session.id, "user")  # no error: the dead connection is not used
            assert message.seq == 1 and [m.info.id for m in store.messages(session.id)] == [message.id]
            assert backends.pids() and not (backends.pids() & ended)
    finally:
        backends.close()


@pytest.mark.direct
@pytest.mark.anyio
async def test_the_async_stores_dead_connections_are_replaced_too(store_url: str) -> None:
    backends = Backends(store_url)
    try:
        async with await AsyncSessionStore.open(_named(store_url), index_in_background=False) as store:
            session = await store.create_session()
            async with store.batch():  # a connection of the async engine (a batch), and of the twin (the calls)
                await store.append_message(session.id, "user")
            await store.append_message(session.id, "user")
            ended = backends.terminate()
            async with store.batch():
                await store.append_message(session.id, "user")
            message = await store.append_message(session.id, "user")
            assert message.seq == 4 and len(await store.messages(session.id)) == 4
            assert not (backends.pids() & ended)
    finally:
        backends.close()


@pytest.mark.anyio
async def test_async_calls_run_whole_on_threads_of_the_store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trips: list[str] = []
    original = PGThreads.transaction

    def counted(self: PGThreads, *args: Any) -> Any:
        trips.append(threading.current_thread().name)
        return original(self, *args)

    monkeypatch.setattr(PGThreads, "transaction", counted)
    async with await AsyncSessionStore.open(store_url, index_in_background=False) as store:
        session = await store.create_session()
        message = await store.append_message(session.id, "user")
        await store.append_part(message.id, {"type": "text", "text": "one"})
        async with store.batch():  # a batch's calls share its connection on the event loop's side
            await store.append_part(message.id, {"type": "text", "text": "two"})
        history = await store.messages(session.id)
    assert [p.text for p in history[0].parts] == ["one", "two"]
    assert len(trips) == 4 and all(name.startswith("brutus-pg") for name in trips)


def test_a_recorded_response_is_one_statement_and_the_requests_reads_need_no_transaction(store_url: str) -> None:
    """On an untenanted store a live step's response is recorded by one statement (the seqs taken, the message,
    its parts and tool calls inserted), and it and the next request's reads run without BEGIN and COMMIT
    (psycopg in autocommit): each is its own transaction. Tool results keep theirs (a locked read, then the
    writes planned from it, sent in psycopg's pipeline mode). The history is what the calls wrote."""
    sent: list[tuple[str, bool]] = []

    piped: list[bool] = []

    def listener(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        driver = conn.connection.driver_connection
        sent.append((statement.split(" ", 1)[0], driver.autocommit))
        piped.append(bool(driver.pgconn.pipeline_status))

    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        conv = store.conversation(session.id, model="claude-sonnet-4-5")
        conv.user("list the files")
        conv.request()
        response = {
            "id": "msg_api_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Listing."}, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}],
            "usage": {"input_tokens": 40, "output_tokens": 12},
        }
        steps = {}
        event.listen(store.engine, "before_cursor_execute", listener)
        try:
            for name, call in (("record", lambda: conv.record(response)),
                               ("results", lambda: conv.tool_results([{"tool_use_id": "toolu_1", "content": "a.py"}])),
                               ("request", conv.request)):
                sent.clear()
                piped.clear()
                call()
                steps[name] = list(sent)
                steps[name + " piped"] = list(piped)
        finally:
            event.remove(store.engine, "before_cursor_execute", listener)
        assert steps["record"] == [("WITH", True)]
        assert steps["results"] and all(not autocommit for _, autocommit in steps["results"])
        # the newest response and its tool parts read, then the four writes sent together (one round trip)
        assert [verb for verb, _ in steps["results"]] == ["SELECT", "SELECT", "UPDATE", "INSERT", "UPDATE", "UPDATE"]
        assert steps["results piped"] == [False, False, True, True, True, True]
        assert steps["request"] and all(autocommit for _, autocommit in steps["request"])
        history = store.messages(session.id)
    assert [(m.info.role, m.info.seq) for m in history] == [("user", 1), ("assistant", 2)]
    tool = history[1].parts[1]
    assert (history[1].parts[0].text, tool.call_id, tool.state.status, tool.state.output) == ("Listing.", "toolu_1", "completed", "a.py")


def test_an_error_in_a_pipelined_write_is_a_brutus_error_and_nothing_is_written(store_url: str) -> None:
    """Writes whose results are not wanted go together (psycopg's pipeline mode, ``runner.drive``): the one the
    database refuses, here the second of three, fails the call with the error it would have raised alone, and
    the transaction writes nothing, the writes before it included."""
    from brutus import InvalidInput
    from brutus.db import statements as st
    from brutus.db.statements import step
    from brutus.flows import Tx

    def op() -> Any:
        yield step(st.UPDATE_PART_TOKENS, {"b_pid": part.id, "b_tokens": 999, "b_now": 1})
        yield step(st.INSERT_TOOL_OUTPUT, {"part_id": "prt_nowhere", "output": "x"})  # no such part
        yield step(st.UPDATE_PART_TOKENS, {"b_pid": part.id, "b_tokens": 998, "b_now": 2})
        return "written"

    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        message = store.append_message(session.id, "user")
        part = store.append_part(message.id, {"type": "text", "text": "hello"})
        before = store.messages(session.id)
        with pytest.raises(InvalidInput, match="refused by the database: insert or update on table .tool_outputs"):
            store.run(Tx(op()))
        assert store.messages(session.id) == before
        store.append_part(message.id, {"type": "text", "text": "again"})  # the connection is fine after it
        assert [p.text for p in store.messages(session.id)[0].parts] == ["hello", "again"]
